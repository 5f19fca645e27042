package rdp

import (
	"errors"
	"fmt"
	"math"
)

// ErrParam is wrapped by SkellamMuFor's errors about its arguments.
var ErrParam = errors.New("rdp: invalid parameter")

// Orders is the grid of Rényi orders α on which a Curve is kept: 1.25,
// 1.5, 1.75, then the integers 2 to 64, then 128 and 256. Callers must not
// modify it.
var Orders = func() []float64 {
	o := []float64{1.25, 1.5, 1.75}
	for a := 2; a <= 64; a++ {
		o = append(o, float64(a))
	}
	return append(o, 128, 256)
}()

// Curve is an RDP curve: c[i] is the ε of order Orders[i] (+Inf where a
// mechanism gives no bound). Its length is len(Orders).
type Curve []float64

// Gaussian returns the RDP of order alpha of the Gaussian mechanism with
// noise N(0, sigma²) per coordinate and L2 sensitivity l2: α·l2²/(2σ²)
// (Mironov 2017, Proposition 7). It is +Inf for sigma ≤ 0.
func Gaussian(alpha, sigma, l2 float64) float64 {
	if !(sigma > 0) {
		return math.Inf(1)
	}
	return alpha * l2 * l2 / (2 * sigma * sigma)
}

// Skellam returns an RDP bound of order alpha for the Skellam mechanism:
// Skellam(mu) = Poisson(mu) − Poisson(mu) noise (variance 2mu) added to
// each coordinate of an integer-valued query with L1 sensitivity l1 and
// L2 sensitivity l2. For integer α > 1 it is
//
//	ε(α) = α·Δ2²/(4μ) + min( ((2α−1)·Δ2² + 6·Δ1)/(16μ²), 3·Δ1/(4μ) ),
//
// the bound of Agarwal, Kairouz and Liu, "The Skellam Mechanism for
// Differentially Private Federated Learning" (NeurIPS 2021, Theorem 3.5 and
// its multi-dimensional corollary) restated for Poisson mean μ: the paper
// writes it for noise of variance v = 2μ as αΔ2²/(2v) + min(((2α−1)Δ2² +
// 6Δ1)/(4v²), 3Δ1/(2v)). The first term is the Gaussian mechanism's at
// σ² = 2μ. A non-integer alpha is rounded up: Rényi divergence does not
// decrease with the order, so ε(⌈α⌉) bounds order α too. It is +Inf for
// mu ≤ 0 and NaN for alpha ≤ 1.
func Skellam(alpha, mu, l1, l2 float64) float64 {
	if !(alpha > 1) {
		return math.NaN()
	}
	if !(mu > 0) {
		return math.Inf(1)
	}
	a := math.Ceil(alpha)
	d2 := l2 * l2
	return a*d2/(4*mu) + math.Min(((2*a-1)*d2+6*l1)/(16*mu*mu), 3*l1/(4*mu))
}

// GaussianCurve returns the Gaussian mechanism's curve (Gaussian) on
// Orders.
func GaussianCurve(sigma, l2 float64) Curve {
	c := make(Curve, len(Orders))
	for i, a := range Orders {
		c[i] = Gaussian(a, sigma, l2)
	}
	return c
}

// SkellamCurve returns the Skellam mechanism's curve (Skellam) on Orders:
// one release of a query with sensitivities l1, l2 under Skellam(mu) noise.
func SkellamCurve(mu, l1, l2 float64) Curve {
	c := make(Curve, len(Orders))
	for i, a := range Orders {
		c[i] = Skellam(a, mu, l1, l2)
	}
	return c
}

// SkellamPartial returns the curve of the distributed Skellam mechanism
// provisioned for Skellam(mu) in total when only a fraction rho in (0, 1]
// of the clients' Skellam(mu/n) shares arrive: the sum then carries
// Skellam(rho·mu), so it is SkellamCurve(rho·mu, l1, l2). A rho that is
// not positive gives +Inf everywhere (no noise at all).
func SkellamPartial(mu, rho, l1, l2 float64) Curve {
	return SkellamCurve(rho*mu, l1, l2)
}

