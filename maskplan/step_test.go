package maskplan

import (
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/rng"
)

// TestEncodeDecodeRoundTrip: without noise shares, the decoded sum of n
// users' encodings is the float sum within n·σ/γ per coordinate (each
// user's stochastic rounding moves a coordinate by less than one integer
// unit), for blocks of different σ.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	ms := NewStep(0.05, []int{3, 2}, []float64{2, 7}, []float64{1, 3})
	const n = 40
	sum := make([]uint32, ms.D+1)
	want := make([]float64, ms.D)
	noise := make([]int64, ms.D)
	for u := range n {
		r := rng.New(1, uint64(u))
		x := []float64{0.3, -0.1, 0, 1.5 * float64(u%3), -2}
		for e, v := range x {
			want[e] += v
		}
		for e, w := range ms.Encode(x, r, 1, noise, true) {
			sum[e] += w
		}
	}
	got := make([]float64, ms.D)
	if a := ms.Decode(sum, got); a != n {
		t.Fatalf("arrivals %d, want %d", a, n)
	}
	for e := range got {
		bl := 0
		if e >= 3 {
			bl = 1
		}
		if tol := n * ms.Sigmas[bl] / ms.Gamma; math.Abs(got[e]-want[e]) > tol {
			t.Errorf("coordinate %d: decoded %v, want %v ± %v", e, got[e], want[e], tol)
		}
	}
}

// TestCalibrateReachesTarget: the calibrated plan's ε is at most the
// target and close to it, replace-one is larger, and the noise per
// coordinate is a little above the Gaussian plan's σ.
func TestCalibrateReachesTarget(t *testing.T) {
	for _, eps := range []float64{0.5, 1, 10} {
		rho, err := rdp.ZCDPRhoFor(eps, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		r1, r2 := 0.2*rho, 0.8*rho
		steps := []Step{{}, NewStep(r1, []int{100}, []float64{rdp.GaussianSigmaFor(r1, 1)}, []float64{1}),
			NewStep(r2, []int{500}, []float64{rdp.GaussianSigmaFor(r2, 0.8)}, []float64{0.8})}
		_, e, er, err := Calibrate(steps, eps, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		if e > eps || e < 0.99*eps || er <= e {
			t.Errorf("ε target %v: plan %v, replace-one %v", eps, e, er)
		}
		if steps[0].Mu != 0 {
			t.Errorf("a step without a release got noise μ = %v", steps[0].Mu)
		}
		for _, ms := range steps[1:] {
			if s := ms.NoiseSigma(0); s < ms.Sigmas[0] || s > 1.2*ms.Sigmas[0] {
				t.Errorf("ε %v: decoded noise σ %v for the plan's %v", eps, s, ms.Sigmas[0])
			}
		}
	}
}

// TestCheckRefusesInflatedSums: an honest sum passes; one word pushed by
// 2^24 or an arrival word above the inputs is refused with
// ErrOutOfBounds.
func TestCheckRefusesInflatedSums(t *testing.T) {
	steps := []Step{NewStep(0.1, []int{50}, []float64{4}, []float64{1})}
	if _, _, _, err := Calibrate(steps, 1, 1e-6); err != nil {
		t.Fatal(err)
	}
	ms := &steps[0]
	const n = 30
	sum := make([]uint32, ms.D+1)
	noise := make([]int64, ms.D)
	for u := range n {
		x := make([]float64, ms.D)
		x[u%ms.D] = 1
		for e, w := range ms.Encode(x, rng.New(2, uint64(u)), n, noise, false) {
			sum[e] += w
		}
	}
	if err := ms.Check(0, sum, n, n); err != nil {
		t.Fatalf("honest sum refused: %v", err)
	}
	cases := map[string]func(w []uint32){
		"word pushed": func(w []uint32) { w[7] += 1 << 24 },
		"arrivals":    func(w []uint32) { w[ms.D] = n + 1 },
	}
	for name, tamper := range cases {
		w := append([]uint32(nil), sum...)
		tamper(w)
		if err := ms.Check(0, w, n, n); !errors.Is(err, protocol.ErrOutOfBounds) {
			t.Errorf("%s: %v, want ErrOutOfBounds", name, err)
		}
	}
}
