package federated

import (
	"math"
	"math/rand/v2"
)

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
