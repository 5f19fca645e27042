package dp

import "math"

// Stretch writes HDPMF's stretched ratings W_ij·R_ij into dst (Hu and Fang,
// §4: the shrinkage matrix T(v) = diag(W) with W = βᵀγ, so user i's rating of
// item j enters the gradient as W_ij·R_ij). w is parallel to values, one
// weight in (0, 1] per rating (see HDPWeights.RatingWeights). dst may alias
// nothing else; it must be at least len(values) long.
func Stretch(values []float32, w []float64, dst []float32) {
	w = w[:len(values)]
	dst = dst[:len(values)]
	for k, v := range values {
		dst[k] = float32(w[k] * float64(v))
	}
}

// HDPMFNoiseScale returns the Laplace scale 2·sqrt(K)·Δ/ε of each
// coordinate of HDPMF's gradient noise x_j (Thm 2), for latent dimension K,
// rating range Δ and the maximum budget ε.
func HDPMFNoiseScale(k int, sens, eps float64) float64 {
	return 2 * math.Sqrt(float64(k)) * sens / eps
}
