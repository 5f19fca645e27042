package method_test

import (
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
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

// TestDPEaseCohortFields: dp-ease's cohort parameters configure a run
// over disjoint cohorts from text, the served method gives the devices
// one round of each statistic (2 rounds, cohort-rounds apart),
// cohort-rounds without a cohort is refused, and the claim says what ε
// rests on.
func TestDPEaseCohortFields(t *testing.T) {
	s, _ := method.Lookup("dp-ease")
	pm, err := method.Protocol("dp-ease")
	if err != nil {
		t.Fatal(err)
	}
	train := fedData(t, ratings.Scale{})
	for _, bad := range []map[string]string{
		{"cohort": "-1"}, {"cohort-rounds": "3"},
	} {
		cfg, err := s.Configure(bad)
		if err == nil {
			_, _, err = s.Fit(method.WithTestMode(context.Background()), train, cfg, 1, nil)
		}
		if err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	cfg, err := s.Configure(map[string]string{"cohort": "20", "cohort-rounds": "4", "top-items": "8"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pm.Participation(cfg), (protocol.Participation{Cohort: 20, MaxRounds: 2, MinGap: 4}); got != want {
		t.Errorf("Participation = %+v, want %+v", got, want)
	}
	if n, err := pm.Rounds(cfg); err != nil || n != 8 {
		t.Errorf("Rounds = %d, %v: want 8", n, err)
	}
	_, res, err := s.Fit(method.WithTestMode(context.Background()), train, cfg, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Privacy
	if p.EpsTotal < 0.999999 || p.EpsTotal > 1.000001 || len(p.Releases) != 8 {
		t.Errorf("ε = %g over %d releases: want the target 1 over 4 + 4", p.EpsTotal, len(p.Releases))
	}
	for _, want := range []string{"disjoint cohorts of 20 users", "no amplification by sampling", "enters the counts once and the Gram once"} {
		if !strings.Contains(p.Note, want) {
			t.Errorf("note lacks %q: %s", want, p.Note)
		}
	}
}
