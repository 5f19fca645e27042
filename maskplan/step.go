package maskplan

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
)

// G is the number of integer units per unit of a release's normalized
// L2 sensitivity √(2ρ_t).
const G = 1 << 15

// Step is one release's integer-path calibration: public, a function of
// the method's config and the catalog's size alone.
type Step struct {
	D      int       // coordinates (without the arrival word)
	Sigmas []float64 // per-coordinate Gaussian σ, by block
	Deltas []float64 // a user's L2 bound in each block (its release's sensitivity)
	Sizes  []int     // block sizes
	Gamma  float64   // integer units per normalized unit
	L1, L2 float64   // sensitivities in integer units
	Rho    float64   // the release's zCDP share of the plan (0: no release)
	Mu     float64   // Poisson mean of the summed Skellam noise per coordinate (Calibrate)
}

// NewStep returns the step of a release with zCDP share rho > 0 whose
// consecutive blocks have the given sizes, Gaussian σ and L2
// sensitivities (the ledger's, in the upload's float units).
func NewStep(rho float64, sizes []int, sigmas, deltas []float64) Step {
	ms := Step{Sizes: sizes, Sigmas: sigmas, Deltas: deltas, Rho: rho}
	for _, n := range sizes {
		ms.D += n
	}
	ms.Gamma = G / math.Sqrt(2*rho)
	ms.L2 = G + math.Sqrt(float64(ms.D))
	ms.L1 = math.Min(math.Sqrt(float64(ms.D))*ms.L2, ms.L2*ms.L2)
	return ms
}

// ErrUnreachable is wrapped by Calibrate's error when no noise reaches the
// target ε.
var ErrUnreachable = errors.New("the integer path cannot reach the target ε")

// Calibrate sets Mu of every step with Rho > 0 to the least Skellam noise
// (the least η) whose Rényi curves, composed, reach ε ≤ eps at delta. It
// returns η and the ε at delta of the calibrated plan for add/remove-one
// neighbours (every share arriving) and for replace-one neighbours (every
// sensitivity doubled).
func Calibrate(steps []Step, eps, delta float64) (eta, epsAdd, epsReplace float64, err error) {
	return CalibrateBy(steps, eps, delta, ComposeAll)
}

// ComposeAll composes the curves of every step that releases something
// (nil: a step that releases nothing): one user answers every step.
func ComposeAll(cs []rdp.Curve) rdp.Curve {
	var some []rdp.Curve
	for _, c := range cs {
		if c != nil {
			some = append(some, c)
		}
	}
	return rdp.Compose(some...)
}

// CalibrateBy is Calibrate with the curve one user is charged made by
// compose from the steps' curves, one per step (nil for a step that
// releases nothing): ComposeAll when a user answers every step, the
// envelope of the sets of steps a user may answer under participation
// limits.
func CalibrateBy(steps []Step, eps, delta float64, compose func([]rdp.Curve) rdp.Curve) (eta, epsAdd, epsReplace float64, err error) {
	curve := func(eta float64, scale float64) rdp.Curve {
		cs := make([]rdp.Curve, len(steps))
		for i, ms := range steps {
			if ms.Rho > 0 {
				mu := (1 + eta) * ms.L2 * ms.L2 / (4 * ms.Rho)
				cs[i] = rdp.SkellamCurve(mu, scale*ms.L1, scale*ms.L2)
			}
		}
		return compose(cs)
	}
	ok := func(eta float64) bool {
		e, _ := rdp.ToDP(curve(eta, 1), delta)
		return e <= eps
	}
	lo, hi := -0.5, 1.0
	for !ok(hi) {
		lo, hi = hi, 2*hi+1
		if hi > 1e6 {
			return 0, 0, 0, fmt.Errorf("%w: ε = %g", ErrUnreachable, eps)
		}
	}
	if ok(lo) {
		hi = lo
	}
	for hi-lo > 1e-9 {
		m := (lo + hi) / 2
		if ok(m) {
			hi = m
		} else {
			lo = m
		}
	}
	for i := range steps {
		if ms := &steps[i]; ms.Rho > 0 {
			ms.Mu = (1 + hi) * ms.L2 * ms.L2 / (4 * ms.Rho)
		}
	}
	epsAdd, _ = rdp.ToDP(curve(hi, 1), delta)
	epsReplace, _ = rdp.ToDP(curve(hi, 2), delta)
	return hi, epsAdd, epsReplace, nil
}

// Encode returns a client's integer upload of the step from its float
// statistics x (D values): each normalized by its block's σ, scaled by
// Gamma, rounded stochastically from r, plus the client's Skellam share
// drawn from r for shares clients, mod 2^32, then the arrival word 1.
// noise is scratch of at least D values; noiseless leaves the share out
// (tests and the sensitivity canary only: the upload then protects
// nothing). r draws the share first, then one uniform per coordinate.
func (ms *Step) Encode(x []float64, r *rand.Rand, shares int, noise []int64, noiseless bool) []uint32 {
	w := make([]uint32, ms.D+1)
	noise = noise[:ms.D]
	if noiseless {
		clear(noise)
	} else {
		dp.FillSkellamShare(r, ms.Mu, shares, noise)
	}
	e := 0
	for bl, n := range ms.Sizes {
		f := ms.Gamma / ms.Sigmas[bl]
		for range n {
			v := x[e] * f
			q := math.Floor(v)
			if r.Float64() < v-q {
				q++
			}
			w[e] = uint32(int64(q) + noise[e])
			e++
		}
	}
	w[ms.D] = 1
	return w
}

