package method_test

import (
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/secagg"
)

// TestDPALSCatalog: with a declared catalog, items nobody rated stay in
// the model's index and the claim names the catalog; without one, the
// Result states the assumption and how to give a catalog.
func TestDPALSCatalog(t *testing.T) {
	s, err := method.Lookup("dp-biases")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Catalog {
		t.Fatal("dp-biases does not ask for the public catalog")
	}
	train := fedData(t, ratings.Scale{})
	cat := map[string]string{}
	for _, id := range train.ItemIDs {
		cat[id] = ""
	}
	cat["unrated-1"], cat["unrated-2"] = "Nobody (1999)", "Nor this (2001)"
	with := train.WithCatalog(cat, "catalog.csv")
	for name, tc := range map[string]struct {
		d     *ratings.Dataset
		items int
		note  string
	}{
		"catalog":    {with, train.NumItems() + 2, "item index: the public catalog catalog.csv"},
		"no catalog": {train, train.NumItems(), "ASSUMPTION: no public item catalog"},
	} {
		m, res, err := s.Fit(context.Background(), tc.d, s.New(), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.NumItems != tc.items || !strings.Contains(res.Privacy.Note, tc.note) {
			t.Errorf("%s: %d items (want %d), note %q lacks %q", name, m.NumItems, tc.items, res.Privacy.Note, tc.note)
		}
		if !strings.Contains(res.Privacy.Note, "zero-out one user") || !(res.Stats["eps_replace_one"] > res.Privacy.EpsTotal) {
			t.Errorf("%s: neighbouring relation or replace-one ε missing: %q, %v", name, res.Privacy.Note, res.Stats)
		}
	}
}

// TestDPALSSecretNoise: outside the test mode two runs with the same seed
// draw different noise (crypto/rand); in it they are identical and the
// Result says the model is not a release.
func TestDPALSSecretNoise(t *testing.T) {
	s, _ := method.Lookup("dp-biases")
	train := fedData(t, ratings.Scale{})
	fit := func(ctx context.Context) ([]float32, *method.Result) {
		m, res, err := s.Fit(ctx, train, s.New(), 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m.BI, res
	}
	a, ra := fit(context.Background())
	b, _ := fit(context.Background())
	if sameBits(a, b) {
		t.Error("two runs outside the test mode drew the same noise from seed 3")
	}
	if strings.Contains(ra.Privacy.Note, "TEST MODE") || !strings.Contains(ra.Privacy.Note, "crypto/rand") {
		t.Errorf("note outside the test mode: %q", ra.Privacy.Note)
	}
	ctx := method.WithTestMode(context.Background())
	c, rc := fit(ctx)
	d, _ := fit(ctx)
	if !sameBits(c, d) {
		t.Error("two runs in the test mode with seed 3 differ")
	}
	if !strings.HasPrefix(rc.Privacy.Note, method.TestModeNote) || rc.Stats["test_mode"] != 1 {
		t.Errorf("test mode not labelled: %q, %v", rc.Privacy.Note, rc.Stats)
	}
}

// TestDPALSMasked: the integer path run as halves through the real
// SecAgg+ protocol in process gives Fit's model bit for bit; its server
// accounts the total ε (protocol.Spent) at most the target, and a server
// restored from a snapshot mid-run ends the same.
func TestDPALSMasked(t *testing.T) {
	for _, name := range []string{"dp-biases", "dp-als"} {
		t.Run(name, func(t *testing.T) {
			s, _ := method.Lookup(name)
			cfg, err := s.Configure(params{"secagg": "masked", "bias-rounds": "3", "rounds": "1", "init-items": "20"})
			if err != nil {
				t.Fatal(err)
			}
			train := fedData(t, ratings.Scale{})
			ctx := method.WithTestMode(context.Background())
			want, wantRes, err := s.Fit(ctx, train, cfg, 5, nil)
			if err != nil {
				t.Fatal(err)
			}
			untestMode(want, wantRes)
			srv, err := s.NewServerFor(cfg, &ratings.Dataset{Scale: train.Scale, ItemIDs: train.ItemIDs}, 5)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := s.NewClients(cfg, train, 5)
			if err != nil {
				t.Fatal(err)
			}
			opt := protocol.RunOptions{Seed: 5, Aggregation: protocol.AggMasked, MaskProtocol: secagg.SimulateSum}
			stop := 2
			opt.OnRound = func(info protocol.RoundInfo) error {
				if info.Round == stop {
					return errStop
				}
				return nil
			}
			if err := protocol.Run(ctx, srv, cl.List, opt); err != errStop {
				t.Fatalf("run: %v", err)
			}
			snap, err := srv.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			fresh, _ := s.NewServerFor(cfg, &ratings.Dataset{Scale: train.Scale, ItemIDs: train.ItemIDs}, 5)
			if err := fresh.UnmarshalBinary(snap); err != nil {
				t.Fatal(err)
			}
			opt.OnRound, opt.StartRound = nil, fresh.Round()
			if err := protocol.Run(ctx, fresh, cl.List, opt); err != nil {
				t.Fatal(err)
			}
			v, _ := fresh.Factors()
			got, gotRes, err := cl.Finish(v)
			if err != nil {
				t.Fatal(err)
			}
			if !sameBits(want.V, got.V) || !sameBits(want.U, got.U) || !sameBits(want.BI, got.BI) || !sameBits(want.BU, got.BU) {
				t.Fatal("the halves over SecAgg+ differ from Fit")
			}
			if gotRes.Privacy.Noise != "skellam" || gotRes.Privacy.Aggregation != "masked" || gotRes.Privacy.EpsTotal > 1+1e-9 {
				t.Errorf("privacy %+v", gotRes.Privacy)
			}
			eps, delta, ok := fresh.(protocol.Spent).Spent()
			if !ok || eps > 1+1e-9 || eps < 0.9 || delta != 1e-6 {
				t.Errorf("Spent: ε %g at δ %g (ok %v), want just below 1 at 1e-6", eps, delta, ok)
			}
			if spent := gotRes.Stats["eps_spent"]; spent != eps {
				t.Errorf("eps_spent %g in the Result, Spent %g", spent, eps)
			}
		})
	}
}

// TestDPALSCohortFields: dp-als's cohort parameters configure a run over
// cohorts from text (as privrec evaluate's flags do), the served method
// gives the devices their limits, negative limits are refused, and the
// Result's claim says what ε rests on, on the Gaussian and the integer
// path.
func TestDPALSCohortFields(t *testing.T) {
	s, _ := method.Lookup("dp-als")
	pm, err := method.Protocol("dp-als")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{
		{"cohort": "-1"}, {"rounds-per-user": "-2"}, {"min-gap": "-1"},
	} {
		cfg, err := s.Configure(bad)
		if err == nil {
			_, _, err = s.Fit(method.WithTestMode(context.Background()), fedData(t, ratings.Scale{}), cfg, 1, nil)
		}
		if err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	cfg, err := s.Configure(map[string]string{"cohort": "20", "rounds-per-user": "2", "min-gap": "3", "bias-rounds": "6"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pm.Participation(cfg), (protocol.Participation{Cohort: 20, MaxRounds: 2, MinGap: 3}); got != want {
		t.Errorf("Participation = %+v, want %+v", got, want)
	}
	if got := pm.Participation(s.New()); got != (protocol.Participation{}) {
		t.Errorf("defaults: Participation = %+v, want a roster run", got)
	}
	for _, agg := range []string{"ideal", "masked"} {
		if err := s.Set(cfg, "secagg", agg); err != nil {
			t.Fatal(err)
		}
		_, res, err := s.Fit(method.WithTestMode(context.Background()), fedData(t, ratings.Scale{}), cfg, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := res.Privacy
		if p.EpsTotal < 0.999 || p.EpsTotal > 1.000001 || res.Stats["rounds_per_user"] != 2 {
			t.Errorf("%s: ε = %g, rounds per user %g: want the target 1 over 2 rounds", agg, p.EpsTotal, res.Stats["rounds_per_user"])
		}
		for _, want := range []string{"cohorts of 20 users", "no amplification by sampling", "at most 2 training rounds", "cohort membership is visible"} {
			if !strings.Contains(p.Note, want) {
				t.Errorf("%s: note lacks %q: %s", agg, want, p.Note)
			}
		}
		if !strings.Contains(p.Neighbouring, "cohort membership is visible") {
			t.Errorf("%s: neighbouring relation %q does not fix the cohorts", agg, p.Neighbouring)
		}
	}
}
