package method

import (
	"context"
	"math"
	"strconv"

	"github.com/privrec/privrec/bmf"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// BMFParams are the hyperparameters of Bayesian MF by Gibbs sampling, with
// def's values as defaults: the thesis's Table 2 names σ (init), d (dim)
// and T (iters).
func BMFParams(def bmf.Config) []Param {
	return []Param{
		{"dim", strconv.Itoa(def.Dim), "latent dimension d"},
		{"iters", strconv.Itoa(def.Iters), "Gibbs sweeps T"},
		{"init", ftoa(def.InitStdev), "σ, standard deviation of the initial factors"},
		{"burnin", strconv.Itoa(def.Burnin), "first sweeps left out of the prediction average (libFM: 0)"},
		{"keep", strconv.Itoa(def.Keep), "most samples averaged, evenly thinned (0: all after burnin)"},
		{"workers", "0", "parallel workers (0: all cores); results do not depend on it"},
	}
}

func init() {
	register(Spec{
		Name:    "bmf-gibbs",
		Summary: "Bayesian MF by Gibbs sampling, libFM's MCMC (the multi-vendor thesis's model, non-private)",
		Claim:   noPrivacy,
		Params:  BMFParams(bmf.DefaultConfig()),
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			r := p.Reader()
			cfg := bmf.Config{Dim: r.Int("dim"), Iters: r.Int("iters"), InitStdev: r.Float("init"),
				Burnin: r.Int("burnin"), Keep: r.Int("keep"), Workers: r.Int("workers"), Seed: seed}
			if err := r.Err(); err != nil {
				return nil, nil, err
			}
			if err := cfg.Validate(); err != nil {
				return nil, nil, paramErr("%v", err)
			}
			var last bmf.IterStats
			m, err := bmf.Train(ctx, train, cfg, func(s bmf.IterStats) {
				last = s
				if hook != nil {
					hook(Progress{Epoch: s.Iter, Epochs: cfg.Iters, TrainRMSE: s.TrainRMSE})
				}
			})
			if err != nil {
				return nil, nil, err
			}
			return m, &Result{Privacy: noPrivacy, Stats: map[string]float64{
				"train_rmse": last.TrainRMSE, "alpha": last.Alpha, "samples": float64(last.Kept)}}, nil
		},
	})
	dpGlobal := Privacy{Unit: "rating value", Trusted: "the recommender",
		Note: "one release of the mean of all ratings (the vendor is the recommender)"}
	register(Spec{
		Name:    "dp-globalavg",
		Summary: "ε-DP global average rating (the multi-vendor thesis's Alg. 1), clamped to the scale",
		Claim:   dpGlobal,
		Params:  []Param{{"eps", "1", "privacy budget ε of every rating"}},
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			eps, err := p.Float("eps")
			if err != nil {
				return nil, nil, err
			}
			if !(eps > 0) || math.IsInf(eps, 1) {
				return nil, nil, paramErr("eps = %g must be > 0 and finite", eps)
			}
			lo, hi := float64(train.Scale.Min), float64(train.Scale.Max)
			if !(hi > lo) {
				return nil, nil, paramErr("rating scale %v has no range", train.Scale)
			}
			g := dp.DPAverage(rng.New(seed, rngDPGlobalAvg), train.Values, lo, hi, eps)
			priv := dpGlobal
			priv.EpsRound, priv.EpsTotal = eps, eps
			return &constModel{value: train.Scale.Clamp(float32(g)), items: train.NumItems()}, &Result{Privacy: priv}, nil
		},
	})
}

const rngDPGlobalAvg uint64 = 0x6470_6761 // "dpga"

// constModel predicts one value for every pair and scores every item alike.
type constModel struct {
	value float32
	items int
}

func (m *constModel) Predict(u, i int32) float32 { return m.value }

func (m *constModel) ScoreItems(u int32, dst []float32) []float32 {
	if cap(dst) < m.items {
		dst = make([]float32, m.items)
	}
	dst = dst[:m.items]
	for k := range dst {
		dst[k] = m.value
	}
	return dst
}
