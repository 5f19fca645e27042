package rdp

import (
	"errors"
	"math"
	"testing"
)

func TestOrders(t *testing.T) {
	if len(Orders) != 3+63+2 || Orders[0] != 1.25 || Orders[3] != 2 || Orders[len(Orders)-1] != 256 {
		t.Errorf("Orders = %v", Orders)
	}
	for i := 1; i < len(Orders); i++ {
		if Orders[i] <= Orders[i-1] {
			t.Fatalf("Orders not increasing at %d", i)
		}
	}
}

// logSkellamPMF returns ln P(S = k) for S ~ Skellam(mu), k in [−w, w].
func logSkellamPMF(mu float64, w int) []float64 {
	logPois := func(j int) float64 {
		lg, _ := math.Lgamma(float64(j) + 1)
		return float64(j)*math.Log(mu) - mu - lg
	}
	jmax := 3*w + int(mu) + 200
	out := make([]float64, 2*w+1)
	for k := -w; k <= w; k++ {
		// ln Σ_j Pois(j+|k|)·Pois(j), by log-sum-exp.
		kk := k
		if kk < 0 {
			kk = -kk
		}
		m := math.Inf(-1)
		terms := make([]float64, 0, jmax)
		for j := 0; j <= jmax; j++ {
			v := logPois(j+kk) + logPois(j)
			terms = append(terms, v)
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range terms {
			s += math.Exp(v - m)
		}
		out[k+w] = m + math.Log(s)
	}
	return out
}

// exactRenyi returns D_α(Sk(μ)+Δ ‖ Sk(μ)) from the pmf in log space.
func exactRenyi(lp []float64, w, shift int, alpha float64) float64 {
	m := math.Inf(-1)
	var terms []float64
	for k := -w + shift; k <= w; k++ {
		v := alpha*lp[k-shift+w] + (1-alpha)*lp[k+w]
		terms = append(terms, v)
		m = math.Max(m, v)
	}
	var s float64
	for _, v := range terms {
		s += math.Exp(v - m)
	}
	return (m + math.Log(s)) / (alpha - 1)
}

// TestSkellamBoundsExactDivergence checks the parametrization of Skellam
// against the truth: for a one-dimensional shift Δ (Δ1 = Δ2 = Δ) the bound
// must be at least the exact Rényi divergence between Skellam(μ) shifted
// by Δ and Skellam(μ), computed from the pmf, and close to it for large μ.
// With μ read as the variance instead of the Poisson mean, the bound would
// fall below the exact value.
func TestSkellamBoundsExactDivergence(t *testing.T) {
	for _, mu := range []float64{1, 5, 50, 500} {
		w := int(40*math.Sqrt(mu)) + 60
		lp := logSkellamPMF(mu, w)
		for _, d := range []int{1, 3} {
			for _, a := range []float64{2, 3, 8, 20} {
				exact := exactRenyi(lp, w, d, a)
				bound := Skellam(a, mu, float64(d), float64(d))
				if a == 8 {
					t.Logf("mu = %g, Δ = %d, α = 8: bound %.5g, exact %.5g", mu, d, bound, exact)
				}
				if bound < exact*(1-1e-9) {
					t.Errorf("mu = %g, Δ = %d, α = %g: bound %.6g < exact %.6g", mu, d, a, bound, exact)
				}
				if mu >= 500 && bound > 1.1*exact {
					t.Errorf("mu = %g, Δ = %d, α = %g: bound %.6g > 1.1 × exact %.6g", mu, d, a, bound, exact)
				}
				// Read as variance (μ' = 2μ), the bound is too small.
				if wrong := Skellam(a, 2*mu, float64(d), float64(d)); mu >= 50 && wrong >= exact {
					t.Errorf("mu = %g, Δ = %d, α = %g: the variance reading %.4g ≥ exact %.4g: test has no power", mu, d, a, wrong, exact)
				}
			}
		}
	}
	if !math.IsNaN(Skellam(1, 10, 1, 1)) || !math.IsInf(Skellam(2, 0, 1, 1), 1) {
		t.Error("Skellam: want NaN for α ≤ 1 and +Inf for μ ≤ 0")
	}
	if Skellam(2.5, 10, 1, 1) != Skellam(3, 10, 1, 1) {
		t.Error("Skellam: a non-integer order must round up")
	}
}

// TestSkellamApproachesGaussian checks that the Skellam bound tends to the
// Gaussian RDP at σ² = 2μ as μ grows.
func TestSkellamApproachesGaussian(t *testing.T) {
	const l1, l2 = 100, 10
	prev := math.Inf(1)
	for _, mu := range []float64{1e2, 1e3, 1e4, 1e5, 1e6} {
		for _, a := range []float64{2, 10, 64} {
			g := Gaussian(a, math.Sqrt(2*mu), l2)
			s := Skellam(a, mu, l1, l2)
			if s < g {
				t.Errorf("mu = %g, α = %g: Skellam %.4g below Gaussian %.4g", mu, a, s, g)
			}
		}
		ratio := Skellam(10, mu, l1, l2) / Gaussian(10, math.Sqrt(2*mu), l2)
		if ratio > prev {
			t.Errorf("mu = %g: ratio %.6f grew from %.6f", mu, ratio, prev)
		}
		prev = ratio
	}
	if prev > 1.001 {
		t.Errorf("at mu = 1e6 Skellam/Gaussian = %.6f, want within 0.1%%", prev)
	}
}

// analyticGaussEps is the exact ε at δ of the Gaussian mechanism with
// sensitivity/σ ratio m (composition of T rounds: m = √T·Δ/σ), from Balle
// and Wang (ICML 2018, Theorem 8):
// δ(ε) = Φ(m/2 − ε/m) − e^ε·Φ(−m/2 − ε/m), solved by bisection.
func analyticGaussEps(m, delta float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	d := func(e float64) float64 { return phi(m/2-e/m) - math.Exp(e)*phi(-m/2-e/m) }
	lo, hi := 0.0, 1.0
	for d(hi) > delta {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if d(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestGaussianToDP compares the RDP route for T Gaussian releases with the
// exact (analytic) Gaussian ε, a lower bound on any valid conversion: ours
// must be at least it and within 25%, and no worse than the classic
// zCDP conversion ρ + 2√(ρ ln(1/δ)) (Bun and Steinke 2016), ρ = TΔ²/(2σ²).
func TestGaussianToDP(t *testing.T) {
	for _, tc := range []struct {
		sigma float64
		T     int
		delta float64
	}{{1, 1, 1e-5}, {2, 10, 1e-5}, {5, 100, 1e-6}, {20, 1000, 1e-5}, {50, 100, 1e-9}} {
		eps, order := ToDP(Repeat(GaussianCurve(tc.sigma, 1), tc.T), tc.delta)
		exact := analyticGaussEps(math.Sqrt(float64(tc.T))/tc.sigma, tc.delta)
		rho := float64(tc.T) / (2 * tc.sigma * tc.sigma)
		zcdp := rho + 2*math.Sqrt(rho*math.Log(1/tc.delta))
		t.Logf("σ = %g, T = %d, δ = %g: RDP ε = %.4f (α = %g), analytic %.4f, zCDP %.4f", tc.sigma, tc.T, tc.delta, eps, order, exact, zcdp)
		if eps < exact || eps > 1.25*exact {
			t.Errorf("σ = %g, T = %d, δ = %g: ε = %.4f, analytic %.4f", tc.sigma, tc.T, tc.delta, eps, exact)
		}
		if eps > zcdp {
			t.Errorf("σ = %g, T = %d, δ = %g: ε = %.4f worse than zCDP's %.4f", tc.sigma, tc.T, tc.delta, eps, zcdp)
		}
	}
	if e, _ := ToDP(GaussianCurve(1, 1), 0); !math.IsNaN(e) {
		t.Errorf("δ = 0: ε = %g, want NaN", e)
	}
	if e, _ := ToDP(SkellamCurve(0, 1, 1), 1e-5); !math.IsInf(e, 1) {
		t.Errorf("no noise: ε = %g, want +Inf", e)
	}
}

func TestCompositionLinear(t *testing.T) {
	c := SkellamCurve(500, 20, 5)
	c10 := Repeat(c, 10)
	cc := Compose(c, c, c)
	for i := range c {
		if math.Abs(c10[i]-10*c[i]) > 1e-12*c10[i] || math.Abs(cc[i]-3*c[i]) > 1e-12*cc[i] {
			t.Fatalf("order %g: Repeat %g, Compose %g, single %g", Orders[i], c10[i], cc[i], c[i])
		}
	}
	mixed := Compose(c, GaussianCurve(3, 1))
	for i := range mixed {
		if mixed[i] != c[i]+Gaussian(Orders[i], 3, 1) {
			t.Fatalf("order %g: Compose is not the sum", Orders[i])
		}
	}
}

// TestMonotone: ε decreases as δ grows and as μ grows, and grows with the
// number of rounds and with dropouts.
func TestMonotone(t *testing.T) {
	prev := math.Inf(1)
	for _, d := range []float64{1e-12, 1e-9, 1e-6, 1e-4, 1e-2} {
		e := SkellamEpsilon(1000, 50, 10, 3, d)
		if !(e < prev) {
			t.Errorf("δ = %g: ε = %g not below %g", d, e, prev)
		}
		prev = e
	}
	prev = math.Inf(1)
	for _, mu := range []float64{10, 100, 1e3, 1e4, 1e5} {
		e := SkellamEpsilon(mu, 50, 10, 3, 1e-6)
		if !(e < prev) {
			t.Errorf("μ = %g: ε = %g not below %g", mu, e, prev)
		}
		prev = e
	}
	full := SkellamPartial(1000, 1, 10, 3)
	half := SkellamPartial(1000, 0.5, 10, 3)
	want := SkellamCurve(500, 10, 3)
	base := SkellamCurve(1000, 10, 3)
	for i := range full {
		if full[i] != base[i] || half[i] != want[i] || !(half[i] > full[i]) {
			t.Fatalf("order %g: partial curves (ρ = 1: %g, ρ = 0.5: %g) vs %g, %g", Orders[i], full[i], half[i], base[i], want[i])
		}
	}
	if e, _ := ToDP(SkellamPartial(1000, 0, 1, 1), 1e-5); !math.IsInf(e, 1) {
		t.Errorf("no share arrived: ε = %g, want +Inf", e)
	}
}

// TestSkellamMuForRoundTrip: the μ returned reaches the target ε, and
// slightly less noise does not.
func TestSkellamMuForRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		eps, delta float64
		T          int
		l1, l2     float64
	}{{1, 1e-5, 1, 1, 1}, {8, 1e-6, 100, 400, 40}, {0.5, 1e-9, 1000, 3000, 300}, {30, 1e-5, 10, 2, 1}} {
		mu, err := SkellamMuFor(tc.eps, tc.delta, tc.T, tc.l1, tc.l2)
		if err != nil {
			t.Fatal(err)
		}
		got := SkellamEpsilon(mu, tc.T, tc.l1, tc.l2, tc.delta)
		below := SkellamEpsilon(mu*(1-1e-6), tc.T, tc.l1, tc.l2, tc.delta)
		t.Logf("%+v: μ = %.6g (σ = %.4g), ε = %.6f", tc, mu, math.Sqrt(2*mu), got)
		if got > tc.eps || below <= tc.eps {
			t.Errorf("%+v: μ = %g gives ε = %g, μ(1−1e−6) gives %g", tc, mu, got, below)
		}
	}
	for _, bad := range [][5]float64{{0, 1e-5, 1, 1, 1}, {1, 0, 1, 1, 1}, {1, 1e-5, 0, 1, 1}, {1, 1e-5, 1, 1, 0}} {
		if _, err := SkellamMuFor(bad[0], bad[1], int(bad[2]), bad[3], bad[4]); !errors.Is(err, ErrParam) {
			t.Errorf("%v: err = %v, want ErrParam", bad, err)
		}
	}
}

// TestSkellamMatchesReference: Skellam agrees with the bound as the
// authors' reference accounting writes it (google-research/federated,
// distributed_dp: α·Δ2²/(2v) + min(((2α−1)·Δ2² + 6·Δ1)/(4v²), 3·Δ1/(2v))
// for noise of variance v, at scale 1), evaluated outside Go at v = 2μ.
func TestSkellamMatchesReference(t *testing.T) {
	cases := []struct{ alpha, mu, l1, l2, want float64 }{
		{2, 10, 1, 1, 0.055625},
		{8, 1000, 30, 10, 0.200105},
		{32, 5e4, 600, 522, 43.59786925230001},
		{3, 0.5, 4, 2, 12}, // the min takes its second term
	}
	for _, c := range cases {
		if got := Skellam(c.alpha, c.mu, c.l1, c.l2); math.Abs(got-c.want) > 1e-12*c.want {
			t.Errorf("Skellam(α %g, μ %g, Δ1 %g, Δ2 %g) = %.15g, the reference gives %.15g", c.alpha, c.mu, c.l1, c.l2, got, c.want)
		}
	}
}
