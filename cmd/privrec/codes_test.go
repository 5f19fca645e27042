package main

import (
	"strings"
	"testing"

	"github.com/privrec/privrec/deploy"
)

// TestEnrollCodes: enroll-codes prints N distinct codes, and client
// refuses a code for a vendor's users and a code with a token.
func TestEnrollCodes(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "enroll-codes", "--state", dir, "-n", "5")
	if err != nil {
		t.Fatal(err)
	}
	codes := strings.Fields(out)
	seen := map[string]bool{}
	for _, c := range codes {
		if !strings.HasPrefix(c, deploy.CodePrefix) || seen[c] {
			t.Errorf("code %q: want distinct codes starting %q", c, deploy.CodePrefix)
		}
		seen[c] = true
	}
	if len(codes) != 5 {
		t.Fatalf("%d codes, want 5: %q", len(codes), out)
	}
	for _, args := range [][]string{
		{"client", "--server", "https://127.0.0.1:1", "--code", codes[0], "--simulate", "all"},
		{"client", "--server", "https://127.0.0.1:1", "--code", codes[0], "--token-file", "x", "--ratings", "r.csv"},
		{"client", "--server", "https://127.0.0.1:1", "--ratings", "r.csv"},
	} {
		if _, _, err := run(t, args...); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
