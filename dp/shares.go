package dp

import (
	"math"

	"gonum.org/v1/gonum/integrate/quad"
)

// PartialSharesLoss returns the privacy loss of the distributed Laplace
// mechanism when only a fraction a of its gamma shares arrive: each of n
// clients adds G − G′ with G, G′ ~ Gamma(1/n, b), the server receives the
// sum of the m that answered, so the noise is Γ(a, b) − Γ′(a, b) with
// a = m/n instead of Laplace(b). eps is the loss the full mechanism has,
// Δ₁/b, and k the number of coordinates Δ may spread over (the latent
// dimension). The result is
//
//	max over j = 1..k of j·L_a(eps/j),  L_a(δ) = sup_z log f_a(z)/f_a(z+δ)
//
// for the density f_a of Γ(a,1) − Γ′(a,1): the worst split of an L1
// change of eps·b over j coordinates with equal parts. For a ≥ 1 the
// noise is Laplace plus independent noise and the result is eps; for
// a ≤ 1/2 the density has a pole at 0 and the loss is +Inf; between, it
// is computed by quadrature (to about 1e-6 relative).
func PartialSharesLoss(a, eps float64, k int) float64 {
	switch {
	case !(eps > 0):
		return 0
	case a >= 1:
		return eps
	case !(a > 0.5):
		return math.Inf(1)
	}
	best := 0.0
	for j := 1; j <= max(1, k); j++ {
		best = math.Max(best, float64(j)*vgLoss(a, eps/float64(j)))
	}
	return best
}

// vgLoss is L_a(δ): f_a is symmetric and decreasing in |z|, so the
// supremum is over z ≥ 0, scanned on a grid fine near 0 where the density
// has its cusp, with the tail limit δ.
func vgLoss(a, d float64) float64 {
	best := d // the tails: log f_a(z) ≈ −z + (a−1)·log z + c
	prev := vgLogDensity(a, 0)
	_ = prev
	for _, z := range vgGrid() {
		best = math.Max(best, vgLogDensity(a, z)-vgLogDensity(a, z+d))
	}
	return best
}

var vgGridCache []float64

// vgGrid is 0, then 400 points spaced geometrically from 1e-6 to 60.
func vgGrid() []float64 {
	if vgGridCache == nil {
		g := []float64{0}
		for k := range 400 {
			g = append(g, 1e-6*math.Pow(6e7, float64(k)/399))
		}
		vgGridCache = g
	}
	return vgGridCache
}

// vgLogDensity returns log f_a(z) up to a constant that does not depend
// on z: f_a(z) = e^{−z}/Γ(a)² · h(z), h(z) = ∫₀^∞ x^{a−1}(x+z)^{a−1}e^{−2x} dx
// for z ≥ 0.
func vgLogDensity(a, z float64) float64 {
	if z == 0 {
		lg, _ := math.Lgamma(2*a - 1)
		return lg - (2*a-1)*math.Ln2
	}
	// [0, z]: with t = x^a the factor x^{a−1} goes; then segments doubling
	// in length up to x = 60, where e^{−2x} is below 1e-52.
	rule := quad.Legendre{}
	h := quad.Fixed(func(t float64) float64 {
		x := math.Pow(t, 1/a)
		return math.Pow(x+z, a-1) * math.Exp(-2*x) / a
	}, 0, math.Pow(z, a), 64, rule, 0)
	for lo := z; lo < 60; lo *= 2 {
		hi := math.Min(2*lo, 60)
		h += quad.Fixed(func(x float64) float64 {
			return math.Pow(x, a-1) * math.Pow(x+z, a-1) * math.Exp(-2*x)
		}, lo, hi, 32, rule, 0)
	}
	return -z + math.Log(h)
}
