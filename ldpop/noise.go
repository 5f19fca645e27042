package ldpop

import (
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/dp"
)

// gammaCut is the cut below which a share is set to zero: a mixing draw
// G = Gamma(1+a)·U^n (Gamma(a), a = 1/n, in its boost form) with
// U^n < e^−gammaCut is below 4·10^−18·Gamma(1+a), so the share
// b·sqrt(2G)·Z is of the order of 10^−8·b, under the float32 resolution of
// the gradient it is added to.
const gammaCut = 40

// fillGammaShares writes into dst one user's GammaShares shares of
// Laplace(b) noise among n users, one per position: b·sqrt(2G)·Z with
// G ~ Gamma(1/n, 1) and Z ~ N(0, 1), the law of dp.SampleGammaShare (n
// such shares sum to exactly Laplace(b)). For n in the hundreds U^n is
// negligible for most U, so the uniforms are not drawn one by one: the
// positions whose U^n reaches e^−gammaCut are found by geometric skips,
// and only there are U (conditioned on the event), Gamma(1+a) and Z drawn.
// Up to the cut the law is exactly that of the direct method, at a few
// percent of its cost.
func fillGammaShares(r *rand.Rand, b float64, n int, dst []float32) {
	clear(dst)
	if n <= 1 {
		for p := range dst {
			dst[p] = float32(dp.SampleLaplace(r, b))
		}
		return
	}
	fn := float64(n)
	a := 1 / fn
	lthr := -gammaCut / fn // log of the threshold on U
	q := -math.Expm1(lthr) // P(U ≥ threshold)
	for p := geomSkip(r, lthr); p < len(dst); p += 1 + geomSkip(r, lthr) {
		lu := math.Log1p(-q * r.Float64()) // log U, U uniform on [threshold, 1)
		g := dp.SampleGamma(r, 1+a, 1) * math.Exp(fn*lu)
		dst[p] = float32(b * math.Sqrt(2*g) * r.NormFloat64())
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

// fillShares writes one user's noise shares for len(dst) positions: the
// scheme's shares of Laplace(b) among n users. h, for MixtureShares, holds
// the server's H of each position (C2 lines 2-3: b·sqrt(2H)·C with
// C ~ N(0, 1/n)).
func (sh *shared) fillShares(r *rand.Rand, h []float32, dst []float32) {
	if sh.scheme == dp.MixtureShares {
		dp.FillMixShares(r, sh.b, h, sh.n, dst)
		return
	}
	fillGammaShares(r, sh.b, sh.n, dst)
}
