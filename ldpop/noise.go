package ldpop

import (
	"math/rand/v2"

	"github.com/privrec/privrec/dp"
)

// fillShares writes one user's noise shares for len(dst) positions: the
// scheme's shares of Laplace(b) among n users. h, for MixtureShares, holds
// the server's H of each position (C2 lines 2-3: b·sqrt(2H)·C with
// C ~ N(0, 1/n)).
func (sh *shared) fillShares(r *rand.Rand, h []float32, dst []float32) {
	if sh.scheme == dp.MixtureShares {
		dp.FillMixShares(r, sh.b, h, sh.n, dst)
		return
	}
	dp.FillGammaSharesZ32(r, sh.b, sh.n, dst)
}
