package method

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
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
		intF("cohort", &c.Cohort, "users asked per training round, a cohort the server picks out of the population (0: every user every round, a roster run); no amplification by sampling is assumed"),
		intF("rounds-per-user", &c.RoundsPerUser, "most training rounds one user's device answers, enforced by the device; the noise is calibrated so that the costliest rounds it may answer spend ε (0: every round)"),
		intF("min-gap", &c.MinGap, "least difference between the numbers of two training rounds one device answers, enforced by the device (0 or 1: none)"),
		aggF("secagg", &c.Aggregation, "aggregation: masked (secure aggregation for real: quantized dense vectors with distributed Skellam noise, the server sees only sums), ideal (the server receives only the sums of the users' statistics and adds the noise; in process, the ideal functionality of secure aggregation) or off (the server reads every user's statistics, and the claim does not hold against it)"),
	}
}

// NoCatalog is the assumption a dp-als run states when its training data
// declares no public item catalog (ratings.Dataset.Catalog empty).
const NoCatalog = "ASSUMPTION: no public item catalog was declared, so the item index is the set of items rated in the " +
	"training data, assumed public; if it is not, a user who is the only rater of an item gets no finite ε (removing them " +
	"changes the length of every release). Declare the catalog: privrec loads the dataset's item list (movies.dat, " +
	"movies.csv, u.item) for dp-als; Go callers set ratings.LoadOptions.Catalog or call Dataset.WithCatalog; privrec serve " +
	"takes it from --items"

// dpalsResult is the Result of a run with config cfg on train.
func dpalsResult(cfg *dpals.Config, rep *dpals.Report, train *ratings.Dataset) *Result {
	p := dpals.Claim
	p.EpsTotal, p.Delta = rep.Eps, cfg.Delta
	p.Releases = rep.Ledger.Releases()
	if n := len(p.Releases); n > 0 {
		p.EpsRound = rep.Eps // every round's release is part of one user-level total
	}
	p.Aggregation = cfg.Aggregation.String()
	if cfg.Aggregation == protocol.AggMasked {
		p.Noise = "skellam"
		p.Note += fmt.Sprintf("; integer path (secagg=masked): every release is a dense quantized vector summed mod 2^32 by "+
			"secure aggregation, with distributed Skellam noise calibrated so that the Skellam Rényi curves of all releases "+
			"(quantization's rounding inflation and the Skellam divergence excess included) compose to ε at δ; the releases "+
			"below are the Gaussian plan the integer noise stands for (its σ scaled by %.4g)", math.Sqrt(1+rep.Stats["skellam_eta"]))
	}
	p.Neighbouring, p.EpsReplace = dpals.Neighbouring, rep.EpsReplace
	if pa := rep.Participation; pa != (protocol.Participation{}) {
		p.Note += "; " + fmt.Sprintf(dpals.CohortNote, pa.Cohort, pa.MaxRounds, pa.MinGap, rep.Ledger.Rho(), len(rep.UserRounds), rep.UserRounds, rep.UserRho)
		p.Neighbouring = dpals.Neighbouring + "; " + dpals.CohortNeighbouring
	}
	p.Note = fmt.Sprintf("%s; %d releases, ρ = %.4g in total, at most %.4g for one user; neighbouring relation: %s, ε = %.4g at δ = %g; "+
		"replace-one: ε = %.4g at the same δ", p.Note, len(p.Releases), rep.Ledger.Rho(), rep.UserRho, p.Neighbouring, rep.Eps, cfg.Delta, rep.EpsReplace)
	if !cfg.Aggregation.Secure() {
		p.Trusted = "the server, which read every user's statistics (secagg=off)"
		p.Note = "secagg=off: the server read every user's statistics, so the ε below does not hold against the server, " +
			"only against an observer of the released sums; " + p.Note
	}
	stats := rep.Stats
	stats["eps_replace_one"] = rep.EpsReplace
	stats["catalog_items"] = float64(train.NumItems())
	if train.Catalog != "" {
		p.Note += fmt.Sprintf("; item index: the public catalog %s (%d items, rated or not)", train.Catalog, train.NumItems())
	} else {
		p.Note = NoCatalog + "; " + p.Note
	}
	return &Result{Privacy: p, Stats: stats}
}

// fitDPALS is the Fit of dp-als and dp-biases: the client/server
// protocol (dpalsFederated's halves) run in process. Spec.Fit gives it a
// seed from crypto/rand outside the test mode (WithTestMode), so the
// noise is secret, and labels the Result.
func fitDPALS(ctx context.Context, train *ratings.Dataset, cfg *dpals.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, invalid(err)
	}
	m, rep, err := dpals.Train(ctx, train, *cfg, seed)
	if err != nil {
		return nil, nil, err
	}
	if hook != nil {
		hook(Progress{Epoch: 1, Epochs: 1, TrainRMSE: rep.Stats["train_rmse"], EpsSpent: rep.Eps})
	}
	return m, dpalsResult(cfg, rep, train), nil
}

// dpalsFederated is the client/server protocol of dp-als and dp-biases in
// halves: the server from the public catalog (its size, or with ServerFor
// its titles, which the release-year feature reads), the clients from
// their users' own ratings.
func dpalsFederated() *Federated {
	prepare := func(cfg *dpals.Config, _ uint64) (dpals.Config, error) { return *cfg, invalid(cfg.Validate()) }
	f := standard(prepare, dpals.NewServer, dpals.NewClients,
		func(cl *dpals.Clients) []protocol.Client { return cl.List }, (*dpals.Clients).Finish,
		func(c dpals.Config, rep *dpals.Report, train *ratings.Dataset) *Result {
			return dpalsResult(&c, rep, train)
		},
		func(cfg *dpals.Config) protocol.Aggregation { return cfg.Aggregation })
	f.Rounds = roundsOf(func(cfg *dpals.Config) (int, error) { return dpals.Rounds(*cfg) })
	f.Participation = func(cfg any) protocol.Participation {
		if c, ok := cfg.(*dpals.Config); ok {
			return c.Participation()
		}
		return protocol.Participation{}
	}
	return f
}

func init() {
	define(Spec{
		Name:    "dp-als",
		Summary: "user-level (ε, δ) joint-DP alternating least squares: noisy per-item statistics, user vectors on the device (Chien et al. 2021, Krichene et al. 2023)",
		Claim:   dpals.Claim, Federated: dpalsFederated(), Catalog: true,
	}, dpals.DefaultConfig, dpalsFields, fitDPALS)
	define(Spec{
		Name:    "dp-biases",
		Summary: "user-level (ε, δ) joint-DP biases-only model: noisy global mean and item biases, user biases on the device",
		Claim:   dpals.Claim, Federated: dpalsFederated(), Catalog: true,
	}, dpals.BiasesConfig, dpalsFields, fitDPALS)
}
