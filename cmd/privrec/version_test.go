package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersion checks that privrec --version and privrec version print the
// same line, with the module and the Go version, and that --json parses.
func TestVersion(t *testing.T) {
	flag, _, err := run(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if flag != sub {
		t.Errorf("--version printed %q, version %q", flag, sub)
	}
	if !strings.HasPrefix(flag, "privrec ") || !strings.Contains(flag, modulePath) || !strings.Contains(flag, runtime.Version()) {
		t.Errorf("--version = %q, want privrec, %s and %s", flag, modulePath, runtime.Version())
	}
	out, _, err := run(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v buildVersion
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Module != modulePath || v.Version == "" {
		t.Errorf("version --json = %s (%v)", out, err)
	}
}

func TestPseudoRevision(t *testing.T) {
	tests := map[string]string{
		"v0.0.0-20261126191935-e05e9507cca7":       "e05e9507cca7",
		"v0.0.0-20261126191935-e05e9507cca7+dirty": "e05e9507cca7",
		"v1.2.4-0.20261126191935-e05e9507cca7":     "e05e9507cca7",
		"v1.2.3":                                   "",
		"(devel)":                                  "",
		"v1.2.3-rc.1":                              "",
	}
	for in, want := range tests {
		if got := pseudoRevision(in); got != want {
			t.Errorf("pseudoRevision(%q) = %q, want %q", in, got, want)
		}
	}
}
