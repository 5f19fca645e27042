package dp

import (
	"math/rand/v2"

	"github.com/privrec/privrec/ratings"
)

// DPAverage returns an ε-DP average of xs whose entries lie in [lo, hi]
// (entries outside are clamped), by the multi-vendor thesis's Algorithm 1
// (McSherry's noisy sum over noisy count): half the budget on the centred
// sum (Laplace((hi−lo)/ε)), half on the count (Laplace(2/ε)); when the noisy
// count is at most 1 it returns the midpoint. The result is not clamped.
func DPAverage(r *rand.Rand, xs []float32, lo, hi, eps float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += clampF(float64(x), lo, hi)
	}
	return dpAvg(r, sum, len(xs), lo, hi, eps)
}

func clampF(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

// dpAvgParts returns Algorithm 1's noisy centred sum s and noisy count c.
func dpAvgParts(r *rand.Rand, sum float64, n int, lo, hi, eps float64) (s, c float64) {
	mid := (lo + hi) / 2
	s = sum - float64(n)*mid + SampleLaplace(r, (hi-lo)/eps)
	c = float64(n) + SampleLaplace(r, 2/eps)
	return s, c
}

func dpAvg(r *rand.Rand, sum float64, n int, lo, hi, eps float64) float64 {
	s, c := dpAvgParts(r, sum, n, lo, hi, eps)
	mid := (lo + hi) / 2
	if c <= 1 {
		return mid
	}
	return s/c + mid
}

// DPItemAverages returns ε-DP item averages of d (one per item index) by the
// thesis's Algorithm 2: an average over all ratings with 0.01ε is the
// stand-in rating of items nobody rated; each item's average then uses
// 0.99ε (parallel composition across items, sequential with the global
// one) and is clamped to the rating scale. It writes into dst when dst has
// room for d.NumItems() values. It fails with ErrParam for a bad ε or scale.
func DPItemAverages(r *rand.Rand, d *ratings.Dataset, eps float64, dst []float64) ([]float64, error) {
	if err := positive("epsilon", eps); err != nil {
		return nil, err
	}
	lo, hi := float64(d.Scale.Min), float64(d.Scale.Max)
	if !(hi > lo) {
		return nil, paramErr("rating scale %v has no range", d.Scale)
	}
	m := d.NumItems()
	if cap(dst) < m {
		dst = make([]float64, m)
	}
	dst = dst[:m]
	clear(dst)
	cnt := make([]int, m)
	var total float64
	for k, v := range d.Values {
		x := clampF(float64(v), lo, hi)
		dst[d.Items[k]] += x
		cnt[d.Items[k]]++
		total += x
	}
	g := dpAvg(r, total, d.Len(), lo, hi, 0.01*eps)
	for j := range dst {
		sum, n := dst[j], cnt[j]
		if n == 0 {
			sum, n = clampF(g, lo, hi), 1
		}
		dst[j] = clampF(dpAvg(r, sum, n, lo, hi, 0.99*eps), lo, hi)
	}
	return dst, nil
}
