package hdpmf

import (
	"math"
	"testing"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/internal/kstest"
	"github.com/privrec/privrec/rng"
)

// TestMixSharesSumToLaplace checks that n of the MixtureShares shares the
// clients add (dp.FillMixShares in float32), each given the server's
// h ~ Exp(1), sum to Laplace(b).
func TestMixSharesSumToLaplace(t *testing.T) {
	const b, trials, dim = 2.5, 4000, 4
	// The gamma shares are dp.FillGammaShares32, KS-tested in package dp.
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"mixture n=1", 1}, {"mixture n=20", 20}, {"mixture n=500", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rng.New(7, uint64(tc.n))
			share := make([]float32, dim)
			h := make([]float32, dim)
			xs := make([]float64, 0, trials*dim)
			sum := make([]float64, dim)
			for range trials {
				clear(sum)
				for d := range h {
					h[d] = float32(r.ExpFloat64())
				}
				for range tc.n {
					dp.FillMixShares(r, b, h, tc.n, share)
					for d, x := range share {
						sum[d] += float64(x)
					}
				}
				xs = append(xs, sum...)
			}
			// Critical value of KS at α = 0.001 is 1.95/√N.
			crit := 1.95 / math.Sqrt(float64(len(xs)))
			if d := kstest.Distance(xs, kstest.LaplaceCDF(b)); d > crit {
				t.Errorf("KS distance %.4f to Laplace(%g) exceeds %.4f", d, b, crit)
			}
			// The same test rejects a scale 15% too small.
			if d := kstest.Distance(xs, kstest.LaplaceCDF(0.85*b)); d <= crit {
				t.Errorf("KS test cannot tell Laplace(%g) from the sum (distance %.4f)", 0.85*b, d)
			}
		})
	}
}