// Compose returns the curve of running all the given mechanisms (possibly
// adaptively): the sum of their curves at each order (Mironov 2017,
// Proposition 1). With no curves it returns the zero curve.
func Compose(cs ...Curve) Curve {
	out := make(Curve, len(Orders))
	for _, c := range cs {
		for i := range out {
			out[i] += c[i]
		}
	}
	return out
}

// Repeat returns the curve of rounds runs of the mechanism with curve c:
// rounds·c at each order.
func Repeat(c Curve, rounds int) Curve {
	out := make(Curve, len(Orders))
	for i := range out {
		out[i] = float64(rounds) * c[i]
	}
	return out
}

// ToDP converts the curve to (eps, delta)-DP: the least over Orders of
//
//	ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1),
//
// and the order that attains it. This is the conversion of Canonne, Kamath
// and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS
// 2020, Proposition 12; equivalently Asoodeh et al. 2021 and Balle et al.
// 2020, Theorem 21), tighter than Mironov's ε(α) + ln(1/δ)/(α−1) by
// ln(α)/(α−1) − ln(1 − 1/α). eps is at least 0; it is +Inf if every order
// is +Inf, and NaN unless delta is in (0, 1).
func ToDP(c Curve, delta float64) (eps, order float64) {
	if !(delta > 0 && delta < 1) {
		return math.NaN(), math.NaN()
	}
	eps, order = math.Inf(1), math.NaN()
	ld := math.Log(delta)
	for i, a := range Orders {
		if math.IsInf(c[i], 1) || math.IsNaN(c[i]) {
			continue
		}
		e := c[i] + math.Log((a-1)/a) - (ld+math.Log(a))/(a-1)
		if e < eps {
			eps, order = e, a
		}
	}
	return math.Max(eps, 0), order
}

// SkellamEpsilon returns the ε at delta of rounds releases of the Skellam
// mechanism (mu, l1, l2): ToDP(Repeat(SkellamCurve(mu, l1, l2), rounds)).
func SkellamEpsilon(mu float64, rounds int, l1, l2, delta float64) float64 {
	eps, _ := ToDP(Repeat(SkellamCurve(mu, l1, l2), rounds), delta)
	return eps
}

// SkellamMuFor returns the least Poisson mean μ (Skellam(μ) noise,
// variance 2μ, in the query's integer units) such that rounds releases of
// the Skellam mechanism with sensitivities l1, l2 are (eps, delta)-DP by
// SkellamEpsilon, to a relative precision of 1e-9 (rounded up). ε
// decreases in μ, so it is found by bisection on ln μ. Distributed among n
// clients, each adds Skellam(μ/n); to tolerate dropouts down to a fraction
// ρ, provision μ/ρ. It fails with ErrParam unless eps > 0, 0 < delta < 1,
// rounds ≥ 1 and l2 > 0, l1 ≥ 0.
func SkellamMuFor(eps, delta float64, rounds int, l1, l2 float64) (float64, error) {
	switch {
	case !(eps > 0) || math.IsInf(eps, 1):
		return 0, fmt.Errorf("%w: eps = %g must be positive and finite", ErrParam, eps)
	case !(delta > 0 && delta < 1):
		return 0, fmt.Errorf("%w: delta = %g, want (0, 1)", ErrParam, delta)
	case rounds < 1:
		return 0, fmt.Errorf("%w: rounds = %d, want at least 1", ErrParam, rounds)
	case !(l2 > 0) || !(l1 >= 0) || math.IsInf(l1, 1) || math.IsInf(l2, 1):
		return 0, fmt.Errorf("%w: sensitivities l1 = %g, l2 = %g", ErrParam, l1, l2)
	}
	ok := func(mu float64) bool { return SkellamEpsilon(mu, rounds, l1, l2, delta) <= eps }
	lo, hi := 1.0, 1.0
	for !ok(hi) {
		lo, hi = hi, hi*2
		if hi > 1e300 {
			return 0, fmt.Errorf("%w: no mu reaches eps = %g", ErrParam, eps)
		}
	}
	if lo == hi {
		for ok(lo) {
			hi, lo = lo, lo/2
			if lo < 1e-300 {
				return hi, nil
			}
		}
	}
	// Invariant: ok(hi), !ok(lo).
	for hi/lo > 1+1e-9 {
		m := math.Sqrt(lo * hi)
		if ok(m) {
			hi = m
		} else {
			lo = m
		}
	}
	return hi, nil
}
