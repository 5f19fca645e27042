package pmf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// ErrConfig is wrapped by every error about a bad configuration.
var ErrConfig = errors.New("pmf: bad configuration")

// ErrDiverged reports factors that became NaN or infinite in training.
var ErrDiverged = errors.New("pmf: training diverged")

// Stream labels for rng.New.
const (
	rngInit  uint64 = 0x706d_6669 // "pmfi": initial factors
	rngOrder uint64 = 0x706d_666f // "pmfo": batch order
	rngNoise uint64 = 0x706d_666e // "pmfn": objective-perturbation noise
	rngRSM   uint64 = 0x706d_6673 // "pmfs": RSM sample
)

// Config configures non-private PMF training, the first stage of DP-PMF and
// PDP-PMF. The defaults are the paper's (§6.1: d = 20, λ = 0.01, k1 = 50,
// γ = 50) read with the loss scaling of Salakhutdinov and Mnih's pmf.m, where
// those values come from:
//
//   - ratings are centered (Center; the training mean for plain PMF);
//   - the loss of a mini-batch of n ratings is
//     Σ (u_iᵀv_j − r_ij)² + (λ/2)(‖u_i‖² + ‖v_j‖²), summed per rating;
//   - its gradient is divided by n, so γ = 50 is a step on the average
//     per-rating loss (an SGD step of 2γ/n ≈ 0.001 per rating for n = 10⁵);
//   - updates use momentum 0.8 and mini-batches of 100,000 ratings.
//
// With per-rating (unaveraged) gradients, as eqs. (2)-(5) read literally,
// γ = 50 diverges at once; with one full-batch step per epoch (the
// average over all ratings) it is stable but needs far more than 50 epochs
// on ML-1M. Mini-batches of 10⁵ give ML-1M nine steps per epoch and
// ML-100K one, so 50 epochs are short on ML-100K (see the report).
type Config struct {
	Dim       int     // latent dimension d
	Epochs    int     // k1, passes over the ratings
	LearnRate float64 // γ, step on the batch-averaged gradient
	Momentum  float64 // in [0, 1)
	Reg       float64 // λ = λ_u = λ_v, per rating occurrence as in pmf.m
	BatchSize int     // ratings per gradient step; ≤ 0 means all
	InitScale float64 // standard deviation of the initial factor entries
	// Center is subtracted from every rating; predictions add it back. NaN
	// means the training mean.
	Center float64
	Seed   uint64
}

// DefaultConfig returns the paper's settings in pmf.m's scaling: d = 20,
// 50 epochs, γ = 50, momentum 0.8, λ = 0.01, batches of 100,000, initial
// entries N(0, 0.1²), centered at the training mean.
func DefaultConfig() Config {
	return Config{Dim: 20, Epochs: 50, LearnRate: 50, Momentum: 0.8, Reg: 0.01,
		BatchSize: 100_000, InitScale: 0.1, Center: math.NaN()}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Dim < 1 || c.Dim > 1024:
		return fmt.Errorf("%w: Dim = %d outside [1, 1024]", ErrConfig, c.Dim)
	case c.Epochs < 0:
		return fmt.Errorf("%w: Epochs = %d is negative", ErrConfig, c.Epochs)
	case !(c.LearnRate > 0) || math.IsInf(c.LearnRate, 0):
		return fmt.Errorf("%w: LearnRate = %g must be positive and finite", ErrConfig, c.LearnRate)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return fmt.Errorf("%w: Momentum = %g outside [0, 1)", ErrConfig, c.Momentum)
	case !(c.Reg >= 0) || math.IsInf(c.Reg, 0):
		return fmt.Errorf("%w: Reg = %g must be ≥ 0 and finite", ErrConfig, c.Reg)
	case !(c.InitScale >= 0) || math.IsInf(c.InitScale, 0):
		return fmt.Errorf("%w: InitScale = %g must be ≥ 0 and finite", ErrConfig, c.InitScale)
	case math.IsInf(c.Center, 0):
		return fmt.Errorf("%w: Center = %g is infinite", ErrConfig, c.Center)
	}
	return nil
}

// factors is the training state: float64 row-major factors.
type factors struct {
	dim      int
	u, v     []float64
	center   float64
	nu, ni   int
	scale    ratings.Scale
	data     *ratings.Dataset
	userIDs  []string
	itemIDs  []string
	itemTits []string
}

func newFactors(d *ratings.Dataset, cfg Config) *factors {
	center := cfg.Center
	if math.IsNaN(center) {
		center = d.Mean()
	}
	f := &factors{dim: cfg.Dim, nu: d.NumUsers(), ni: d.NumItems(), center: center, scale: d.Scale, data: d}
	f.u = make([]float64, f.nu*f.dim)
	f.v = make([]float64, f.ni*f.dim)
	r := rng.New(cfg.Seed, rngInit)
	for k := range f.u {
		f.u[k] = r.NormFloat64() * cfg.InitScale
	}
	for k := range f.v {
		f.v[k] = r.NormFloat64() * cfg.InitScale
	}
	return f
}

