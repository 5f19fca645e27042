package dp

import (
	"math"
	"math/rand/v2"
)

// Skellam noise for the integer path of distributed noise.
//
// The symmetric Skellam distribution Skellam(μ) is the law of X − Y with X,
// Y independent Poisson(μ): integer valued, mean 0, variance 2μ, and closed
// under sums, Skellam(μ1) + Skellam(μ2) = Skellam(μ1 + μ2). The distributed
// Skellam mechanism (Agarwal, Kairouz and Liu, "The Skellam Mechanism for
// Differentially Private Federated Learning", NeurIPS 2021) has each of n
// clients add a Skellam(μ/n) share to its quantized upload, so that the
// securely aggregated sum carries exactly Skellam(μ) noise; package
// accountant/rdp accounts for it.

// poissonSmall is the mean below which SamplePoisson inverts the CDF; from
// it on, it uses Hörmann's PTRS.
const poissonSmall = 10

// poissonGen draws Poisson(mu) variates; its constants depend on mu only,
// so FillSkellam computes them once per call.
type poissonGen struct {
	mu float64
	// Inversion (mu < poissonSmall).
	emu float64 // e^−mu
	// PTRS (mu ≥ poissonSmall).
	logmu, a, b, vr, lInvAlpha float64
}

func newPoissonGen(mu float64) poissonGen {
	g := poissonGen{mu: mu}
	if mu < poissonSmall {
		g.emu = math.Exp(-mu)
		return g
	}
	g.logmu = math.Log(mu)
	g.b = 0.931 + 2.53*math.Sqrt(mu)
	g.a = -0.059 + 0.02483*g.b
	g.lInvAlpha = math.Log(1.1239 + 1.1328/(g.b-3.4))
	g.vr = 0.9277 - 3.6224/(g.b-2)
	return g
}

func (g *poissonGen) draw(r *rand.Rand) int64 {
	if !(g.mu > 0) {
		return 0
	}
	if g.mu < poissonSmall {
		return g.invert(r)
	}
	return g.ptrs(r)
}

// invert is sequential search of the CDF from 0: one uniform and about
// mu+1 multiply-adds per draw. If rounding keeps the accumulated CDF below
// u (u within a few ulps of 1), the search stops where the pmf underflows.
func (g *poissonGen) invert(r *rand.Rand) int64 {
	u := r.Float64()
	p := g.emu
	s := p
	var k int64
	for u >= s && p > 0 {
		k++
		p *= g.mu / float64(k)
		s += p
	}
	return k
}

// ptrs is algorithm PTRS ("transformed rejection with squeeze") of W.
// Hörmann, "The transformed rejection method for generating Poisson random
// variables", Insurance: Mathematics and Economics 12 (1993) 39–45, for
// mu ≥ 10: a candidate from a transformed-uniform hat, accepted at once in
// the squeeze region (about 86% of draws at mu = 10, more for larger mu)
// and otherwise by comparison with the exact log pmf. About 1.15 candidate
// pairs of uniforms per draw; exact up to floating-point rounding.
func (g *poissonGen) ptrs(r *rand.Rand) int64 {
	for {
		u := r.Float64() - 0.5
		v := r.Float64()
		us := 0.5 - math.Abs(u)
		if us <= 0 {
			continue // u = −0.5: the hat's pole, probability 2^−53
		}
		kf := math.Floor((2*g.a/us+g.b)*u + g.mu + 0.43)
		if us >= 0.07 && v <= g.vr {
			return int64(kf)
		}
		if kf < 0 || (us < 0.013 && v > us) {
			continue
		}
		if math.Log(v)+g.lInvAlpha-math.Log(g.a/(us*us)+g.b) <= -g.mu+kf*g.logmu-logFactorial(kf) {
			return int64(kf)
		}
	}
}

// logFactTable holds ln k! for k < len(logFactTable), from math.Lgamma.
var logFactTable = func() []float64 {
	t := make([]float64, 256)
	for k := range t {
		t[k], _ = math.Lgamma(float64(k) + 1)
	}
	return t
}()

