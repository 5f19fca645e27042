package baseline

import (
	"fmt"
	"math"
)

// MeanConfig configures the global-mean baseline: it has no
// hyperparameters.
type MeanConfig struct{}

// Validate reports nothing: every MeanConfig is valid.
func (MeanConfig) Validate() error { return nil }

// ItemMeanConfig configures FitItemMean.
type ItemMeanConfig struct {
	// Shrink is the number of pseudo-ratings at the global mean added to
	// each item's mean, ≥ 0 (0: the plain item means).
	Shrink float64
}

// Validate reports an invalid field.
func (c ItemMeanConfig) Validate() error {
	if !(c.Shrink >= 0) || math.IsInf(c.Shrink, 1) {
		return fmt.Errorf("baseline: Shrink = %g must be ≥ 0 and finite", c.Shrink)
	}
	return nil
}

// DPConfig configures the ε-DP averages of the multi-vendor thesis (its
// Alg. 1, the global average, and Alg. 2, the item averages): one release
// by a trusted recommender that protects the value of every rating.
type DPConfig struct {
	// Eps is ε of every rating value for the one release, > 0 and finite.
	Eps float64
}

// DefaultDPConfig returns ε = 1.
func DefaultDPConfig() DPConfig { return DPConfig{Eps: 1} }

// Validate reports an invalid field.
func (c DPConfig) Validate() error {
	if !(c.Eps > 0) || math.IsInf(c.Eps, 1) {
		return fmt.Errorf("baseline: Eps = %g must be > 0 and finite", c.Eps)
	}
	return nil
}
