package main

import (
	"strings"
	"testing"
)

// TestServeHelpSecaggDefault checks that privrec serve --help states the
// aggregation the server runs when --secagg is not given: masked for every
// method with the integer path, the method's own default otherwise.
func TestServeHelpSecaggDefault(t *testing.T) {
	for _, tc := range []struct{ method, want string }{
		{"dp-als", "(default masked)"},
		{"dp-biases", "(default masked)"},
		{"dp-ease", "(default masked)"},
		{"hdpmf", "(default masked)"},
		{"ldp-op", "(default masked)"},
		{"sdmf", ""}, // no --secagg flag
	} {
		t.Run(tc.method, func(t *testing.T) {
			out, _, err := run(t, "serve", "--method", tc.method, "--help")
			if err != nil {
				t.Fatal(err)
			}
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "--secagg ") {
					line = l
				}
			}
			if tc.want == "" {
				if line != "" {
					t.Fatalf("help has a --secagg flag: %s", line)
				}
				return
			}
			if !strings.HasSuffix(line, tc.want) {
				t.Errorf("--secagg line does not end in %q: %s", tc.want, line)
			}
		})
	}
}
