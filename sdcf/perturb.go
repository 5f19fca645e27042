package sdcf

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/ratings"
)

// PerturbRatings returns a copy of d whose every rating carries Laplace
// noise of scale (Max − Min)/eps and is then clamped to the scale: each
// user's release of each rating value is eps-DP (Berlioz et al. 2015, the
// input perturbation of SDCF's ISGLD baseline), done on the device.
func PerturbRatings(r *rand.Rand, d *ratings.Dataset, eps float64) (*ratings.Dataset, error) {
	if !(eps > 0) || math.IsInf(eps, 0) {
		return nil, fmt.Errorf("%w: eps = %g must be positive and finite", ErrConfig, eps)
	}
	b := float64(d.Scale.Range()) / eps
	out := *d
	out.Values = make([]float32, len(d.Values))
	for k, v := range d.Values {
		out.Values[k] = d.Scale.Clamp(float32(float64(v) + dp.SampleLaplace(r, b))) // no snapping to the step: noisy values keep their resolution
	}
	return &out, nil
}
