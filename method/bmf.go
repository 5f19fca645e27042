package method

import (
	"context"
	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/bmf"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// bmfFields names the fields of a bmf.Config: the thesis's Table 2 names
// σ (init), d (dim) and T (iters).
func bmfFields(c *bmf.Config) []Field {
	return []Field{
		intF("dim", &c.Dim, "latent dimension d"),
		intF("iters", &c.Iters, "Gibbs sweeps T"),
		floatF("init", &c.InitStdev, "σ, standard deviation of the initial factors"),
		intF("burnin", &c.Burnin, "first sweeps left out of the prediction average (libFM: 0)"),
		intF("keep", &c.Keep, "most samples averaged, evenly thinned (0: all after burnin)"),
		intF("workers", &c.Workers, "parallel workers (0: all cores); results do not depend on it"),
	}
}

func init() {
	define(Spec{
		Name:    "bmf-gibbs",
		Summary: "Bayesian MF by Gibbs sampling, libFM's MCMC (the multi-vendor thesis's model, non-private)",
		Claim:   noPrivacy,
	}, bmf.DefaultConfig, bmfFields, func(ctx context.Context, train *ratings.Dataset, cfg *bmf.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c := *cfg
		c.Seed = seed
		if err := c.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		var last bmf.IterStats
		m, err := bmf.Train(ctx, train, c, func(s bmf.IterStats) {
			last = s
			if hook != nil {
				hook(Progress{Epoch: s.Iter, Epochs: c.Iters, TrainRMSE: s.TrainRMSE})
			}
		})
		if err != nil {
			return nil, nil, err
		}
		return m, &Result{Privacy: noPrivacy, Stats: map[string]float64{
			"train_rmse": last.TrainRMSE, "alpha": last.Alpha, "samples": float64(last.Kept)}}, nil
	})
	dpGlobal := model.Privacy{Unit: "rating value", Trusted: "the recommender",
		Note: "one release of the mean of all ratings (the vendor is the recommender)", Neighbouring: NeighboursRatingValue}
	define(Spec{
		Name:    "dp-globalavg",
		Summary: "ε-DP global average rating (the multi-vendor thesis's Alg. 1), clamped to the scale",
		Claim:   dpGlobal,
	}, baseline.DefaultDPConfig, dpAvgFields, func(ctx context.Context, train *ratings.Dataset, cfg *baseline.DPConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		if err := cfg.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		lo, hi := float64(train.Scale.Min), float64(train.Scale.Max)
		if !(hi > lo) {
			return nil, nil, paramErr("rating scale %v has no range", train.Scale)
		}
		g := train.Scale.Clamp(float32(dp.DPAverage(rng.New(seed, rngDPGlobalAvg), train.Values, lo, hi, cfg.Eps)))
		priv := dpGlobal
		priv.EpsRound, priv.EpsTotal = cfg.Eps, cfg.Eps
		m := baseline.Constant(train, g)
		return m, &Result{Privacy: priv}, nil
	})
}

const rngDPGlobalAvg uint64 = 0x6470_6761 // "dpga"
