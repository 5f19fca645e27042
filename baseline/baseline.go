// Package baseline holds the simplest honest predictors: the global mean and
// the per-item mean. Every private method must beat them to be worth its
// complexity (the multi-vendor thesis shows published private methods that
// do not). The differentially private versions of these averages are in
// package dp.
//
// Both are factor models without factors (model.Model with Dim 0 and no
// user side): the global mean is Mean, the item means are BI.
package baseline

import (
	"slices"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// FitMean returns the model that predicts the global mean of train for
// every pair (known or not) and scores every item alike.
func FitMean(train *ratings.Dataset) *model.Model {
	return Constant(train, float32(train.Mean()))
}

// Constant returns the model that predicts v for every pair of train's
// index space (known or not) and scores every item alike: the global mean,
// or a DP release of it.
func Constant(train *ratings.Dataset, v float32) *model.Model {
	return &model.Model{
		NumItems: train.NumItems(), Mean: v, Default: v, Scale: train.Scale,
		ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}
}

// ItemMeans returns the model that predicts means[i] for item i of train's
// index space, whatever the user, and def for an unknown item: exact item
// means, or DP releases of them.
func ItemMeans(train *ratings.Dataset, means []float32, def float32) *model.Model {
	return &model.Model{
		NumItems: len(means), BI: means, Default: def, Scale: train.Scale,
		ItemIDs: slices.Clone(train.ItemIDs), ItemTitles: slices.Clone(train.ItemTitles),
	}
}

// FitItemMean returns the model that predicts each item's mean rating,
// shrunk towards the global mean by shrink pseudo-ratings:
// (sum + shrink·mean) / (count + shrink), clamped to the scale. Items
// without ratings and unknown items get the global mean. It scores items
// by their means: a popularity-like ranking. shrink must be ≥ 0.
func FitItemMean(train *ratings.Dataset, shrink float64) *model.Model {
	mu := train.Mean()
	sum := make([]float64, train.NumItems())
	cnt := make([]float64, train.NumItems())
	for k, i := range train.Items {
		sum[i] += float64(train.Values[k])
		cnt[i]++
	}
	means := make([]float32, train.NumItems())
	for i := range sum {
		means[i] = train.Scale.Clamp(float32((sum[i] + shrink*mu) / (cnt[i] + shrink)))
		if cnt[i]+shrink == 0 {
			means[i] = float32(mu)
		}
	}
	return ItemMeans(train, means, float32(mu))
}
