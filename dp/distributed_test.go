package dp

import (
	"math"
	"testing"

	"github.com/privrec/privrec/internal/kstest"
	"github.com/privrec/privrec/rng"
)

func TestShareSumsAreLaplace(t *testing.T) {
	const b = 1.3
	tests := []struct {
		scheme ShareScheme
		n      int
	}{
		{GammaShares, 1}, {GammaShares, 5}, {GammaShares, 100},
		{MixtureShares, 1}, {MixtureShares, 5}, {MixtureShares, 100},
	}
	for i, tc := range tests {
		t.Run(tc.scheme.String()+"/n="+itoa(tc.n), func(t *testing.T) {
			r := rng.New(11, uint64(i))
			sum := func() float64 {
				var s float64
				switch tc.scheme {
				case GammaShares:
					for range tc.n {
						s += SampleGammaShare(r, b, tc.n)
					}
				case MixtureShares:
					h := SampleMixing(r)
					for range tc.n {
						s += SampleMixShare(r, b, h, tc.n)
					}
				}
				return s
			}
			checkKS(t, draw(ksN, sum), kstest.LaplaceCDF(b), kstest.LaplaceCDF(b*0.7))
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for ; n > 0; n /= 10 {
		i--
		buf[i] = byte('0' + n%10)
	}
	return string(buf[i:])
}

func TestFillShares(t *testing.T) {
	const n, k = 4, 3
	r := rng.New(5)
	sums := make([]float64, k)
	buf := make([]float64, k)
	h := []float64{0.5, 1, 2}
	var xs, ys []float64
	for range ksN {
		clear(sums)
		for range n {
			FillGammaShares(r, 2, n, buf)
			for j := range sums {
				sums[j] += buf[j]
			}
		}
		xs = append(xs, sums[1])
		clear(sums)
		for range n {
			FillMixShares(r, 2, h, n, buf)
			for j := range sums {
				sums[j] += buf[j]
			}
		}
		ys = append(ys, sums[2]/math.Sqrt(2*h[2]*4)) // N(0, 1) given h
	}
	checkKS(t, xs, kstest.LaplaceCDF(2), kstest.LaplaceCDF(1.4))
	checkKS(t, ys, normalCDF(1), normalCDF(0.7))
}

func normalCDF(s float64) func(float64) float64 {
	return func(x float64) float64 { return normCDF(x / s) }
}

func TestMixtureServerDelta(t *testing.T) {
	d := MixtureServerDelta(1, 1, 1)
	t.Logf("MixtureServerDelta(ε=1, Δ=1, b=1) = %.4f", d)
	if d < 0.17 || d > 0.21 {
		t.Errorf("δ = %.4f, want ≈ 0.19", d)
	}
	// Monotone: more noise or a larger ε lowers δ; δ stays in (0, 1).
	if d2 := MixtureServerDelta(1, 1, 2); !(d2 < d && d2 > 0) {
		t.Errorf("b = 2: δ = %v, want in (0, %v)", d2, d)
	}
	if d3 := MixtureServerDelta(2, 1, 1); !(d3 < d) {
		t.Errorf("ε = 2: δ = %v, want < %v", d3, d)
	}
	// Cross-check by Monte Carlo over h.
	r := rng.New(2)
	var mc float64
	const n = 200000
	for range n {
		mc += gaussDelta(1, math.Sqrt(2*r.ExpFloat64()), 1)
	}
	mc /= n
	if math.Abs(mc-d) > 0.005 {
		t.Errorf("Monte Carlo δ = %.4f, quadrature %.4f", mc, d)
	}
}

func TestGaussDeltaKnownValue(t *testing.T) {
	// σ = 1, Δ = 1, ε = 0: δ = Φ(1/2) − Φ(−1/2) = 0.3829.
	if d := gaussDelta(0, 1, 1); math.Abs(d-0.382925) > 1e-5 {
		t.Errorf("δ(0) = %v, want 0.382925", d)
	}
}

// TestFillGammaShares32SumIsLaplace checks the fast, cut-off float32
// sampler: the sum of n users' shares is Laplace(b) per coordinate (KS at
// α = 0.001), and the same test rejects a scale 15% too small.
func TestFillGammaShares32SumIsLaplace(t *testing.T) {
	const b, trials, dim = 2.5, 4000, 4
	for _, n := range []int{1, 2, 3, 50, 2000} {
		t.Run("n="+itoa(n), func(t *testing.T) {
			r := rng.New(7, uint64(n))
			share := make([]float32, dim)
			sum := make([]float64, dim)
			xs := make([]float64, 0, trials*dim)
			for range trials {
				clear(sum)
				for range n {
					FillGammaShares32(r, b, n, share)
					for d, x := range share {
						sum[d] += float64(x)
					}
				}
				xs = append(xs, sum...)
			}
			crit := 1.95 / math.Sqrt(float64(len(xs))) // KS critical value, α = 0.001
			if d := kstest.Distance(xs, kstest.LaplaceCDF(b)); d > crit {
				t.Errorf("KS distance %.4f to Laplace(%g) exceeds %.4f", d, b, crit)
			}
			if d := kstest.Distance(xs, kstest.LaplaceCDF(0.85*b)); d <= crit {
				t.Errorf("KS test cannot tell Laplace(%g) from the sum (distance %.4f)", 0.85*b, d)
			}
		})
	}
}

// TestFillGammaShares32Overwrites checks that dst is overwritten, not added
// to, and that a huge n leaves almost every coordinate exactly zero (the
// cut-off at work) while small n leaves none zero.
func TestFillGammaShares32Overwrites(t *testing.T) {
	tests := []struct {
		n                int
		minZero, maxZero float64 // bounds on the fraction of zero coordinates
	}{
		{1, 0, 0}, {2, 0, 0}, {100000, 0.99, 1},
	}
	for _, tc := range tests {
		r := rng.New(9, uint64(tc.n))
		dst := make([]float32, 10000)
		for i := range dst {
			dst[i] = 1e6
		}
		FillGammaShares32(r, 1, tc.n, dst)
		zero := 0
		for _, x := range dst {
			if math.Abs(float64(x)) > 1e5 {
				t.Fatalf("n = %d: stale value %g left in dst", tc.n, x)
			}
			if x == 0 {
				zero++
			}
		}
		if f := float64(zero) / float64(len(dst)); f < tc.minZero || f > tc.maxZero {
			t.Errorf("n = %d: zero fraction %.4f outside [%g, %g]", tc.n, f, tc.minZero, tc.maxZero)
		}
	}
}

// BenchmarkFillGammaShares32 times one user's share for a k = 32 factor,
// against the direct float64 sampler FillGammaShares.
func BenchmarkFillGammaShares32(b *testing.B) {
	r := rng.New(1)
	f32 := make([]float32, 32)
	f64 := make([]float64, 32)
	for _, n := range []int{1, 2, 10, 100, 1000} {
		b.Run("fast/n="+itoa(n), func(b *testing.B) {
			for b.Loop() {
				FillGammaShares32(r, 1, n, f32)
			}
		})
		b.Run("direct/n="+itoa(n), func(b *testing.B) {
			for b.Loop() {
				FillGammaShares(r, 1, n, f64)
			}
		})
	}
}

// TestFillGammaSharesZ32Sum checks the b·sqrt(2G)·Z form of the fast
// share sampler: n shares sum to Laplace(b), for a small and a large n,
// and a scale 30% too small is rejected.
func TestFillGammaSharesZ32Sum(t *testing.T) {
	for _, n := range []int{1, 3, 500} {
		r := rng.New(3, uint64(n))
		const draws = 4000
		sums := make([]float64, draws)
		buf := make([]float32, draws)
		for range n {
			FillGammaSharesZ32(r, 2, n, buf)
			for i, x := range buf {
				sums[i] += float64(x)
			}
		}
		crit := 1.63 / math.Sqrt(draws)
		if dist := kstest.Distance(sums, kstest.LaplaceCDF(2)); dist > crit {
			t.Errorf("n = %d: KS distance %.4f > %.4f", n, dist, crit)
		}
		if dist := kstest.Distance(sums, kstest.LaplaceCDF(1.4)); dist <= crit {
			t.Errorf("n = %d: 0.7 × scale passes (KS %.4f)", n, dist)
		}
	}
}
