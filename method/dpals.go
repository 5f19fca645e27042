package method

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// dpalsFields names the fields of a dpals.Config.
func dpalsFields(c *dpals.Config) []Field {
	return []Field{
		floatF("eps", &c.Eps, "user-level ε of the whole run (every release accounted)"),
		floatF("delta", &c.Delta, "user-level δ of the whole run"),
		intF("dim", &c.Dim, "latent dimension K (0: biases only)"),
		intF("bias-rounds", &c.BiasRounds, "rounds releasing item-bias statistics"),
		boolF("pool-bias", &c.PoolBias, "estimate item biases from every bias round's sums and counts so far"),
		intF("rounds", &c.Rounds, "factor rounds (noisy Gramians and right-hand sides)"),
		intF("max-ratings", &c.MaxRatings, "c: most ratings of a user in the released statistics, sampled on the device (0: all)"),
		floatF("clip", &c.Clip, "bound on a contributed residual (rating units)"),
		floatF("clip-norm", &c.ClipNorm, "bound on the L2 norm of a user's whole weighted residual vector (0: clip bounds it)"),
		floatF("norm-u", &c.NormU, "bound on the norm of a contributed user vector"),
		floatF("beta", &c.Beta, "adaptive weights ∝ (noisy item count)^(−beta), normalized per user (0: uniform)"),
		floatF("frac-mean", &c.FracMean, "share of the zCDP budget spent on the global mean"),
		floatF("frac-bias", &c.FracBias, "share of the zCDP budget spent on the bias rounds"),
		floatF("frac-gram", &c.FracGram, "share of a round's budget spent on counts or Gramians"),
		floatF("reg-user", &c.RegUser, "ridge of the user vector in the device's solve"),
		floatF("reg-user-bias", &c.RegUserBias, "ridge of the user bias in the device's solve"),
		floatF("reg-item", &c.RegItem, "ridge of the item solve (weighted ratings)"),
		floatF("reg-noise", &c.RegNoise, "ridge added per unit of the released statistics' noise σ"),
		intF("top-items", &c.TopItems, "factor rounds only for the items with the largest noisy counts (0: all)"),
		boolF("shared-gram", &c.SharedGram, "an item's Gramian is its noisy count times one global Gramian"),
		intF("user-features", &c.UserFeatures, "public item features (1: item bias, 2: also log noisy count, 3: also release year from the title) each device fits its own coefficients on"),
		floatF("reg-feature", &c.RegFeature, "ridge of the user's coefficients on the public item features"),
		intF("init-items", &c.InitItems, "spectral warm start on the items with the largest noisy counts (0: random start)"),
		floatF("frac-init", &c.FracInit, "share of the factor budget spent on the warm start when rounds > 0"),
		floatF("init-floor", &c.InitFloor, "warm-start components kept above this multiple of the noise's spectral norm"),
		floatF("init", &c.InitScale, "standard deviation of the public initial item factors"),
	}
}

// fitDPALS is the Fit of dp-als and dp-biases.
func fitDPALS(ctx context.Context, train *ratings.Dataset, cfg *dpals.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, invalid(err)
	}
	m, rep, err := dpals.Train(ctx, train, *cfg, seed)
	if err != nil {
		return nil, nil, err
	}
	p := dpals.Claim
	p.EpsTotal, p.Delta = rep.Eps, cfg.Delta
	p.Releases = rep.Ledger.Releases()
	if n := len(p.Releases); n > 0 {
		p.EpsRound = rep.Eps // every round's release is part of one user-level total
	}
	p.Note = fmt.Sprintf("%s; %d releases, ρ = %.4g in total", p.Note, len(p.Releases), rep.Ledger.Rho())
	if hook != nil {
		hook(Progress{Epoch: 1, Epochs: 1, TrainRMSE: rep.Stats["train_rmse"], EpsSpent: rep.Eps})
	}
	return m, &Result{Privacy: p, Stats: rep.Stats}, nil
}

func init() {
	define(Spec{
		Name:    "dp-als",
		Summary: "user-level (ε, δ) joint-DP alternating least squares: noisy per-item statistics, user vectors on the device (Chien et al. 2021, Krichene et al. 2023)",
		Claim:   dpals.Claim,
	}, dpals.DefaultConfig, dpalsFields, fitDPALS)
	define(Spec{
		Name:    "dp-biases",
		Summary: "user-level (ε, δ) joint-DP biases-only model: noisy global mean and item biases, user biases on the device",
		Claim:   dpals.Claim,
	}, dpals.BiasesConfig, dpalsFields, fitDPALS)
}
