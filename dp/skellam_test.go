package dp

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/privrec/privrec/rng"
)

// poissonLogPMF is ln P(X = k) for X ~ Poisson(mu).
func poissonLogPMF(mu float64, k int64) float64 {
	if k < 0 {
		return math.Inf(-1)
	}
	lg, _ := math.Lgamma(float64(k) + 1)
	return float64(k)*math.Log(mu) - mu - lg
}

// skellamPMF returns P(S = k) for S ~ Skellam(mu), k in [lo, hi], as
// Σ_j P(X = j+k)·P(Y = j) over the Poisson's bulk.
func skellamPMF(mu float64, lo, hi int64) map[int64]float64 {
	w := int64(20*math.Sqrt(mu) + 20)
	jlo, jhi := max(0, int64(mu)-w), int64(mu)+w
	out := make(map[int64]float64, hi-lo+1)
	for k := lo; k <= hi; k++ {
		var s float64
		for j := jlo; j <= jhi; j++ {
			s += math.Exp(poissonLogPMF(mu, j+k) + poissonLogPMF(mu, j))
		}
		out[k] = s
	}
	return out
}

// chiSquare bins xs against pmf: one cell per k in [lo, hi], consecutive
// cells merged until each expects at least 5, and one cell for everything
// outside [lo, hi] (merged into the last if it expects less). It returns
// Pearson's statistic and its degrees of freedom.
func chiSquare(xs []int64, pmf func(int64) float64, lo, hi int64) (stat float64, df int) {
	n := float64(len(xs))
	obs := make([]float64, hi-lo+2) // the last cell: outside [lo, hi]
	for _, x := range xs {
		if x < lo || x > hi {
			obs[len(obs)-1]++
		} else {
			obs[x-lo]++
		}
	}
	var cellO, cellE []float64
	var o, e, inner float64
	for k := lo; k <= hi; k++ {
		p := pmf(k)
		inner += p
		o += obs[k-lo]
		e += p * n
		if e >= 5 {
			cellO, cellE = append(cellO, o), append(cellE, e)
			o, e = 0, 0
		}
	}
	o += obs[len(obs)-1]
	e += math.Max(0, 1-inner) * n
	if e >= 5 || len(cellE) == 0 {
		cellO, cellE = append(cellO, o), append(cellE, e)
	} else {
		cellO[len(cellO)-1] += o
		cellE[len(cellE)-1] += e
	}
	for i := range cellO {
		stat += (cellO[i] - cellE[i]) * (cellO[i] - cellE[i]) / cellE[i]
	}
	return stat, len(cellO) - 1
}

// chiCrit is the chi-square critical value at level alpha.
func chiCrit(df int, alpha float64) float64 {
	return distuv.ChiSquared{K: float64(df)}.Quantile(1 - alpha)
}

// TestSamplePoissonChiSquare checks the Poisson sampler against the exact
// pmf on both sides of the inversion/PTRS switch and far above it, and
// checks that the test rejects a mean 3% off (power).
func TestSamplePoissonChiSquare(t *testing.T) {
	const draws = 200000
	for _, mu := range []float64{0.05, 0.7, 3, 9.99, 10, 17.5, 150, 4500, 45000} {
		r := rng.New(11, math.Float64bits(mu))
		xs := make([]int64, draws)
		for i := range xs {
			xs[i] = SamplePoisson(r, mu)
		}
		sd := math.Sqrt(mu)
		lo := max(0, int64(mu-6*sd-2))
		hi := int64(mu+6*sd) + 3
		pmf := func(m float64) func(int64) float64 {
			return func(k int64) float64 { return math.Exp(poissonLogPMF(m, k)) }
		}
		stat, df := chiSquare(xs, pmf(mu), lo, hi)
		if c := chiCrit(df, 0.001); stat > c {
			t.Errorf("mu = %g: chi² = %.1f > %.1f (df %d)", mu, stat, c, df)
		}
		if mu >= 3 {
			wrong := mu * 1.03
			if mu > 1000 {
				wrong = mu + 0.15*sd // keep the wrong law's bulk on the grid
			}
			if s, df := chiSquare(xs, pmf(wrong), lo, hi); s <= chiCrit(df, 0.001) {
				t.Errorf("mu = %g: chi² = %.1f against Poisson(%g): no power", mu, s, wrong)
			}
		}
	}
}

func TestSamplePoissonDegenerate(t *testing.T) {
	r := rng.New(1)
	for _, mu := range []float64{0, -1, math.NaN()} {
		if x := SamplePoisson(r, mu); x != 0 {
			t.Errorf("SamplePoisson(%v) = %d, want 0", mu, x)
		}
		if x := SampleSkellam(r, mu); x != 0 {
			t.Errorf("SampleSkellam(%v) = %d, want 0", mu, x)
		}
	}
}

