package dp

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/internal/kstest"
)

const (
	ksN    = 5000
	ksDMax = 0.0381 // the spec's bound for n = 5000
)

func draw(n int, f func() float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = f()
	}
	return xs
}

func meanVar(xs []float64) (m, v float64) {
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, v / float64(len(xs)-1)
}

// checkKS asserts that xs fits cdf and that a wrong cdf is rejected, so the
// test can fail.
func checkKS(t *testing.T, xs []float64, cdf, wrong func(float64) float64) {
	t.Helper()
	if d := kstest.Distance(xs, cdf); d > ksDMax {
		t.Errorf("KS D = %.4f > %.4f against the exact CDF", d, ksDMax)
	}
	if wrong != nil {
		if d := kstest.Distance(xs, wrong); d <= ksDMax {
			t.Errorf("KS D = %.4f ≤ %.4f against a wrong CDF: the test has no power", d, ksDMax)
		}
	}
}

type rngT = rand.Rand

// checkSkellamMoments fails t unless xs, draws of Skellam(m), have mean 0
// and variance 2m within five standard errors (the sample variance's
// standard error uses the Skellam's fourth cumulant 2m).
func checkSkellamMoments(t *testing.T, m float64, xs []int64) {
	t.Helper()
	n := float64(len(xs))
	var mean, v float64
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= n
	for _, x := range xs {
		v += (float64(x) - mean) * (float64(x) - mean)
	}
	v /= n - 1
	if se := math.Sqrt(2 * m / n); math.Abs(mean) > 5*se {
		t.Errorf("m = %g: mean %.5f, |mean| > 5·SE = %.5f", m, mean, 5*se)
	}
	s2 := 2 * m
	if se := math.Sqrt((2*s2*s2 + 2*m) / n); math.Abs(v-s2) > 5*se {
		t.Errorf("m = %g: variance %.5f, want %.5f ± %.5f", m, v, s2, 5*se)
	}
}

// checkSkellamSum fails t unless sums, each the sum of n clients' shares,
// pass a chi-square test against Skellam(mu) at level 0.001 and fail one
// against Skellam(0.9mu) (the test has power against 10% less noise).
func checkSkellamSum(t *testing.T, mu float64, n int, sums []int64) {
	t.Helper()
	w := int64(6*math.Sqrt(2*mu)) + 2
	want := skellamPMF(mu, -w, w)
	stat, df := chiSquare(sums, func(k int64) float64 { return want[k] }, -w, w)
	if c := chiCrit(df, 0.001); stat > c {
		t.Errorf("mu = %g, n = %d: chi² = %.1f > %.1f (df %d)", mu, n, stat, c, df)
	}
	wrong := skellamPMF(0.9*mu, -w, w)
	if s, df := chiSquare(sums, func(k int64) float64 { return wrong[k] }, -w, w); s <= chiCrit(df, 0.001) {
		t.Errorf("mu = %g, n = %d: chi² = %.1f against Skellam(0.9mu): no power", mu, n, s)
	}
}
