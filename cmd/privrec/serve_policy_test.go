package main

import (
	"strings"
	"testing"
)

// TestServeActivePolicy: a masked run is served under the protocol
// against a lying server, with this server checking certificates and
// signatures, unless --insecure; a method without masked rounds is not
// asked for an authority.
func TestServeActivePolicy(t *testing.T) {
	for _, tc := range []struct {
		name           string
		masked, active bool
		key, run       string
		insecure       bool
		want           string // "" for no error
	}{
		{"the default needs the authority", true, true, "", "", false, "--authority-key"},
		{"the authority and the run", true, true, "a.pub", "r1", false, ""},
		{"a key without a run", true, true, "a.pub", "", false, "needs --run"},
		{"a run without a key", true, true, "", "r1", false, "--run names the run"},
		{"honest-but-curious refused", true, false, "", "", false, "honest-but-curious"},
		{"honest-but-curious with --insecure", true, false, "", "", true, ""},
		{"unchecked relay with --insecure", true, true, "", "", true, ""},
		{"a key with the passive protocol", true, false, "a.pub", "r1", true, "drop --secagg-active=false"},
		{"no masked rounds", false, true, "", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := activePolicy(tc.masked, tc.active, tc.key, tc.run, tc.insecure)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}
