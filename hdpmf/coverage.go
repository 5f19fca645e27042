package hdpmf

import (
	"math"

	"github.com/privrec/privrec/dp"
)

// PartialSharesEps implements protocol.PartialShares: on the plain-sum
// path each device adds a 1/n_j share of item j's noise, and a round in
// which only the fraction coverage of the announced shares arrived
// releases with Γ(coverage)-shaped noise. The proven unit is one user's
// rating values, each device's upload clipped to UserClip ratings' worth,
// so the round's ε is UserClip times one rating's loss at that coverage
// (dp.PartialSharesLoss); -1 (no finite bound) without a clip, off a
// secure aggregation, or where the loss is infinite. ok is false for the
// noise-free Plain variant.
func (s *server) PartialSharesEps(coverage float64) (eps float64, ok bool) {
	c := s.shares
	if c == nil {
		return 0, false
	}
	eps = c.clip * dp.PartialSharesLoss(coverage, c.eps, c.dim)
	if math.IsInf(eps, 1) || c.clip == 0 || !c.secure {
		return -1, true
	}
	return eps, true
}

// sharesClaim is the public part of Config that PartialSharesEps reads:
// the clip C, one rating's ε, the latent dimension and whether the
// aggregation is secure.
type sharesClaim struct {
	clip, eps float64
	dim       int
	secure    bool
}
