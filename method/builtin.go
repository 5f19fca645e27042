package method

import (
	"context"
	"math"
	"strconv"

	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// noPrivacy is the claim of the non-private methods.
var noPrivacy = Privacy{Unit: "none", Trusted: "everyone"}

// MFParams are the hyperparameters of plain SGD matrix factorization, with
// mf.DefaultConfig's values as defaults. Other factor methods reuse them.
func MFParams(def mf.Config) []Param {
	return []Param{
		{"dim", strconv.Itoa(def.Dim), "latent dimension K"},
		{"epochs", strconv.Itoa(def.Epochs), "training epochs"},
		{"lr", ftoa(def.LearnRate), "initial learning rate"},
		{"schedule", string(def.Schedule), "learning-rate schedule: constant, step (÷5 at 25% and 75% of the epochs), exp"},
		{"decay", ftoa(def.Decay), "learning-rate decay per epoch for schedule exp"},
		{"reg", ftoa(def.Reg), "L2 regularization of the factors"},
		{"reg-bias", ftoa(def.RegBias), "L2 regularization of the biases"},
		{"init", ftoa(def.InitScale), "standard deviation of the initial factors"},
		{"biased", strconv.FormatBool(def.Biased), "learn a global mean and user and item biases"},
		{"workers", "0", "parallel workers (0: all cores); results do not depend on it"},
	}
}

// MFConfig reads the MFParams of p into an mf.Config with the given seed
// and validates it.
func MFConfig(p Params, seed uint64) (mf.Config, error) {
	r := p.Reader()
	cfg := mf.Config{
		Dim: r.Int("dim"), Epochs: r.Int("epochs"), LearnRate: r.Float("lr"),
		Schedule: mf.Schedule(r.String("schedule")), Decay: r.Float("decay"),
		Reg: r.Float("reg"), RegBias: r.Float("reg-bias"), InitScale: r.Float("init"),
		Biased: r.Bool("biased"), Workers: r.Int("workers"), Seed: seed,
	}
	if err := r.Err(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func init() {
	register(Spec{
		Name:    "mf",
		Summary: "matrix factorization by parallel SGD (non-private reference)",
		Claim:   noPrivacy,
		Params:  MFParams(mf.DefaultConfig()),
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			cfg, err := MFConfig(p, seed)
			if err != nil {
				return nil, nil, err
			}
			var last float64
			m, err := mf.Train(ctx, train, cfg, func(s mf.EpochStats) {
				last = s.TrainRMSE
				if hook != nil {
					hook(Progress{Epoch: s.Epoch + 1, Epochs: cfg.Epochs, TrainRMSE: s.TrainRMSE})
				}
			})
			if err != nil {
				return nil, nil, err
			}
			return m, &Result{Privacy: noPrivacy, Stats: map[string]float64{"train_rmse": last}}, nil
		},
	})
	register(Spec{
		Name:    "mean",
		Summary: "global mean rating (non-private baseline)",
		Claim:   noPrivacy,
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			return baseline.FitMean(train), &Result{Privacy: noPrivacy}, nil
		},
	})
	register(Spec{
		Name:    "itemavg",
		Summary: "item mean rating (non-private baseline)",
		Claim:   noPrivacy,
		Params:  []Param{{"shrink", "0", "pseudo-ratings at the global mean added to each item"}},
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			shrink, err := p.Float("shrink")
			if err != nil {
				return nil, nil, err
			}
			if !(shrink >= 0) || math.IsInf(shrink, 1) {
				return nil, nil, paramErr("shrink = %g must be ≥ 0 and finite", shrink)
			}
			return baseline.FitItemMean(train, shrink), &Result{Privacy: noPrivacy}, nil
		},
	})
	dpItemAvg := Privacy{Unit: "rating value", Trusted: "the recommender",
		Note: "one release: 0.01ε on the global mean, 0.99ε on each item mean (parallel over items)"}
	register(Spec{
		Name:    "dp-itemavg",
		Summary: "ε-DP item averages (the multi-vendor thesis's Alg. 2): the baseline every private method must beat",
		Claim:   dpItemAvg,
		Params:  []Param{{"eps", "1", "privacy budget ε of every rating"}},
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			eps, err := p.Float("eps")
			if err != nil {
				return nil, nil, err
			}
			means, err := dp.DPItemAverages(rng.New(seed, rngDPItemAvg), train, eps, nil)
			if err != nil {
				return nil, nil, err
			}
			m := &baseline.ItemMean{Means: make([]float32, len(means)), Scale: train.Scale,
				Global: float32((train.Scale.Min + train.Scale.Max) / 2)}
			for j, v := range means {
				m.Means[j] = float32(v)
			}
			priv := dpItemAvg
			priv.EpsRound, priv.EpsTotal = eps, eps
			return m, &Result{Privacy: priv}, nil
		},
	})
}

// Stream labels for rng.New, one per method, so that methods never share a
// random stream for a seed.
const (
	rngDPItemAvg uint64 = 0x6470_6961 // "dpia"
)

func paramErr(format string, a ...any) error {
	return fmtErr(ErrParam, format, a...)
}
