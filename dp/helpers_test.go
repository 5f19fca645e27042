package dp

import (
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
