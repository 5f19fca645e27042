package method

import (
	"context"
	"errors"
	"math"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/pmf"
	"github.com/privrec/privrec/ratings"
)

// pmfFields names the fields of a pmf.Config.
func pmfFields(c *pmf.Config) []Field {
	return []Field{
		intF("dim", &c.Dim, "latent dimension d"),
		intF("epochs", &c.Epochs, "k1, passes of mini-batch gradient descent"),
		floatF("lr", &c.LearnRate, "γ, step on the batch-averaged gradient (pmf.m scaling)"),
		floatF("momentum", &c.Momentum, "momentum of the updates"),
		floatF("reg", &c.Reg, "λ_u = λ_v of stage 1, per rating occurrence"),
		intF("batch", &c.BatchSize, "ratings per gradient step (≤ 0: all)"),
		floatF("init", &c.InitScale, "standard deviation of the initial factor entries"),
	}
}

// dpVFields names the V-stage fields shared by dp-pmf and pdp-pmf.
func dpVFields(c *pmf.DPConfig) []Field {
	return []Field{
		floatF("mean-share", &c.MeanShare, "fraction of ε spent on the DP mean rating that centers the ratings (0: scale midpoint)"),
		floatF("sens", &c.Sens, "Δ, bound on a rating change (0: the scale's range, Remark 7)"),
		floatF("reg-v", &c.RegV, "λ_v of objective (8) in the V stage (0: 1 + 6.25·(Δ/ε)² for solver exact, the paper's 0.01 for solver paper)"),
		textF("solver", &c.Solver, "V stage: exact (minimizer of (8), Thm 4 holds) or paper (Alg. 2's noisy gradient steps, no proof)",
			string(pmf.SolverExact), string(pmf.SolverPaper)),
		intF("v-epochs", &c.VEpochs, "k2, gradient steps of solver paper"),
	}
}

// pmfHook adapts pmf's epoch reports to Progress.
func pmfHook(hook Hook, eps float64) func(pmf.EpochStats) {
	if hook == nil {
		return nil
	}
	return func(s pmf.EpochStats) {
		p := Progress{Epoch: s.Epoch, Epochs: s.Epochs, TrainRMSE: s.TrainRMSE}
		if s.Stage == 2 {
			p.EpsSpent = eps
		}
		hook(p)
	}
}

// dpPMFClaim is DP-PMF's claim (Zhang et al. 2019, Thm 4 and Remark 7).
var dpPMFClaim = model.Privacy{Unit: "rating value", Trusted: "the recommender",
	Note: "one release, ε-DP for a changed rating value (Thm 4 with Δ = r_max − r_min, Remark 7) of the item matrix V̄ given U; " +
		"U is fitted without noise and kept by the recommender, so predictions that use U carry no proven guarantee (as in the paper)",
	Neighbouring: NeighboursRatingValue}

// pdpPMFClaim is PDP-PMF's claim (Thm 6 and Remark 7).
var pdpPMFClaim = model.Privacy{Unit: "rating value", Trusted: "the recommender",
	Note: "personalized: rating k gets min(ε_k, t) against add/remove (Thm 6) and 2·min(ε_k, t) for a changed value (Remark 7); " +
		"EpsTotal is the largest 2·min(ε_k, t); like DP-PMF it covers V̄ given U, and U is fitted without noise",
	Neighbouring: NeighboursRatingValue}

