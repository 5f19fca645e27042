package sdcf

import (
	"context"
	"fmt"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/tuning"
	"github.com/privrec/privrec/ratings"
)

// TestTuneDefaults is the search behind DefaultConfig. It runs only with
// PRIVREC_TUNE set (to "all", or a comma list of sgld, sdmf, bpr) and takes
// minutes: it splits ML-100K 80/20 with seed 1 exactly as `privrec evaluate
// --split random:0.8 --seed 1` does, splits that training part again 80/20
// (seed 2) into fit and validation, and logs the validation RMSE (leave-one-
// out AUC on the training part for BPR) of each candidate. The test part is
// never read.
func TestTuneDefaults(t *testing.T) {
	want, outer, val := tuning.ML100K(t, "set PRIVREC_TUNE=all (or sgld,sdmf,bpr) to rerun the search behind DefaultConfig")
	run := func(name string, cfg Config) {
		cfg.Workers, cfg.Seed = 1, 1
		m, rep, err := Train(context.Background(), val.Train, cfg, nil)
		if err != nil {
			t.Logf("%-44s %v", name, err)
			return
		}
		t.Logf("%-44s validation RMSE %.4f (train %.4f)", name, eval.Rating(m, val.Test).RMSE, rep.TrainRMSE)
	}
	if want("sgld") {
		for _, lr := range []float64{1.5, 2, 3} {
			for _, n0 := range []float64{0, 3, 10, 30} {
				c := DefaultConfig(Squared, false)
				c.LR0, c.ServerPseudo = lr, n0
				run(fmt.Sprintf("sgld-mf lr0 %g n0 %g", lr, n0), c)
			}
		}
		for _, lam := range []float64{0.05, 0.2} {
			c := DefaultConfig(Squared, false)
			c.Lambda = lam
			run(fmt.Sprintf("sgld-mf Λ %g", lam), c)
		}
		c := DefaultConfig(Squared, false)
		c.Lambda, c.LambdaShape, c.LambdaRate = 0, 1, 10
		run("sgld-mf Λ ~ Gamma(1, rate 10)", c)
		run("sgld-mf defaults", DefaultConfig(Squared, false))
		c = DefaultConfig(Squared, false)
		c.ItemBias = false
		run("sgld-mf without item offset", c)
		c = DefaultConfig(Squared, false)
		c.Temp = 0.01
		run("sgld-mf temp 0.01", c)
	}
	if want("sdmf") {
		for _, lk := range [][2]float64{{1, 1}, {1, 2}, {1, 4}, {0.5, 8}, {1.5, 4}, {1, 8}} {
			for _, eg := range []float64{4, 0} { // 0: α = ∞, the least stable
				c := DefaultConfig(Squared, true)
				c.LR0, c.ServerStep, c.EpsG = lk[0], lk[1], eg
				run(fmt.Sprintf("sdmf lr0 %g κ %g ε_g %g", lk[0], lk[1], eg), c)
			}
		}
		run("sdmf defaults (ε_g 1, ε_I 1)", DefaultConfig(Squared, true))
		c := DefaultConfig(Squared, true)
		c.ItemBias = false
		run("sdmf without item offset", c)
		c = DefaultConfig(Squared, true)
		c.Lambda, c.LambdaShape, c.LambdaRate = 0, 1, 10
		run("sdmf Λ ~ Gamma(1, rate 10)", c)
		c = DefaultConfig(Squared, true)
		c.Temp = 0.01
		run("sdmf temp 0.01", c)
	}
	if want("bpr") {
		loo, err := ratings.LeaveOneOut(outer.Train, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, priv := range []bool{false, true} {
			for _, lam := range []float64{0, 0.01, 0.03} { // 0: Gamma(1, rate 100) draws
				for _, n0 := range []float64{0, 10} {
					c := DefaultConfig(BPR, priv)
					c.Lambda, c.ServerPseudo, c.Workers, c.Seed = lam, n0, 1, 1
					name := fmt.Sprintf("bpr private %v Λ %g n0 %g", priv, lam, n0)
					m, _, err := Train(context.Background(), loo.Train, c, nil)
					if err != nil {
						t.Logf("%s: %v", name, err)
						continue
					}
					t.Logf("%s: validation AUC %.4f", name, eval.Rank(m, loo.Train, loo.Test, 10, loo.Train.Scale.Min).AUC)
				}
			}
		}
	}
}
