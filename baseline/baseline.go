// Package baseline holds the simplest honest predictors: the global mean and
// the per-item mean. Every private method must beat them to be worth its
// complexity (the multi-vendor thesis shows published private methods that
// do not). The differentially private versions of these averages are in
// package dp.
package baseline

import "github.com/privrec/privrec/ratings"

// Mean predicts the global mean rating for every pair.
type Mean struct {
	Value float32
}

// FitMean returns the global mean of train.
func FitMean(train *ratings.Dataset) *Mean {
	return &Mean{Value: float32(train.Mean())}
}

// Predict returns the global mean.
func (m *Mean) Predict(u, i int32) float32 { return m.Value }

// ScoreItems gives every item the same score.
func (m *Mean) ScoreItems(u int32, dst []float32) []float32 {
	for k := range dst {
		dst[k] = m.Value
	}
	return dst
}

// ItemMean predicts each item's mean rating, shrunk towards the global mean
// by Shrink pseudo-ratings: (sum + Shrink·mean) / (count + Shrink). Items
// without ratings get the global mean.
type ItemMean struct {
	Means  []float32
	Global float32
	Scale  ratings.Scale
}

// FitItemMean returns the shrunk item means of train. shrink must be ≥ 0.
func FitItemMean(train *ratings.Dataset, shrink float64) *ItemMean {
	mu := train.Mean()
	sum := make([]float64, train.NumItems())
	cnt := make([]float64, train.NumItems())
	for k, i := range train.Items {
		sum[i] += float64(train.Values[k])
		cnt[i]++
	}
	m := &ItemMean{Means: make([]float32, train.NumItems()), Global: float32(mu), Scale: train.Scale}
	for i := range sum {
		m.Means[i] = train.Scale.Clamp(float32((sum[i] + shrink*mu) / (cnt[i] + shrink)))
		if cnt[i]+shrink == 0 {
			m.Means[i] = float32(mu)
		}
	}
	return m
}

// Predict returns the mean of item i, or the global mean for an unknown item.
func (m *ItemMean) Predict(u, i int32) float32 {
	if i < 0 || int(i) >= len(m.Means) {
		return m.Global
	}
	return m.Means[i]
}

// ScoreItems scores every item by its mean: a popularity-like ranking.
func (m *ItemMean) ScoreItems(u int32, dst []float32) []float32 {
	if cap(dst) < len(m.Means) {
		dst = make([]float32, len(m.Means))
	}
	dst = dst[:len(m.Means)]
	copy(dst, m.Means)
	return dst
}
