package main

import (
	"strings"
	"testing"
)

// TestConfigErrorsNameFlags: a method that refuses its config says which
// flag is wrong by the flag's name, not the Go field the flag sets.
func TestConfigErrorsNameFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
		not  string // a Go field name the error must not show
	}{
		{"dp-als --eps", []string{"evaluate", "--method", "dp-als", "--eps", "-1"}, "--eps = -1 must be > 0", "Eps"},
		{"dp-als --rounds in train", []string{"train", "--method", "dp-als", "--rounds", "1000", "--out", "/nonexistent/x.prm"}, "--rounds = 1000", "Rounds"},
		{"mf --dim", []string{"evaluate", "--method", "mf", "--dim", "0"}, "--dim = 0", "Dim"},
		{"sdmf --lambda and --gamma", []string{"evaluate", "--method", "sdmf", "--lambda", "-1"}, "from the --gamma prior", "Lambda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, append(tc.args, "--data", "testdata/small.tsv", "--scale", "1,5", "--split", "random:0.5")...)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not+" ") {
				t.Errorf("error %q, want it to say %q and not %q", err, tc.want, tc.not)
			}
		})
	}
	words := replaceWords("Spec.User.Low = 2 and Eps. EpsTotal, Eps=1", []string{"Spec.User.Low", "--eps-uc", "Eps", "--eps"})
	if want := "--eps-uc = 2 and --eps. EpsTotal, --eps=1"; words != want {
		t.Errorf("replaceWords: %q, want %q", words, want)
	}
}
