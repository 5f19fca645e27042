package dpease

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestCohortsML1M is the continual release of docs/results/dpals-cohorts.md,
// run only with PRIVREC_COHORTS set and PRIVREC_DATA holding ml-1m:
// dp-ease at ε = 1, δ = 1e-6 on ML-1M's random 80% (seeds 1–3, test mode)
// over 7 disjoint cohorts of 1,000 per statistic. After every Gram
// cohort it logs the users whose counts and Gram have entered the pooled
// releases (the ledger of users covered) and Recall@20 and NDCG@20
// (relevant: rating ≥ 4) of the model the pooled releases give then.
func TestCohortsML1M(t *testing.T) {
	root := os.Getenv("PRIVREC_DATA")
	if root == "" || os.Getenv("PRIVREC_COHORTS") == "" {
		t.Skip("PRIVREC_COHORTS or PRIVREC_DATA not set")
	}
	d, _, err := datasets.Open(filepath.Join(root, "ml-1m"), ratings.LoadOptions{})
	if err != nil {
		t.Skip(err)
	}
	const cohorts = 7
	type point struct{ counts, grams, n, r20, n20 float64 }
	mean := make([]point, cohorts)
	for seed := uint64(1); seed <= 3; seed++ {
		sp, err := ratings.Holdout(d, 0.8, seed)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.Seeded, cfg.Cohort, cfg.CohortRounds = true, 1000, cohorts
		cfg = cfg.WithRoster(sp.Train)
		srv, err := NewServer(cfg, sp.Train.Public(), seed)
		if err != nil {
			t.Fatal(err)
		}
		cl := mustClients(t, sp.Train, cfg)
		tr, err := protocol.NewCohorts(cl.List, cfg.Participation(), nil, 0, seed)
		if err != nil {
			t.Fatal(err)
		}
		opt := protocol.RunOptions{Seed: seed, OnRound: func(info protocol.RoundInfo) error {
			if info.Round < cohorts {
				return nil
			}
			var counts, grams int
			for _, x := range cl.List {
				for _, r := range tr.Answered(x.ID()) {
					switch {
					case r < cohorts:
						counts++
					case r <= info.Round:
						grams++
					}
				}
			}
			v, _ := srv.Factors()
			m, err := cl.Model(v)
			if err != nil {
				return err
			}
			rk := eval.RankAt(m, sp.Train, sp.Test, []int{20}, 4, 0)[0]
			k := info.Round - cohorts
			mean[k].counts += float64(counts) / 3
			mean[k].grams += float64(grams) / 3
			mean[k].r20 += rk.Recall / 3
			mean[k].n20 += rk.NDCG / 3
			t.Logf("seed %d, after Gram cohort %d: counts of %d users, Gram of %d; R@20 %.4f N@20 %.4f; ε spent %.4f",
				seed, k+1, counts, grams, rk.Recall, rk.NDCG, srv.Report().Eps)
			return nil
		}}
		if err := protocol.RunTransport(context.Background(), srv, protocol.NewSecureSum(tr), opt); err != nil {
			t.Fatal(err)
		}
	}
	for k, p := range mean {
		t.Logf("mean after Gram cohort %d: counts of %.0f users, Gram of %.0f; R@20 %.4f N@20 %.4f", k+1, p.counts, p.grams, p.r20, p.n20)
	}
}
