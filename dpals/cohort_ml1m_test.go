package dpals

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestCohortsML1M is the measurement of docs/results/dpals-cohorts.md,
// run only with PRIVREC_COHORTS set and PRIVREC_DATA holding ml-1m:
// dp-als at ε = 1, δ = 1e-6 on ML-1M's random 80% (public catalog; seeds
// 1–3, the noise from the seed as evaluate's test mode draws it), as a
// roster run and over cohorts of 1,000 of the 6,040 users with one
// participation per user (4 bias rounds) and with two at least 6 rounds
// apart (10 bias rounds). Per run it logs the test RMSE, Recall@10 and
// NDCG@10 (relevant: rating ≥ 4), the reported ε, each round's number
// of uploads, the users who took part and the largest ρ one user was
// actually charged against the reported bound.
func TestCohortsML1M(t *testing.T) {
	root := os.Getenv("PRIVREC_DATA")
	if root == "" || os.Getenv("PRIVREC_COHORTS") == "" {
		t.Skip("PRIVREC_COHORTS or PRIVREC_DATA not set")
	}
	d, _, err := datasets.Open(filepath.Join(root, "ml-1m"), ratings.LoadOptions{Scale: &ratings.Stars5, Catalog: true})
	if err != nil {
		t.Skip(err)
	}
	runs := []struct {
		name           string
		cohort, k, gap int
		bias           int
	}{
		{"roster", 0, 0, 0, 8},
		{"cohort 1000, k=1", 1000, 1, 0, 4},
		{"cohort 1000, k=2, gap 6", 1000, 2, 6, 10},
	}
	for _, c := range runs {
		var sum [3]float64
		for seed := uint64(1); seed <= 3; seed++ {
			s, err := ratings.Holdout(d, 0.8, seed)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Cohort, cfg.RoundsPerUser, cfg.MinGap, cfg.BiasRounds = c.cohort, c.k, c.gap, c.bias
			srv, err := NewServer(cfg, s.Train, seed)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := NewClients(s.Train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := protocol.NewCohorts(cl.List, cfg.Participation(), nil, 0, seed)
			if err != nil {
				t.Fatal(err)
			}
			var ups []int
			opt := protocol.RunOptions{Seed: seed, OnRound: func(info protocol.RoundInfo) error {
				if info.Phase == protocol.PhaseTrain {
					ups = append(ups, len(tr.LastCohort()))
				}
				return nil
			}}
			if err := protocol.RunTransport(context.Background(), srv, protocol.NewSecureSum(tr), opt); err != nil {
				t.Fatal(err)
			}
			v, _ := srv.Factors()
			m, rep, err := cl.Finish(v)
			if err != nil {
				t.Fatal(err)
			}
			steps := srv.(*server).steps
			users, most, worst := 0, 0, 0.0
			for _, x := range cl.List {
				a := tr.Answered(x.ID())
				var rho float64
				for _, r := range a {
					rho += steps[r].rho
				}
				if len(a) > 0 {
					users++
				}
				most, worst = max(most, len(a)), max(worst, rho)
			}
			if worst > rep.UserRho*(1+1e-9) {
				t.Errorf("%s seed %d: a user was charged ρ %g, above the reported %g", c.name, seed, worst, rep.UserRho)
			}
			e := eval.Rating(m, s.Test)
			rk := eval.RankAt(m, s.Train, s.Test, []int{10}, 4, 0)[0]
			f := [3]float64{e.RMSE, rk.Recall, rk.NDCG}
			for i := range f {
				sum[i] += f[i] / 3
			}
			if math.IsNaN(f[0]) {
				t.Errorf("%s seed %d: NaN RMSE", c.name, seed)
			}
			t.Logf("%s seed %d: rmse %.4f R@10 %.4f N@10 %.4f ε %.4f (user ρ %.5f over rounds %v; ledger ρ %.5f); "+
				"asked per round %v; %d of %d users took part, at most %d rounds each, largest charged ρ %.5f",
				c.name, seed, f[0], f[1], f[2], rep.Eps, rep.UserRho, rep.UserRounds, rep.Ledger.Rho(),
				ups, users, len(cl.List), most, worst)
		}
		t.Logf("%s mean: rmse %.4f R@10 %.4f N@10 %.4f", c.name, sum[0], sum[1], sum[2])
	}
}
