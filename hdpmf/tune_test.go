package hdpmf

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/testdata"
	"github.com/privrec/privrec/ratings"
)

// TestTune is a manual tuning aid, run only with PRIVREC_TUNE set to
// "variant,lr,reg,pseudo[,dim]" lines separated by ";". It carves a
// validation split out of the training part of ML-1M's leave-10-out split
// and never looks at the test ratings.
func TestTune(t *testing.T) {
	spec := os.Getenv("PRIVREC_TUNE")
	if spec == "" {
		t.Skip("PRIVREC_TUNE not set")
	}
	d, _, err := ratings.Load(testdata.Path(t, "ml-1m/ratings_uir_dense.tsv"), ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d = ratings.MinCounts(d, 20, 0)
	outer, err := ratings.LeaveKOut(d, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ratings.LeaveKOut(outer.Train, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(spec, ";") {
		f := strings.Split(line, ",")
		var v Variant
		for _, x := range []Variant{HDPMF, HDPMFR, DPMF, PDPMF} {
			if x.String() == f[0] {
				v = x
			}
		}
		cfg := DefaultConfig(v)
		cfg.LearnRate, _ = strconv.ParseFloat(f[1], 64)
		cfg.Reg, _ = strconv.ParseFloat(f[2], 64)
		cfg.Pseudo, _ = strconv.ParseFloat(f[3], 64)
		if len(f) > 4 {
			cfg.Dim, _ = strconv.Atoi(f[4])
		}
		if len(f) > 6 {
			cfg.UserLearnRate, _ = strconv.ParseFloat(f[6], 64)
		}
		if len(f) > 5 {
			cfg.Eps, _ = strconv.ParseFloat(f[5], 64)
		}
		start := time.Now()
		m, rep, err := Train(context.Background(), inner.Train, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := eval.Rating(m, inner.Test)
		t.Logf("%s: val MSE %.4f MAE %.4f  (%.1fs, eps round %.3g total %.3g, kept %.3f)", line, e.MSE, e.MAE, time.Since(start).Seconds(), rep.EpsRound, rep.EpsTotal, rep.Kept)
	}
}
