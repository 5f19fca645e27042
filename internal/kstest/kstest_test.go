package kstest

import (
	"math"
	"testing"

	"github.com/privrec/privrec/rng"
)

func TestDistance(t *testing.T) {
	// One point at the median: the empirical CDF jumps from 0 to 1 where
	// F = 1/2, so the distance is 1/2.
	if d := Distance([]float64{0}, LaplaceCDF(1)); d != 0.5 {
		t.Errorf("one point: D = %v, want 0.5", d)
	}
	// Laplace draws fit Laplace(2) and not Laplace(1.4), at α = 0.001.
	r := rng.New(1)
	xs := make([]float64, 4000)
	for i := range xs {
		xs[i] = r.ExpFloat64() * 2
		if r.Uint64()&1 == 0 {
			xs[i] = -xs[i]
		}
	}
	orig := xs[0]
	crit := 1.95 / math.Sqrt(float64(len(xs)))
	if d := Distance(xs, LaplaceCDF(2)); d > crit {
		t.Errorf("D = %.4f > %.4f against the true CDF", d, crit)
	}
	if d := Distance(xs, LaplaceCDF(1.4)); d <= crit {
		t.Errorf("D = %.4f ≤ %.4f against a wrong CDF", d, crit)
	}
	if xs[0] != orig {
		t.Error("Distance sorted its argument")
	}
}

func TestLaplaceCDF(t *testing.T) {
	f := LaplaceCDF(2)
	for _, c := range []struct{ x, want float64 }{
		{0, 0.5}, {2, 1 - 0.5/math.E}, {-2, 0.5 / math.E}, {math.Inf(1), 1}, {math.Inf(-1), 0},
	} {
		if got := f(c.x); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("F(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}
