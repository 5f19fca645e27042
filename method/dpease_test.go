package method_test

import (
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// TestDPEaseSaysWhenListIsPopularity: a run whose public roster is too
// small for its budget (popularity mode: 80 users at ε 1) says in its
// privacy note that the list is DP popularity; with the rule off the
// item-item part is released and the note does not say so.
func TestDPEaseSaysWhenListIsPopularity(t *testing.T) {
	spec, err := method.Lookup("dp-ease")
	if err != nil {
		t.Fatal(err)
	}
	train := fedData(t, ratings.Scale{})
	for _, tc := range []struct {
		name       string
		params     map[string]string
		popularity bool
	}{
		{"small roster", map[string]string{"eps": "1"}, true},
		{"rule off", map[string]string{"eps": "1", "shrink": "false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := map[string]string{"seeded": "true", "top-items": "20"}
			for k, v := range tc.params {
				p[k] = v
			}
			cfg, err := spec.Configure(p)
			if err != nil {
				t.Fatal(err)
			}
			_, res, err := spec.Fit(context.Background(), train, cfg, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(res.Privacy.Note, "list = DP popularity"); got != tc.popularity {
				t.Errorf("note says DP popularity: %v, want %v (frac_counts %v)\n%s", got, tc.popularity, res.Stats["frac_counts"], res.Privacy.Note)
			}
		})
	}
}
