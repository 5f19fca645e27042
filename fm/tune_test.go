package fm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/tuning"
)

// TestTuneSteps is the search behind the steps of the side-feature runs
// in docs/results/sdcf/fm.md. It runs only with PRIVREC_TUNE set (to
// "all", or a comma list of fm, sdfm) and takes minutes: it splits ML-100K
// 80/20 with seed 1 exactly as `privrec evaluate --split random:0.8 --seed
// 1` does, splits that training part again 80/20 (seed 2) into fit and
// validation, and logs each candidate's validation RMSE. The test part is
// never read.
func TestTuneSteps(t *testing.T) {
	want, _, val := tuning.ML100K(t, "set PRIVREC_TUNE=all (or fm,sdfm) to rerun the search behind the fm report's steps")
	which := os.Getenv("PRIVREC_TUNE")
	// The first pass (lr × reg) put every feature set's best at its edge
	// (lr 0.02, reg 0.1); the second pass looks past it.
	pairs := [][2]float64{}
	for _, lr := range []float64{0.005, 0.01, 0.02} {
		for _, reg := range []float64{0.02, 0.05, 0.1} {
			pairs = append(pairs, [2]float64{lr, reg})
		}
	}
	pairs = append(pairs, [2]float64{0.02, 0.2}, [2]float64{0.04, 0.1}, [2]float64{0.04, 0.2})
	if strings.Contains(which, "fm2") {
		pairs = pairs[9:]
	}
	if want("fm") && !strings.Contains(which, "sdfm") || which == "all" {
		for _, f := range []Features{IDs, Items, All} {
			for _, p := range pairs {
				lr, reg := p[0], p[1]
				c := DefaultConfig()
				c.Features, c.LR, c.Reg = f, lr, reg
				m, rep, err := Train(context.Background(), val.Train, c, nil)
				name := fmt.Sprintf("fm %-5s lr %-5g reg %-4g", f, lr, reg)
				if err != nil {
					t.Logf("%s %v", name, err)
					continue
				}
				t.Logf("%s validation RMSE %.4f (train %.4f)", name, eval.Rating(m, val.Test).RMSE, rep.TrainRMSE)
			}
		}
	}
	if want("sdfm") {
		for _, f := range []Features{IDs, Items} {
			for _, as := range []float64{0.25, 0.5, 1} {
				if f == IDs && as != 1 {
					continue
				}
				c := DefaultSDConfig()
				c.Features, c.AttrStep, c.Workers, c.Seed = f, as, 2, 1
				m, rep, err := TrainSD(context.Background(), val.Train, c, nil)
				name := fmt.Sprintf("sd-fm %-5s attr-step %g", f, as)
				if err != nil {
					t.Logf("%s %v", name, err)
					continue
				}
				t.Logf("%s validation RMSE %.4f (train %.4f)", name, eval.Rating(m, val.Test).RMSE, rep.TrainRMSE)
			}
		}
	}
}
