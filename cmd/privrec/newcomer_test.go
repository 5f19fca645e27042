package main

import (
	"strings"
	"testing"
)

// TestClientSeedHelp: leaving out client --seed means crypto randomness,
// so its help shows no default seed.
func TestClientSeedHelp(t *testing.T) {
	out, _, err := run(t, "client", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--seed uint") && (strings.Contains(line, "(default") || !strings.Contains(line, "crypto randomness")) {
			t.Errorf("client --seed help: %q", line)
		}
	}
}