// Decode turns the summed words of the step into float sums in the
// statistics' units (the noise included) in out (D values) and returns
// the arrivals (the summed arrival word).
func (ms *Step) Decode(words []uint32, out []float64) int {
	e := 0
	for bl, n := range ms.Sizes {
		f := ms.Sigmas[bl] / ms.Gamma
		for range n {
			out[e] = float64(int32(words[e])) * f
			e++
		}
	}
	return int(words[ms.D])
}

// Curve returns the Rényi curve of the step's release with the noise that
// arrived: arrived shares of Skellam(Mu/shares) each.
func (ms *Step) Curve(arrived, shares int) rdp.Curve {
	return rdp.SkellamCurve(ms.Mu*float64(arrived)/float64(max(shares, 1)), ms.L1, ms.L2)
}

// NoiseSigma returns the standard deviation, in the statistics' float
// units, of the decoded noise of block bl when the calibrated noise
// arrives in full: √(2μ)·σ_bl/γ (a Skellam(μ) variable has variance 2μ),
// which is σ_bl·√(1+η)·Δ2/G, a little above the Gaussian plan's σ_bl.
func (ms *Step) NoiseSigma(bl int) float64 {
	return math.Sqrt(2*ms.Mu) * ms.Sigmas[bl] / ms.Gamma
}

// Check checks the unmasked sum w (D+1 words, the arrival word last) of
// the step in round, of inputs clients' masked vectors each drawing its
// share for shares clients, against what honest clients can produce, and
// returns an error wrapping protocol.ErrOutOfBounds at the first word out
// of bounds (naming the round, word, block and bound).
//
// The arrival word a (each honest upload adds 1) must be at most inputs.
// In block b, a user's statistics have L2 norm at most Δ_b (the
// sensitivity the ledger charges), so after the scaling by f_b = γ/σ_b
// each coordinate is within ±⌈Δ_b·f_b⌉ (stochastic rounding goes to a
// neighbouring integer) and the block within Δ_b·f_b + √n_b in L2 (n_b
// coordinates; rounding moves each by less than 1). The a Skellam shares,
// each Skellam(μ/s), sum to S ~ Skellam(a·μ/s), so every honest
// coordinate has
//
//	|x_e| ≤ a·⌈Δ_b·f_b⌉ + t − 1,
//
// t the least integer with P(|S| ≥ t) ≤ protocol.SumTail/d
// (dp.SkellamTailBound; a union bound over the d coordinates), and, on
// the same event, the block's L2 norm is at most a·(Δ_b·f_b + √n_b) +
// √n_b·(t − 1).
func (ms *Step) Check(round int, w []uint32, inputs, shares int) error {
	if len(w) != ms.D+1 {
		return fmt.Errorf("%w: masked sum of round %d has %d words, want %d", protocol.ErrMessage, round, len(w), ms.D+1)
	}
	a := int64(w[ms.D])
	if a > int64(inputs) {
		return fmt.Errorf("%w: round %d word %d: arrivals %d above the %d inputs", protocol.ErrOutOfBounds, round, ms.D, a, inputs)
	}
	t := dp.SkellamTailBound(float64(a)*ms.Mu/float64(shares), protocol.SumTail/float64(ms.D))
	e := 0
	for bl, n := range ms.Sizes {
		f := ms.Gamma / ms.Sigmas[bl]
		per := int64(math.Ceil(ms.Deltas[bl] * f))
		bound := a*per + t - 1
		var sq float64
		for range n {
			x := int64(int32(w[e]))
			if x > bound || x < -bound {
				return fmt.Errorf("%w: round %d word %d (block %d): value %d beyond ±%d (%d arrivals × %d + noise tail %d)",
					protocol.ErrOutOfBounds, round, e, bl, x, bound, a, per, t-1)
			}
			sq += float64(x) * float64(x)
			e++
		}
		rn := math.Sqrt(float64(n))
		if l2, b2 := math.Sqrt(sq), float64(a)*(ms.Deltas[bl]*f*(1+1e-9)+rn)+rn*float64(t-1); l2 > b2 {
			return fmt.Errorf("%w: round %d words %d-%d (block %d): L2 norm %.0f beyond %.0f (%d arrivals × %.0f + √%d × noise tail %d)",
				protocol.ErrOutOfBounds, round, e-n, e-1, bl, l2, b2, a, ms.Deltas[bl]*f+rn, n, t-1)
		}
	}
	return nil
}