// model converts the factors to a model with Mean = Default = center and
// no biases, so that a prediction is center + u_iᵀv_j, and center for an
// unknown user or item.
func (f *factors) model() *model.Model {
	m := &model.Model{Dim: f.dim, NumUsers: f.nu, NumItems: f.ni,
		U: make([]float32, len(f.u)), V: make([]float32, len(f.v)),
		Mean: float32(f.center), Default: float32(f.center), Scale: f.scale,
		UserIDs: slices.Clone(f.data.UserIDs), ItemIDs: slices.Clone(f.data.ItemIDs), ItemTitles: slices.Clone(f.data.ItemTitles)}
	for k, x := range f.u {
		m.U[k] = float32(x)
	}
	for k, x := range f.v {
		m.V[k] = float32(x)
	}
	return m
}

// rmse is the training RMSE of center + uᵀv, clamped to the scale.
func (f *factors) rmse(d *ratings.Dataset) float64 {
	if d.Len() == 0 {
		return math.NaN()
	}
	var s float64
	dim := f.dim
	for k, r := range d.Values {
		u := f.u[int(d.Users[k])*dim : int(d.Users[k])*dim+dim]
		v := f.v[int(d.Items[k])*dim : int(d.Items[k])*dim+dim]
		p := f.center + dot(u, v)
		p = math.Max(float64(d.Scale.Min), math.Min(float64(d.Scale.Max), p))
		e := p - float64(r)
		s += e * e
	}
	return math.Sqrt(s / float64(d.Len()))
}

func dot(a, b []float64) float64 {
	var s float64
	for k := range a {
		s += a[k] * b[k]
	}
	return s
}

// EpochStats is reported after every epoch.
type EpochStats struct {
	Stage     int     // 1: PMF (U and V); 2: the perturbed V stage of Alg. 2
	Epoch     int     // finished epochs of the stage, from 1
	Epochs    int     // the stage's total
	TrainRMSE float64 // on the ratings trained on, clamped predictions
}

// Train fits non-private PMF to d (mini-batch gradient descent with
// momentum, as in pmf.m; see Config) and returns it as a model whose
// predictions are the center plus u_iᵀv_j. It makes no privacy claim.
// hook, when not nil, is called after every epoch.
func Train(ctx context.Context, d *ratings.Dataset, cfg Config, hook func(EpochStats)) (*model.Model, error) {
	f, err := trainFactors(ctx, d, cfg, hook)
	if err != nil {
		return nil, err
	}
	return f.model(), nil
}

func trainFactors(ctx context.Context, d *ratings.Dataset, cfg Config, hook func(EpochStats)) (*factors, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Len() == 0 {
		return nil, fmt.Errorf("%w: no training ratings", ErrConfig)
	}
	f := newFactors(d, cfg)
	dim := f.dim
	gu, gv := make([]float64, len(f.u)), make([]float64, len(f.v))
	iu, iv := make([]float64, len(f.u)), make([]float64, len(f.v))
	order := make([]int, d.Len())
	for k := range order {
		order[k] = k
	}
	bs := cfg.BatchSize
	if bs <= 0 || bs > len(order) {
		bs = len(order)
	}
	shuf := rng.New(cfg.Seed, rngOrder)
	lam := cfg.Reg
	for ep := range cfg.Epochs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		shuf.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for lo := 0; lo < len(order); lo += bs {
			batch := order[lo:min(lo+bs, len(order))]
			clear(gu)
			clear(gv)
			for _, k := range batch {
				ou, ov := int(d.Users[k])*dim, int(d.Items[k])*dim
				u, v := f.u[ou:ou+dim], f.v[ov:ov+dim]
				g, h := gu[ou:ou+dim], gv[ov:ov+dim]
				e := 2 * (dot(u, v) - (float64(d.Values[k]) - f.center))
				for c := range u {
					g[c] += e*v[c] + lam*u[c]
					h[c] += e*u[c] + lam*v[c]
				}
			}
			// The step is per nominal batch: a short last batch (the
			// remainder of the epoch) takes a proportionally short step.
			// Dividing by its own length instead gave its few ratings the
			// weight of a full batch and diverged on ML-1M (900,188
			// ratings: a last batch of 188 at γ = 50).
			step := cfg.LearnRate / float64(bs)
			momentumStep(f.u, iu, gu, cfg.Momentum, step)
			momentumStep(f.v, iv, gv, cfg.Momentum, step)
		}
		if hook != nil {
			hook(EpochStats{Stage: 1, Epoch: ep + 1, Epochs: cfg.Epochs, TrainRMSE: f.rmse(d)})
		}
	}
	for _, x := range f.u {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w (learning rate %g too large?)", ErrDiverged, cfg.LearnRate)
		}
	}
	return f, nil
}

// momentumStep does inc = mom·inc + step·g; w −= inc.
func momentumStep(w, inc, g []float64, mom, step float64) {
	for k := range w {
		inc[k] = mom*inc[k] + step*g[k]
		w[k] -= inc[k]
	}
}
