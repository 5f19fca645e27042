package federated

import (
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/dp"
)

// gammaCut is the cut below which a Gamma share is set to zero: a draw
// G(1+a)·U^n (the boost form of Gamma(a), a = 1/n) with U^n < e^−gammaCut
// is below 4·10^−18 of the scale, far under float32 resolution of the
// gradient it is added to.
const gammaCut = 40

// gammaShares writes one client's GammaShares share of Laplace(b) noise,
// provisioned for n clients, into every coordinate of dst: G1 − G2 with
// G1, G2 ~ Gamma(1/n, b), so that n shares sum to Laplace(b) (as
// dp.FillGammaShares, in float32).
//
// Gamma(a) is drawn as Gamma(1+a)·U^(1/a). For a share of a popular item
// (large n) U^n is negligible for most U, so the 2·len(dst) uniforms are
// not drawn one by one: the positions whose U^n reaches e^−gammaCut are
// found by geometric skips, and only there are U (conditioned on the event)
// and Gamma(1+a) drawn. Up to the cut, the distribution is exactly that of
// the direct method.
func gammaShares(r *rand.Rand, b float64, n int, dst []float32) {
	clear(dst)
	if n <= 1 {
		for d := range dst {
			dst[d] = float32(dp.SampleLaplace(r, b))
		}
		return
	}
	fn := float64(n)
	a := 1 / fn
	lthr := -gammaCut / fn // ln of the threshold on U
	p := -math.Expm1(lthr) // P(U ≥ threshold)
	total := 2 * len(dst)
	pos := geomSkip(r, lthr)
	for pos < total {
		// U uniform on [thr, 1): 1 − p·W, W uniform in [0, 1).
		lu := math.Log1p(-p * r.Float64())
		g := b * dp.SampleGamma(r, 1+a, 1) * math.Exp(fn*lu)
		if pos&1 == 0 {
			dst[pos>>1] += float32(g)
		} else {
			dst[pos>>1] -= float32(g)
		}
		pos += 1 + geomSkip(r, lthr)
	}
}

// geomSkip returns the number of failures before the first success of
// Bernoulli trials that fail with probability e^lq (lq < 0).
func geomSkip(r *rand.Rand, lq float64) int {
	v := 1 - r.Float64() // (0, 1]
	s := math.Log(v) / lq
	if s > 1<<30 {
		return 1 << 30
	}
	return int(s)
}

// mixShares writes one client's MixtureShares share (the paper's Thm 3
// construction) for n clients given the server's h per coordinate:
// b·sqrt(2h/n)·c, c ~ N(0, 1).
func mixShares(r *rand.Rand, b float64, h []float32, n int, dst []float32) {
	h = h[:len(dst)]
	c := b * math.Sqrt(2/float64(max(n, 1)))
	for d := range dst {
		dst[d] = float32(c * math.Sqrt(float64(h[d])) * r.NormFloat64())
	}
}