func init() {
	define(Spec{
		Name:    "pmf",
		Summary: "probabilistic matrix factorization as in pmf.m (PDP-PMF's non-private start)",
		Claim:   noPrivacy,
	}, pmf.DefaultConfig, pmfFields, func(ctx context.Context, train *ratings.Dataset, cfg *pmf.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c := *cfg
		c.Seed = seed
		if err := c.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		m, err := pmf.Train(ctx, train, c, pmfHook(hook, 0))
		if err != nil {
			return nil, nil, err
		}
		return m, &Result{Privacy: noPrivacy}, nil
	})
	define(Spec{
		Name:    "dp-pmf",
		Summary: "DP-PMF (Zhang et al. 2019, Alg. 2): PMF for U, objective perturbation for V",
		Claim:   dpPMFClaim,
	}, pmf.DefaultDPConfig, func(c *pmf.DPConfig) []Field {
		fs := append(pmfFields(&c.PMF), floatF("eps", &c.Eps, "ε of every rating value, one release of V (Thm 4)"))
		return append(fs, dpVFields(c)...)
	}, func(ctx context.Context, train *ratings.Dataset, cfg *pmf.DPConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c := *cfg
		c.PMF.Seed = seed
		if err := c.Validate(); err != nil {
			return nil, nil, invalid(err)
		}
		m, st, err := pmf.TrainDP(ctx, train, c, pmfHook(hook, c.Eps))
		if err != nil {
			return nil, nil, err
		}
		priv := dpPMFClaim
		priv.EpsRound, priv.EpsTotal = c.Eps, c.Eps
		if c.Solver == pmf.SolverPaper {
			priv.Note = "the paper's claimed ε; solver paper does not meet Thm 4's premise (exact minimizer, one η per item), so no guarantee is proven"
		}
		return m, &Result{Privacy: priv, Stats: map[string]float64{
			"train_rmse": st.TrainRMSE, "noise_norm": st.NoiseNorm, "sens": st.Sens,
			"clipped_users": float64(st.ClippedUsers), "reg_v": st.RegV, "center": st.Center}}, nil
	})
	define(Spec{
		Name:    "pdp-pmf",
		Summary: "PDP-PMF (Zhang et al. 2019, Alg. 1-2): RSM sampling by per-rating ε, then DP-PMF at ε = t",
		Claim:   pdpPMFClaim,
	}, pmf.DefaultPDPConfig, func(c *pmf.PDPConfig) []Field {
		fs := append(pmfFields(&c.PMF),
			floatF("f-c", &c.Groups.Conservative, "fraction of conservative ratings, ε uniform in [eps-c, eps-m)"),
			floatF("f-m", &c.Groups.Moderate, "fraction of moderate ratings, ε uniform in [eps-m, eps-l); the rest are liberal"),
			floatF("eps-c", &c.Groups.Low, "ε_c, the lowest ε of a conservative rating"),
			floatF("eps-m", &c.Groups.Mid, "ε_m, the conservative/moderate boundary"),
			floatF("eps-l", &c.Groups.High, "ε_l, the liberal ratings' ε"),
			textF("threshold", &c.Threshold, "sampling threshold t: mean, min, max of the ratings' ε, or a number"),
			uintF("spec-seed", &c.SpecSeed, "seed of the simulated privacy specification (public: it is not the data)"),
		)
		return append(fs, dpVFields(&c.DPConfig)...)
	}, func(ctx context.Context, train *ratings.Dataset, cfg *pmf.PDPConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
		c := cfg.DPConfig
		c.PMF.Seed = seed
		eps, err := budget.PDPSpec(train, cfg.Groups, cfg.SpecSeed)
		if err != nil {
			return nil, nil, invalid(err)
		}
		t, err := budget.Threshold(eps, cfg.Threshold)
		if err != nil {
			return nil, nil, invalid(err)
		}
		m, st, err := pmf.TrainPDP(ctx, train, eps, t, c, pmfHook(hook, 2*t))
		if err != nil {
			if errors.Is(err, pmf.ErrConfig) {
				err = invalid(err)
			}
			return nil, nil, err
		}
		priv := pdpPMFClaim
		priv.EpsRound, priv.EpsTotal = 2*st.MaxEps, 2*st.MaxEps
		var mean float64
		for _, e := range eps {
			mean += e
		}
		return m, &Result{Privacy: priv, Stats: map[string]float64{
			"train_rmse": st.TrainRMSE, "noise_norm": st.NoiseNorm, "threshold": t,
			"kept_fraction": float64(st.Kept) / math.Max(1, float64(train.Len())),
			"eps_mean":      mean / math.Max(1, float64(len(eps))), "clipped_users": float64(st.ClippedUsers),
			"reg_v": st.RegV, "center": st.Center, "sens": st.Sens}}, nil
	})
}
