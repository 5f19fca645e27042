package dp

import (
	"math"
	"testing"
)

func TestPartialSharesLoss(t *testing.T) {
	// a = 1: the Laplace mechanism; a ≥ 1 never costs more.
	for _, a := range []float64{1, 1.5, 3} {
		if got := PartialSharesLoss(a, 0.7, 10); got != 0.7 {
			t.Errorf("a = %v: loss %v, want 0.7", a, got)
		}
	}
	if got := PartialSharesLoss(0.5, 1, 10); !math.IsInf(got, 1) {
		t.Errorf("a = 0.5: loss %v, want +Inf", got)
	}
	// The numeric path agrees with the closed form where one exists:
	// log f at 0 is log Γ(2a−1) − (2a−1) log 2.
	lg, _ := math.Lgamma(0.4)
	if d := vgLogDensity(0.7, 0) - (lg - 0.4*math.Ln2); math.Abs(d) > 1e-12 {
		t.Errorf("log density at 0 off by %v", d)
	}
	// Continuity at 0: the quadrature near 0 meets the closed form.
	if d := math.Abs(vgLogDensity(0.7, 1e-9) - vgLogDensity(0.7, 0)); d > 1e-3 {
		t.Errorf("log density jumps by %v near 0", d)
	}
	// Close to a = 1 the loss is close to eps; it grows as a falls
	// towards 1/2, and with the number of coordinates a change may
	// spread over.
	prev := 1.0
	for _, a := range []float64{0.99, 0.9, 0.8, 0.7, 0.6, 0.55} {
		got := PartialSharesLoss(a, 1, 1)
		if got < prev-1e-9 {
			t.Errorf("a = %v: loss %v below %v at a larger share", a, got, prev)
		}
		prev = got
	}
	if got := PartialSharesLoss(0.99, 1, 1); got > 1.1 {
		t.Errorf("a = 0.99: loss %v, want about 1", got)
	}
	if k1, k10 := PartialSharesLoss(0.7, 1, 1), PartialSharesLoss(0.7, 1, 10); k10 < k1 {
		t.Errorf("loss over 10 coordinates %v below one coordinate's %v", k10, k1)
	}
	t.Logf("eps 1, K 10: a=0.9 → %.3f, 0.8 → %.3f, 0.7 → %.3f, 0.6 → %.3f",
		PartialSharesLoss(0.9, 1, 10), PartialSharesLoss(0.8, 1, 10), PartialSharesLoss(0.7, 1, 10), PartialSharesLoss(0.6, 1, 10))
}