// TestSkellamMoments checks mean 0 and variance 2μ within five standard
// errors (the sample variance's standard error uses the Skellam's fourth
// cumulant 2μ).
func TestSkellamMoments(t *testing.T) {
	const draws = 100000
	buf := make([]int64, draws)
	for _, mu := range []float64{0.3, 4, 15, 450, 45000} {
		r := rng.New(12, math.Float64bits(mu))
		FillSkellam(r, mu, buf)
		checkSkellamMoments(t, mu, buf)
	}
}

// TestSkellamSharesSum checks the distributed mechanism: the sum of n
// clients' FillSkellamShare draws has the Skellam(μ) law (chi-square
// against the exact pmf), for n = 1, 7 and 300 (shares of μ/n = 0.2 go
// through inversion, μ/n ≥ 10 through PTRS), and a law with 10% less
// noise is rejected.
func TestSkellamSharesSum(t *testing.T) {
	const draws = 20000
	for _, tc := range []struct {
		mu float64
		n  int
	}{{60, 1}, {60, 300}, {120, 7}, {140, 14}} {
		r := rng.New(13, uint64(tc.n))
		sums := make([]int64, draws)
		share := make([]int64, draws)
		for range tc.n {
			FillSkellamShare(r, tc.mu, tc.n, share)
			for i, s := range share {
				sums[i] += s
			}
		}
		checkSkellamSum(t, tc.mu, tc.n, sums)
	}
}

// TestSkellamTail checks the Chernoff tail bound against the exact tail.
func TestSkellamTail(t *testing.T) {
	for _, mu := range []float64{2, 30, 400} {
		w := int64(40*math.Sqrt(mu)) + 40
		pmf := skellamPMF(mu, -w, w)
		for _, tt := range []int64{1, int64(math.Sqrt(mu)), int64(4 * math.Sqrt(mu)), int64(9 * math.Sqrt(mu))} {
			var exact float64
			for k, p := range pmf {
				if k >= tt || k <= -tt {
					exact += p
				}
			}
			if b := SkellamTail(mu, float64(tt)); b < exact*(1-1e-9) {
				t.Errorf("mu = %g, t = %d: bound %.3g < exact tail %.3g", mu, tt, b, exact)
			}
		}
		for _, tail := range []float64{1e-3, 1e-12} {
			tb := SkellamTailBound(mu, tail)
			if SkellamTail(mu, float64(tb)) > tail || (tb > 1 && SkellamTail(mu, float64(tb-1)) <= tail) {
				t.Errorf("mu = %g, tail %g: SkellamTailBound = %d is not the smallest", mu, tail, tb)
			}
		}
	}
}

func TestFillSkellamAllocs(t *testing.T) {
	r := rng.New(1)
	dst := make([]int64, 64)
	for _, mu := range []float64{3, 300} {
		if a := testing.AllocsPerRun(20, func() { FillSkellam(r, mu, dst) }); a != 0 {
			t.Errorf("FillSkellam(mu = %g) allocates %.0f times", mu, a)
		}
	}
}

// BenchmarkSkellamShare times one client's Skellam share of noise with
// σ = sqrt(2μ) = 300 quantization units in total among n clients (μ/n from
// 45000 down to 15), against the float path's FillGammaShares32 with the
// same n, 32 coordinates per op; ns/draw is per coordinate.
func BenchmarkSkellamShare(b *testing.B) {
	const dim = 32
	const mu = 300 * 300 / 2
	r := rng.New(1)
	ints := make([]int64, dim)
	floats := make([]float32, dim)
	for _, n := range []int{1, 10, 100, 1000, 3000} {
		b.Run("skellam/n="+itoa(n), func(b *testing.B) {
			for b.Loop() {
				FillSkellamShare(r, mu, n, ints)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dim), "ns/draw")
		})
		b.Run("gamma32/n="+itoa(n), func(b *testing.B) {
			for b.Loop() {
				FillGammaShares32(r, 1, n, floats)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dim), "ns/draw")
		})
	}
}

func TestLogFactorial(t *testing.T) {
	for _, k := range []float64{0, 1, 10, 255, 256, 257, 1000, 45000, 1e7} {
		want, _ := math.Lgamma(k + 1)
		if got := logFactorial(k); math.Abs(got-want) > 1e-14*math.Max(1, want) {
			t.Errorf("logFactorial(%g) = %.17g, want %.17g", k, got, want)
		}
	}
}
