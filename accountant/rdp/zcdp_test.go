package rdp

import (
	"errors"
	"math"
	"testing"
)

// analyticGaussianDelta is the exact δ(ε) of the Gaussian mechanism with
// sensitivity 1 and noise σ (Balle and Wang, ICML 2018, Theorem 8):
// Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ).
func analyticGaussianDelta(eps, sigma float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	return phi(1/(2*sigma)-eps*sigma) - math.Exp(eps)*phi(-1/(2*sigma)-eps*sigma)
}

// analyticGaussianEps inverts analyticGaussianDelta by bisection.
func analyticGaussianEps(sigma, delta float64) float64 {
	lo, hi := 0.0, 100.0
	for range 200 {
		m := (lo + hi) / 2
		if analyticGaussianDelta(m, sigma) > delta {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}

func TestZCDPToDPAgainstKnownValues(t *testing.T) {
	// want is the conversion minimized over α by brute force (a 1.0005
	// geometric grid of α in (1, 1e5)), computed independently in Python;
	// exact is the analytic Gaussian's ε, which no sound bound may beat.
	for _, c := range []struct{ sigma, delta, want float64 }{
		{1, 1e-5, 4.728387021514827},
		{2, 1e-5, 2.1657155454211994},
		{5, 1e-6, 0.8999352959605217},
		{0.5, 1e-6, 11.688596719901295},
		{20, 1e-6, 0.2059022410100328},
	} {
		rho := 1 / (2 * c.sigma * c.sigma)
		got := ZCDPToDP(rho, c.delta)
		exact := analyticGaussianEps(c.sigma, c.delta)
		bunSteinke := rho + 2*math.Sqrt(rho*math.Log(1/c.delta))
		if math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("σ=%g δ=%g: ε = %.9g, want %.9g", c.sigma, c.delta, got, c.want)
		}
		if got < exact || got > 1.1*exact {
			t.Errorf("σ=%g δ=%g: ε = %g, outside [exact %g, 1.1·exact]", c.sigma, c.delta, got, exact)
		}
		if got >= bunSteinke {
			t.Errorf("σ=%g δ=%g: ε = %g, not below Bun–Steinke's %g", c.sigma, c.delta, got, bunSteinke)
		}
		// The grid conversion of the same curve can only be looser.
		if grid, _ := ToDP(GaussianCurve(c.sigma, 1), c.delta); grid < got-1e-9 {
			t.Errorf("σ=%g δ=%g: grid ToDP %g beats the continuous %g", c.sigma, c.delta, grid, got)
		}
	}
}

func TestZCDPToDPEdges(t *testing.T) {
	if got := ZCDPToDP(0, 1e-6); got != 0 {
		t.Errorf("ρ = 0: ε = %g, want 0", got)
	}
	for _, c := range []struct{ rho, delta float64 }{{-1, 1e-6}, {1, 0}, {1, 1}, {math.Inf(1), 1e-6}, {math.NaN(), 1e-6}} {
		if got := ZCDPToDP(c.rho, c.delta); !math.IsNaN(got) {
			t.Errorf("ZCDPToDP(%g, %g) = %g, want NaN", c.rho, c.delta, got)
		}
	}
}

func TestZCDPRhoForInverts(t *testing.T) {
	for _, eps := range []float64{0.1, 1, 2, 5, 10, 100} {
		for _, delta := range []float64{1e-5, 1e-6} {
			rho, err := ZCDPRhoFor(eps, delta)
			if err != nil {
				t.Fatal(err)
			}
			if got := ZCDPToDP(rho, delta); got > eps || got < eps*(1-1e-8) {
				t.Errorf("ε=%g δ=%g: ρ = %g gives ε %g", eps, delta, rho, got)
			}
		}
	}
	for _, c := range []struct{ eps, delta float64 }{{0, 1e-6}, {-1, 1e-6}, {math.Inf(1), 1e-6}, {1, 0}, {1, 2}} {
		if _, err := ZCDPRhoFor(c.eps, c.delta); !errors.Is(err, ErrParam) {
			t.Errorf("ZCDPRhoFor(%g, %g): err %v, want ErrParam", c.eps, c.delta, err)
		}
	}
}

func TestLedgerComposes(t *testing.T) {
	var l Ledger
	if l.Rho() != 0 || l.Epsilon(1e-6) != 0 {
		t.Fatalf("empty ledger: ρ %g, ε %g", l.Rho(), l.Epsilon(1e-6))
	}
	// Four releases of σ = 2 at sensitivity 1 are one release of σ = 1.
	l.Gaussian("mean", 1, 1, 2)
	l.Gaussian("gram", 3, 2, 4)
	if got, want := l.Rho(), 0.5; math.Abs(got-want) > 1e-15 {
		t.Errorf("ρ = %g, want %g", got, want)
	}
	if got, want := l.Epsilon(1e-5), ZCDPToDP(0.5, 1e-5); got != want {
		t.Errorf("ε = %g, want %g", got, want)
	}
	rs := l.Releases()
	if len(rs) != 2 || rs[1].Name != "gram" || rs[1].Count != 3 || math.Abs(rs[1].Rho-0.375) > 1e-15 {
		t.Errorf("releases %+v", rs)
	}
	rs[0].Name = "changed"
	if l.Releases()[0].Name != "mean" {
		t.Error("Releases does not copy")
	}
	if s := GaussianSigmaFor(0.125, 1); math.Abs(s-2) > 1e-15 {
		t.Errorf("GaussianSigmaFor(0.125, 1) = %g, want 2", s)
	}
}

func TestLedgerRejectsBadRelease(t *testing.T) {
	for _, c := range []struct {
		count     int
		l2, sigma float64
	}{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {1, 1, math.Inf(1)}, {1, math.NaN(), 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Gaussian(%d, %g, %g) did not panic", c.count, c.l2, c.sigma)
				}
			}()
			var l Ledger
			l.Gaussian("x", c.count, c.l2, c.sigma)
		}()
	}
}