// logFactorial returns ln k! for an integer-valued k ≥ 0: from a table
// below 256 and above by Stirling's series to the x⁻⁷ term (x = k+1 > 256,
// truncation error below 10⁻²¹, under float64 rounding of the result). It
// is several times faster than math.Lgamma, which PTRS calls in about one
// draw in six.
func logFactorial(k float64) float64 {
	if k < float64(len(logFactTable)) {
		return logFactTable[int(k)]
	}
	x := k + 1
	r := 1 / x
	r2 := r * r
	const halfLog2Pi = 0.91893853320467274178
	return (x-0.5)*math.Log(x) - x + halfLog2Pi +
		r*(1.0/12-r2*(1.0/360-r2*(1.0/1260-r2*(1.0/1680))))
}

// SamplePoisson returns a draw from the Poisson distribution with mean mu:
// by inversion (sequential search) for mu < 10 and by Hörmann's PTRS
// transformed rejection for mu ≥ 10. Both are exact up to float64
// rounding, allocate nothing, and cost O(1 + mu) and O(1) respectively. A
// mu that is not positive (or NaN) gives 0; mu must be below 2^62.
func SamplePoisson(r *rand.Rand, mu float64) int64 {
	g := newPoissonGen(mu)
	return g.draw(r)
}

// SampleSkellam returns a draw from the symmetric Skellam distribution
// Skellam(mu): X − Y with X, Y independent Poisson(mu) (SamplePoisson), so
// mean 0 and variance 2mu. A mu that is not positive gives 0.
func SampleSkellam(r *rand.Rand, mu float64) int64 {
	g := newPoissonGen(mu)
	return g.draw(r) - g.draw(r)
}

// FillSkellam overwrites every element of dst with an independent
// Skellam(mu) draw (SampleSkellam), computing the sampler's constants once.
// It allocates nothing.
func FillSkellam(r *rand.Rand, mu float64, dst []int64) {
	g := newPoissonGen(mu)
	for i := range dst {
		dst[i] = g.draw(r) - g.draw(r)
	}
}

// FillSkellamShare overwrites dst with one client's share of distributed
// Skellam(mu) noise among n clients: independent Skellam(mu/n) draws, so
// that the n clients' shares sum to exactly Skellam(mu) per coordinate. It
// is the integer counterpart of FillGammaShares32. An n below 1 counts as
// 1. To tolerate dropouts, draw with n set to the minimum number of shares
// that must arrive: any n arriving shares give Skellam(mu), more only add
// noise (and fewer, a fraction ρ of them, give Skellam(ρ·mu); see
// rdp.SkellamPartial).
func FillSkellamShare(r *rand.Rand, mu float64, n int, dst []int64) {
	FillSkellam(r, mu/float64(max(n, 1)), dst)
}

// SkellamTail returns an upper bound on P(|S| ≥ t) for S ~ Skellam(mu):
// the two-sided Chernoff bound 2·exp(2mu(√(1+z²) − 1) − t·asinh(z)),
// z = t/(2mu), from the moment generating function
// E[e^{λS}] = exp(2mu(cosh λ − 1)) at its optimal λ = asinh(z), capped
// at 1. It is 1 for t ≤ 0, and 0 for t > 0 when mu ≤ 0 (no noise).
func SkellamTail(mu, t float64) float64 {
	if t <= 0 {
		return 1
	}
	if !(mu > 0) {
		return 0
	}
	z := t / (2 * mu)
	// 2mu(√(1+z²) − 1) = 2mu·z²/(√(1+z²) + 1), without cancellation.
	lb := 2*mu*z*z/(math.Sqrt(1+z*z)+1) - t*math.Asinh(z)
	return math.Min(1, 2*math.Exp(lb))
}

// SkellamTailBound returns the smallest integer t ≥ 1 with
// SkellamTail(mu, t) ≤ tail, so that P(|S| ≥ t) ≤ tail for
// S ~ Skellam(mu): with probability at least 1 − tail, |S| ≤ t − 1. For
// mu ≤ 0 it returns 1. tail must lie in (0, 1).
func SkellamTailBound(mu, tail float64) int64 {
	if !(mu > 0) {
		return 1
	}
	// The bound decreases in t; bracket, then bisect on integers.
	lo, hi := int64(0), int64(math.Ceil(2*math.Sqrt(mu)))+1
	for SkellamTail(mu, float64(hi)) > tail {
		lo = hi
		hi *= 2
	}
	for hi-lo > 1 {
		m := lo + (hi-lo)/2
		if SkellamTail(mu, float64(m)) > tail {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}
