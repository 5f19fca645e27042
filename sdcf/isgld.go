package sdcf

import (
	"fmt"
	"math"
)

// ISGLDConfig configures ISGLD (SDCF §4.1), the input-perturbation
// baseline: every rating value gets Laplace noise on its device once
// (PerturbRatings), then SGLD MF trains on the noisy ratings.
type ISGLDConfig struct {
	Config
	// Eps is ε of every rating value, spent once on the device. Which
	// items a user rated is not protected.
	Eps float64
}

// DefaultISGLDConfig returns the SGLD defaults (non-private) with ε = 4.
func DefaultISGLDConfig() ISGLDConfig {
	return ISGLDConfig{Config: DefaultConfig(Squared, false), Eps: 4}
}

// Validate reports an invalid field.
func (c ISGLDConfig) Validate() error {
	if !(c.Eps > 0) || math.IsInf(c.Eps, 1) {
		return fmt.Errorf("%w: Eps = %g, want a finite number > 0", ErrConfig, c.Eps)
	}
	return c.Config.Validate()
}
