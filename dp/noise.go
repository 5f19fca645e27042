package dp

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// ErrParam is wrapped by every error about an invalid mechanism parameter
// (a non-positive scale, an ε that is not finite, a probability outside
// [0, 1], an infeasible randomized-response setting).
var ErrParam = errors.New("dp: invalid mechanism parameter")

func paramErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrParam, fmt.Sprintf(format, a...))
}

func positive(name string, v float64) error {
	if !(v > 0) || math.IsInf(v, 1) {
		return paramErr("%s = %g must be positive and finite", name, v)
	}
	return nil
}

// SampleLaplace returns a draw from the Laplace distribution with mean 0 and
// scale b (density exp(−|x|/b)/(2b)): a random sign times an exponential.
// It is a seeded, floating-point sampler for experiments.
func SampleLaplace(r *rand.Rand, b float64) float64 {
	e := r.ExpFloat64() * b
	if r.Uint64()&1 == 0 {
		return -e
	}
	return e
}

// SampleGamma returns a draw from the gamma distribution with the given
// shape and scale (mean shape·scale), by Marsaglia and Tsang's squeeze
// method; for shape < 1 it draws Gamma(shape+1) and multiplies by U^(1/shape).
// Both shape and scale must be positive; otherwise the result is NaN.
func SampleGamma(r *rand.Rand, shape, scale float64) float64 {
	if !(shape > 0) || !(scale > 0) {
		return math.NaN()
	}
	if shape < 1 {
		// Boost: Gamma(a) = Gamma(a+1)·U^(1/a). Computed in log space so
		// tiny shapes (1/n for large n) do not underflow U^(1/a) to 0 too
		// early.
		g := marsagliaTsang(r, shape+1)
		u := 1 - r.Float64() // (0, 1]
		return scale * math.Exp(math.Log(g)+math.Log(u)/shape)
	}
	return scale * marsagliaTsang(r, shape)
}

func marsagliaTsang(r *rand.Rand, a float64) float64 {
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 {
			return d * v
		}
		if u > 0 && math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// FillSphere writes a direction drawn uniformly from the unit sphere in
// R^len(dst) into dst (a standard normal vector, normalized).
func FillSphere(r *rand.Rand, dst []float64) {
	if len(dst) == 0 {
		return
	}
	for {
		var s float64
		for i := range dst {
			x := r.NormFloat64()
			dst[i] = x
			s += x * x
		}
		if s > 0 {
			inv := 1 / math.Sqrt(s)
			for i := range dst {
				dst[i] *= inv
			}
			return
		}
	}
}

// FillL2Laplace writes into dst a noise vector η in R^K, K = len(dst), with
// density proportional to exp(−‖η‖₂/scale): a Gamma(K, scale) radius times a
// uniform direction. With scale = Δ/ε it makes the release of a vector with
// L2 sensitivity Δ ε-DP (the DP-PMF output perturbation).
func FillL2Laplace(r *rand.Rand, scale float64, dst []float64) {
	if len(dst) == 0 {
		return
	}
	FillSphere(r, dst)
	rad := SampleGamma(r, float64(len(dst)), scale)
	for i := range dst {
		dst[i] *= rad
	}
}
