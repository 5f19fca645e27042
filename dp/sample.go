package dp

import (
	"math"
	"math/rand/v2"
)

// KeepProb is the sample mechanism's keep probability for a rating with
// budget eps under threshold t (Jorgensen et al. 2015; HDPMF eq. 5):
// (e^eps − 1)/(e^t − 1) if eps < t, else 1. Running a t-DP algorithm on the
// kept ratings gives every rating its own eps.
func KeepProb(eps, t float64) float64 {
	if eps >= t {
		return 1
	}
	if eps <= 0 {
		return 0
	}
	// e^(eps−t)·(1 − e^−eps)/(1 − e^−t): the same ratio without e^t,
	// which overflows above t ≈ 709 (Expm1(t) = +Inf made every rating
	// below the threshold a 0 there, where e^(eps−t) may be large).
	return math.Exp(eps-t) * (math.Expm1(-eps) / math.Expm1(-t))
}

// SampleKeep draws the personalized sample: it appends to dst the index k
// of every rating kept with probability KeepProb(eps[k], t) and returns the
// extended slice (pass it to ratings.Dataset.Subset). Choose t with
// Threshold (min, mean, max or a given value).
func SampleKeep(r *rand.Rand, eps []float64, t float64, dst []int) []int {
	for k, e := range eps {
		if e >= t || r.Float64() < KeepProb(e, t) {
			dst = append(dst, k)
		}
	}
	return dst
}
