package main

import (
	"strings"
	"testing"
)

// TestServeMinClientsMasked: a masked run cannot start with one client
// (the sum of one vector is that vector), and serve says so before it
// starts, naming the flag, rather than exiting at the first round with
// "1 clients not banned of 1 enrolled, below the floor of 1".
func TestServeMinClientsMasked(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error; "" for none before the TLS check
	}{
		{"dp-als masked, one client", []string{"--method", "dp-als", "--secagg", "masked", "--min-clients", "1"}, "--min-clients 1: a masked run needs at least 2 clients"},
		{"hdpmf masked by default, zero", []string{"--method", "hdpmf", "--min-clients", "0"}, "--min-clients 0: a masked run needs at least 2 clients"},
		{"dp-als masked, two", []string{"--method", "dp-als", "--secagg", "masked", "--min-clients", "2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No TLS flags: a run that passes the check stops at TLS.
			args := append([]string{"serve", "--state", t.TempDir()}, tc.args...)
			_, _, err := run(t, args...)
			switch {
			case err == nil:
				t.Fatal("serve without TLS started")
			case tc.want == "" && !strings.Contains(err.Error(), "--tls-cert"):
				t.Errorf("error = %v, want the TLS one", err)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestClientsWord: one client is "1 client" ("answered by 1 clients"
// before).
func TestClientsWord(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 clients"}, {1, "1 client"}, {2, "2 clients"}, {611, "611 clients"}} {
		if got := nClients(tc.n); got != tc.want {
			t.Errorf("nClients(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
