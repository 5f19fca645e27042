package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientPopulationFlag: --population is refused without --simulate,
// and a malformed spec is refused before any connection, with an error
// naming the field.
func TestClientPopulationFlag(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"client", "--server", "https://127.0.0.1:1", "--token-file", tok}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--ratings", "r.csv", "--population", "churn:0.1"}, "use it with --simulate"},
		{[]string{"--simulate", "all", "--population", "churn:2"}, "churn"},
		{[]string{"--simulate", "all", "--population", "weekly:1"}, "unknown field"},
		{[]string{"--simulate", "all", "--population", "late:0.2"}, "late"},
	}
	for _, tt := range tests {
		_, _, err := run(t, append(base, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--population") {
			t.Errorf("%v: error %v, want one naming --population and %q", tt.args, err, tt.want)
		}
	}
}

// TestClientStayNeedsRatings: --stay keeps one device (--ratings) until
// the run's end; with a vendor's --simulate it is refused before any
// connection.
func TestClientStayNeedsRatings(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "client", "--server", "https://127.0.0.1:1", "--token-file", tok, "--simulate", "all", "--stay")
	if err == nil || !strings.Contains(err.Error(), "--stay") || !strings.Contains(err.Error(), "--ratings") {
		t.Errorf("--simulate all --stay: error %v, want one naming --stay and --ratings", err)
	}
}
