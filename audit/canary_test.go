package audit

import (
	"context"
	"github.com/privrec/privrec/method"
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

// TestCanaryCoversEveryFiniteClaim checks that every method whose claim
// can report a finite ε has a protected canary row and a control, except
// the ones the attack's documentation explains (the SDCF family reports no
// finite ε against the server it runs with; dp-pmf and pdp-pmf use
// objective perturbation, which releases no statistic to compare).
func TestCanaryCoversEveryFiniteClaim(t *testing.T) {
	exempt := map[string]bool{"dp-pmf": true, "pdp-pmf": true, "sdmf": true, "sd-fm": true, "sdmf-alpha-inf": true,
		"sd-bprmf": true, "ldp-op-basic": true}
	a, err := Lookup("canary")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]map[Role]bool{}
	for _, c := range a.cases(&env{}) {
		if roles[c.method] == nil {
			roles[c.method] = map[Role]bool{}
		}
		roles[c.method][c.role] = true
	}
	for _, s := range method.All() {
		if s.Claim.Unit == "none" || exempt[s.Name] {
			continue
		}
		if !roles[s.Name][Protected] || !roles[s.Name][Control] {
			t.Errorf("%s: canary rows %v, want a protected row and a control", s.Name, roles[s.Name])
		}
	}
}
