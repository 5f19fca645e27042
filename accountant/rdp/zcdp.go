package rdp

import (
	"fmt"
	"math"
)

// A Release is one Gaussian release of a run, as a Ledger records it: a
// named query with L2 sensitivity L2 (for the protected unit) released
// Count times, each with N(0, Sigma²) noise per coordinate. Its cost in
// zero-concentrated DP is Rho = Count·L2²/(2·Sigma²).
type Release struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	L2    float64 `json:"l2_sensitivity"`
	Sigma float64 `json:"sigma"`
	Rho   float64 `json:"rho"`
}

// A Ledger lists every release of a run that read the private data and
// composes them in zCDP (Bun and Steinke, TCC 2016): the Gaussian mechanism
// with sensitivity Δ and noise σ is ρ-zCDP with ρ = Δ²/(2σ²), i.e. its
// Rényi curve is ε(α) = αρ at every order, and composition adds ρ. The
// zero Ledger is empty and ready to use.
type Ledger struct {
	releases []Release
}

// Gaussian records count releases of a query with L2 sensitivity l2 under
// N(0, sigma²) noise, under name, and returns their ρ. It panics when
// sigma or l2 is not positive and finite, or count < 1: the caller
// calibrated sigma, so that is a programming error.
func (l *Ledger) Gaussian(name string, count int, l2, sigma float64) float64 {
	if !(sigma > 0) || !(l2 > 0) || math.IsInf(sigma, 0) || math.IsInf(l2, 0) || count < 1 {
		panic(fmt.Sprintf("rdp: Ledger.Gaussian(%q, %d, %g, %g): bad release", name, count, l2, sigma))
	}
	rho := float64(count) * l2 * l2 / (2 * sigma * sigma)
	l.releases = append(l.releases, Release{Name: name, Count: count, L2: l2, Sigma: sigma, Rho: rho})
	return rho
}

// Releases returns a copy of the recorded releases, in order.
func (l *Ledger) Releases() []Release { return append([]Release(nil), l.releases...) }

// Rho returns the total ρ of every recorded release.
func (l *Ledger) Rho() float64 {
	var s float64
	for _, r := range l.releases {
		s += r.Rho
	}
	return s
}

// Epsilon returns the ε at delta of the whole ledger: ZCDPToDP(Rho(), delta).
func (l *Ledger) Epsilon(delta float64) float64 { return ZCDPToDP(l.Rho(), delta) }

// zcdpBound is the (ε, δ) conversion of order alpha for a ρ-zCDP
// mechanism: αρ + ln((α−1)/α) − (ln δ + ln α)/(α−1) (see ToDP).
func zcdpBound(rho, alpha, lnDelta float64) float64 {
	return alpha*rho + math.Log((alpha-1)/alpha) - (lnDelta+math.Log(alpha))/(alpha-1)
}

// ZCDPToDP converts ρ-zCDP to (ε, δ)-DP by the conversion of ToDP
// (Canonne, Kamath and Steinke 2020, Proposition 12), minimized over every
// real order α > 1 rather than a grid: the bound is convex in α on the
// range that matters, and a golden-section search on ln(α−1) finds its
// least value to 1e-12 relative precision. It returns 0 for ρ = 0 (no
// release), and NaN unless ρ ≥ 0 and 0 < delta < 1.
func ZCDPToDP(rho, delta float64) float64 {
	if !(delta > 0 && delta < 1) || !(rho >= 0) || math.IsInf(rho, 1) {
		return math.NaN()
	}
	if rho == 0 {
		return 0
	}
	ld := math.Log(delta)
	f := func(t float64) float64 { return zcdpBound(rho, 1+math.Exp(t), ld) }
	// α − 1 ranges over [1e-6, 1e8]; the minimizer, ≈ sqrt(ln(1/δ)/ρ),
	// lies inside for every ρ and δ of practical interest.
	lo, hi := math.Log(1e-6), math.Log(1e8)
	g := (math.Sqrt(5) - 1) / 2
	a, b := hi-g*(hi-lo), lo+g*(hi-lo)
	fa, fb := f(a), f(b)
	for hi-lo > 1e-12 {
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - g*(hi-lo)
			fa = f(a)
		} else {
			lo, a, fa = a, b, fb
			b = lo + g*(hi-lo)
			fb = f(b)
		}
	}
	return math.Max(math.Min(fa, fb), 0)
}

// ZCDPRhoFor returns the largest ρ whose ZCDPToDP at delta is at most eps,
// to a relative precision of 1e-10 (rounded down): the budget a run
// divides among its releases. It fails with ErrParam unless eps > 0 is
// finite and 0 < delta < 1.
func ZCDPRhoFor(eps, delta float64) (float64, error) {
	if !(eps > 0) || math.IsInf(eps, 1) {
		return 0, fmt.Errorf("%w: eps = %g must be positive and finite", ErrParam, eps)
	}
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("%w: delta = %g, want (0, 1)", ErrParam, delta)
	}
	ok := func(rho float64) bool { return ZCDPToDP(rho, delta) <= eps }
	// ε ≥ ρ for every δ < 1 (order α → 1 would need δ ≥ 1), so ρ = eps
	// fails at least for ε large; start from a bracket.
	lo, hi := eps*1e-6, eps
	for !ok(lo) {
		lo /= 10
		if lo < 1e-300 {
			return 0, fmt.Errorf("%w: no rho reaches eps = %g at delta = %g", ErrParam, eps, delta)
		}
	}
	for ok(hi) {
		lo, hi = hi, hi*2
	}
	for hi/lo > 1+1e-10 {
		m := math.Sqrt(lo * hi)
		if ok(m) {
			lo = m
		} else {
			hi = m
		}
	}
	return lo, nil
}

// GaussianSigmaFor returns the noise σ at which one release of L2
// sensitivity l2 costs rho: l2/sqrt(2ρ).
func GaussianSigmaFor(rho, l2 float64) float64 { return l2 / math.Sqrt(2*rho) }
