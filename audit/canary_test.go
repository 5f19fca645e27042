package audit

import (
	"context"
	"strings"
	"testing"
)

// TestCanary runs the sensitivity canary: every protected row within its
// charged sensitivity, every control above it, and the paper's
// per-rating figure of HDPMF among the broken controls.
func TestCanary(t *testing.T) {
	rep, err := Run(context.Background(), Config{Quick: true, Seed: 1, Attack: "canary"})
	if err != nil {
		t.Fatal(err)
	}
	var paper bool
	for _, r := range rep.Results {
		t.Logf("%-8s %-70s %-9s %s %s", r.Method, r.Case, r.Role, num(r.Value), r.Status)
		if !r.OK() {
			t.Errorf("%s (%s), %s: %s at %s", r.Method, r.Case, r.Role, r.Status, num(r.Value))
		}
		if r.Method == "hdpmf" && r.Role == Control && strings.Contains(r.Case, "paper") && r.Status == Broken {
			paper = true
		}
	}
	if !paper {
		t.Error("no broken control for HDPMF's per-rating figure as the paper computes it")
	}
}
