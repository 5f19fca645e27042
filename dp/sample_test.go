package dp

import (
	"math"
	"testing"

	"github.com/privrec/privrec/rng"
)

func TestKeepProb(t *testing.T) {
	tests := []struct{ eps, t, want float64 }{
		{1, 1, 1}, {2, 1, 1}, {0.5, 1, math.Expm1(0.5) / math.Expm1(1)}, {0, 1, 0},
		{1e-9, 2, 1e-9 / math.Expm1(2)},
		// Beyond e^709 the ratio is e^(eps−t) to double precision; the
		// quotient of Expm1s was +Inf/+Inf there.
		{1000, 1000.5, math.Exp(-0.5)}, {5000, 10000, 0}, {20000, 20000.5, math.Exp(-0.5)},
	}
	for _, tc := range tests {
		if got := KeepProb(tc.eps, tc.t); math.Abs(got-tc.want) > 1e-15*max(1, tc.want) || math.IsNaN(got) {
			t.Errorf("KeepProb(%v, %v) = %v, want %v", tc.eps, tc.t, got, tc.want)
		}
	}
}

func TestSampleKeepRates(t *testing.T) {
	const n = 60000
	eps := make([]float64, n)
	for k := range eps {
		eps[k] = []float64{0.1, 0.5, 1.5}[k%3]
	}
	const th = 1.0
	kept := SampleKeep(rng.New(8), eps, th, nil)
	count := make([]int, 3)
	for _, k := range kept {
		count[k%3]++
	}
	for g, e := range []float64{0.1, 0.5, 1.5} {
		p := KeepProb(e, th)
		if p == 1 {
			if count[g] != n/3 {
				t.Errorf("ε = %v: kept %d of %d, want all", e, count[g], n/3)
			}
			continue
		}
		if !binomialOK(count[g], n/3, p, 4.5) {
			t.Errorf("ε = %v: kept %d of %d, want p = %.4f", e, count[g], n/3, p)
		}
	}
	for i := 1; i < len(kept); i++ {
		if kept[i] <= kept[i-1] {
			t.Fatal("indices not increasing")
		}
	}
}
