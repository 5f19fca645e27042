package main

import (
	"strings"
	"testing"

	"github.com/privrec/privrec/method"
)

// TestClaimNotice: before joining, the client tells the person what the
// run protects and what it leaves public. For HDPMF's family that is
// which items they rated (the setup round's counts are exact); for dp-als
// it is only that they take part.
func TestClaimNotice(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   []string
	}{
		{"hdpmf", []string{"protected:      user's rating values", "NOT protected:  which items a user rated is not protected"}},
		{"pdpmf", []string{"NOT protected:  which items a user rated is not protected"}},
		{"dp-als", []string{"protected:      user", "the user's participation and the number of participants public"}},
		{"dp-ease", []string{"protected:      user", "trusted:        nobody with secagg=masked"}},
		{"ldp-op", []string{"protected:      user's ratings", "NOT protected:  the user takes part either way, and the number of users is public"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			m, err := method.Protocol(tc.method)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := method.Lookup(tc.method)
			var b strings.Builder
			claimNotice(&b, tc.method, m.Claim(s.New()))
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("the notice lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
