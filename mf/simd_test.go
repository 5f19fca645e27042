package mf

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/privrec/privrec/internal/testdata"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/ratings"
)

// trainAt trains cfg on train with the kernels at level l and returns the
// model's test RMSE, the last epoch's train RMSE and the user factors.
func trainAt(t *testing.T, l vec.Level, train, test *ratings.Dataset, cfg Config) (testRMSE, trainRMSE float64, u []float32) {
	t.Helper()
	prev := vec.SetLevel(l)
	defer vec.SetLevel(prev)
	m, err := Train(context.Background(), train, cfg, func(s EpochStats) { trainRMSE = s.TrainRMSE })
	if err != nil {
		t.Fatal(err)
	}
	return rmse(m, test), trainRMSE, m.U
}

// TestSIMDMatchesPureGo trains the same seed with the pure Go kernels and
// with the best SIMD kernels of this CPU: the models differ in the last
// bits (another summation order, fused multiply-add), but their test RMSE
// must agree to within 1e-3. The dimensions cover full vectors and every
// kind of tail.
func TestSIMDMatchesPureGo(t *testing.T) {
	if vec.Best() == vec.Generic {
		t.Skip("no SIMD kernels on this CPU")
	}
	d := synthetic(300, 200, 0.2, 11)
	train, test := split(d, 0.9, 1)
	differ := false
	for _, biased := range []bool{false, true} {
		for _, k := range []int{3, 8, 13, 16, 29, 50} {
			t.Run(fmt.Sprintf("K=%d/biased=%v", k, biased), func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Dim, cfg.Epochs, cfg.Biased, cfg.LearnRate, cfg.Schedule = k, 20, biased, 0.02, Constant
				g, gtr, gu := trainAt(t, vec.Generic, train, test, cfg)
				s, str, su := trainAt(t, vec.Best(), train, test, cfg)
				differ = differ || !slices.Equal(gu, su)
				if math.Abs(g-s) > 1e-3 || math.Abs(gtr-str) > 1e-3 {
					t.Errorf("test RMSE %.6f (%v) vs %.6f (generic); train RMSE %.6f vs %.6f", s, vec.Best(), g, str, gtr)
				}
			})
		}
	}
	if !differ {
		t.Errorf("the %v and generic kernels gave the same bits at every K: was the level switched?", vec.Best())
	}
}

// TestSIMDMatchesPureGoML1M is TestSIMDMatchesPureGo on a 90/10 split of
// MovieLens 1M at the dimensions of the speed table, with the default
// config. It logs the table of docs/results/speed:
//
//	PRIVREC_DATA=... go test -run SIMDMatchesPureGoML1M -v ./mf
func TestSIMDMatchesPureGoML1M(t *testing.T) {
	if testing.Short() || os.Getenv("PRIVREC_DATA") == "" {
		t.Skip("trains 16 models on ML-1M (about 2 minutes): set PRIVREC_DATA and leave out -short to run")
	}
	if vec.Best() == vec.Generic {
		t.Skip("no SIMD kernels on this CPU")
	}
	path := testdata.Path(t, "ml-1m/ratings_uir_dense.tsv")
	d := readTSV(t, path, nil)
	train, test := split(d, 0.9, 1)
	t.Logf("| K | biased | test RMSE, generic | test RMSE, %v | difference |", vec.Best())
	t.Logf("|---|---|---|---|---|")
	for _, biased := range []bool{false, true} {
		for _, k := range []int{10, 32, 50, 128} {
			cfg := DefaultConfig()
			cfg.Dim, cfg.Biased = k, biased
			g, _, _ := trainAt(t, vec.Generic, train, test, cfg)
			s, _, _ := trainAt(t, vec.Best(), train, test, cfg)
			t.Logf("| %d | %v | %.5f | %.5f | %+.1e |", k, biased, g, s, s-g)
			if math.Abs(g-s) > 1e-3 {
				t.Errorf("K=%d biased=%v: test RMSE %.5f (%v) vs %.5f (generic)", k, biased, s, vec.Best(), g)
			}
		}
	}
}
