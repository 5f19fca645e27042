package method

import (
	"context"

	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// noPrivacy is the claim of the non-private methods.
var noPrivacy = model.Privacy{Unit: "none", Trusted: "everyone"}

// mfFields names the fields of an mf.Config.
func mfFields(c *mf.Config) []Field {
	return []Field{
		intF("dim", &c.Dim, "latent dimension K"),
		intF("epochs", &c.Epochs, "passes of SGD over the training ratings"),
		floatF("lr", &c.LearnRate, "initial learning rate η"),
		textF("schedule", &c.Schedule, "learning-rate schedule: constant, step (÷5 at 25% and 75% of the epochs), exp",
			string(mf.Constant), string(mf.Step), string(mf.Exp)),
		floatF("decay", &c.Decay, "learning-rate decay per epoch for schedule exp"),
		floatF("reg", &c.Reg, "L2 regularization λ of the factors"),
		floatF("reg-bias", &c.RegBias, "L2 regularization of the biases"),
		floatF("init", &c.InitScale, "standard deviation of the initial factors"),
		boolF("biased", &c.Biased, "learn a global mean and user and item biases"),
		intF("workers", &c.Workers, "parallel workers (0: all cores); results do not depend on it"),
	}
}

func init() {
	define(Spec{
		Name:    "mf",
		Summary: "matrix factorization by parallel SGD (non-private reference)",
		Claim:   noPrivacy,
	}, mf.DefaultConfig, mfFields, func(ctx context.Context, train *ratings.Dataset, cfg *mf.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c := *cfg
		c.Seed = seed
		if err := c.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		var last float64
		m, err := mf.Train(ctx, train, c, func(s mf.EpochStats) {
			last = s.TrainRMSE
			if hook != nil {
				hook(Progress{Epoch: s.Epoch + 1, Epochs: c.Epochs, TrainRMSE: s.TrainRMSE})
			}
		})
		if err != nil {
			return nil, nil, err
		}
		return m, &Result{Privacy: noPrivacy, Stats: map[string]float64{"train_rmse": last}}, nil
	})
	define(Spec{
		Name:    "mean",
		Summary: "global mean rating (non-private baseline)",
		Claim:   noPrivacy,
	}, func() baseline.MeanConfig { return baseline.MeanConfig{} }, func(*baseline.MeanConfig) []Field { return nil },
		func(ctx context.Context, train *ratings.Dataset, cfg *baseline.MeanConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
			return baseline.FitMean(train), &Result{Privacy: noPrivacy}, nil
		})
	define(Spec{
		Name:    "itemavg",
		Summary: "item mean rating (non-private baseline)",
		Claim:   noPrivacy,
	}, func() baseline.ItemMeanConfig { return baseline.ItemMeanConfig{} },
		func(c *baseline.ItemMeanConfig) []Field {
			return []Field{floatF("shrink", &c.Shrink, "pseudo-ratings at the global mean added to each item")}
		},
		func(ctx context.Context, train *ratings.Dataset, cfg *baseline.ItemMeanConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
			if err := cfg.Validate(); err != nil {
				return nil, nil, invalid(err)
			}
			return baseline.FitItemMean(train, cfg.Shrink), &Result{Privacy: noPrivacy}, nil
		})
	dpItemAvg := model.Privacy{Unit: "rating value", Trusted: "the recommender",
		Note: "one release: 0.01ε on the global mean, 0.99ε on each item mean (parallel over items)", Neighbouring: NeighboursRatingValue}
	define(Spec{
		Name:    "dp-itemavg",
		Summary: "ε-DP item averages (the multi-vendor thesis's Alg. 2): the baseline every private method must beat",
		Claim:   dpItemAvg,
	}, baseline.DefaultDPConfig, dpAvgFields, func(ctx context.Context, train *ratings.Dataset, cfg *baseline.DPConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		if err := cfg.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		means, err := dp.DPItemAverages(rng.New(seed, rngDPItemAvg), train, cfg.Eps, nil)
		if err != nil {
			return nil, nil, invalid(err)
		}
		bi := make([]float32, len(means))
		for j, v := range means {
			bi[j] = float32(v)
		}
		priv := dpItemAvg
		priv.EpsRound, priv.EpsTotal = cfg.Eps, cfg.Eps
		return baseline.ItemMeans(train, bi, (train.Scale.Min+train.Scale.Max)/2), &Result{Privacy: priv}, nil
	})
}

// dpAvgFields names the fields of the DP averages' config.
func dpAvgFields(c *baseline.DPConfig) []Field {
	return []Field{floatF("eps", &c.Eps, "ε of every rating value, spent in one release")}
}

// Stream labels for rng.New, one per method, so that methods never share a
// random stream for a seed.
const (
	rngDPItemAvg uint64 = 0x6470_6961 // "dpia"
)
