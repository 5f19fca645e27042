package dp

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

const (
	ksN    = 5000
	ksDMax = 0.0381 // the spec's bound for n = 5000
)

// ksD returns the Kolmogorov–Smirnov statistic of xs against cdf.
func ksD(xs []float64, cdf func(float64) float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := float64(len(s))
	var d float64
	for i, x := range s {
		f := cdf(x)
		d = math.Max(d, math.Max(f-float64(i)/n, float64(i+1)/n-f))
	}
	return d
}

func laplaceCDF(b float64) func(float64) float64 {
	return func(x float64) float64 {
		if x < 0 {
			return 0.5 * math.Exp(x/b)
		}
		return 1 - 0.5*math.Exp(-x/b)
	}
}

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
	if d := ksD(xs, cdf); d > ksDMax {
		t.Errorf("KS D = %.4f > %.4f against the exact CDF", d, ksDMax)
	}
	if wrong != nil {
		if d := ksD(xs, wrong); d <= ksDMax {
			t.Errorf("KS D = %.4f ≤ %.4f against a wrong CDF: the test has no power", d, ksDMax)
		}
	}
}

type rngT = rand.Rand
