package method

import (
	"context"
	"math"
	"strconv"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/pmf"
	"github.com/privrec/privrec/ratings"
)

// PMFParams are the hyperparameters of pmf.Config, with def's values as
// defaults.
func PMFParams(def pmf.Config) []Param {
	return []Param{
		{"dim", strconv.Itoa(def.Dim), "latent dimension d"},
		{"epochs", strconv.Itoa(def.Epochs), "k1, passes of mini-batch gradient descent"},
		{"lr", ftoa(def.LearnRate), "γ, step on the batch-averaged gradient (pmf.m scaling)"},
		{"momentum", ftoa(def.Momentum), "momentum of the updates"},
		{"reg", ftoa(def.Reg), "λ_u = λ_v of stage 1, per rating occurrence"},
		{"batch", strconv.Itoa(def.BatchSize), "ratings per gradient step (≤ 0: all)"},
		{"init", ftoa(def.InitScale), "standard deviation of the initial factor entries"},
	}
}

// pmfConfig reads PMFParams.
func pmfConfig(r *Reader, seed uint64) pmf.Config {
	c := pmf.DefaultConfig()
	c.Dim, c.Epochs, c.LearnRate = r.Int("dim"), r.Int("epochs"), r.Float("lr")
	c.Momentum, c.Reg, c.BatchSize, c.InitScale = r.Float("momentum"), r.Float("reg"), r.Int("batch"), r.Float("init")
	c.Seed = seed
	return c
}

// dpPMFParams are the V-stage parameters shared by dp-pmf and pdp-pmf.
func dpPMFParams(def pmf.DPConfig) []Param {
	return []Param{
		{"mean-share", ftoa(def.MeanShare), "fraction of ε spent on the DP mean rating that centers the ratings (0: scale midpoint)"},
		{"sens", ftoa(def.Sens), "Δ, bound on a rating change (0: the scale's range, Remark 7)"},
		{"reg-v", ftoa(def.RegV), "λ_v of objective (8) in the V stage (0: 1 + 6.25·(Δ/ε)² for solver exact, the paper's 0.01 for solver paper)"},
		{"solver", string(def.Solver), "V stage: exact (minimizer of (8), Thm 4 holds) or paper (Alg. 2's noisy gradient steps, no proof)"},
		{"v-epochs", strconv.Itoa(def.VEpochs), "k2, gradient steps of solver paper"},
	}
}

func dpPMFConfig(r *Reader, seed uint64) pmf.DPConfig {
	c := pmf.DefaultDPConfig()
	c.PMF = pmfConfig(r, seed)
	c.Sens, c.RegV, c.MeanShare = r.Float("sens"), r.Float("reg-v"), r.Float("mean-share")
	c.Solver, c.VEpochs = pmf.Solver(r.String("solver")), r.Int("v-epochs")
	return c
}

// pmfHook adapts pmf's epoch reports to Progress.
func pmfHook(hook func(Progress), eps float64) func(pmf.EpochStats) {
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
var dpPMFClaim = Privacy{Unit: "rating value", Trusted: "the recommender",
	Note: "one release, ε-DP for a changed rating value (Thm 4 with Δ = r_max − r_min, Remark 7) of the item matrix V̄ given U; " +
		"U is fitted without noise and kept by the recommender, so predictions that use U carry no proven guarantee (as in the paper)"}

// pdpPMFClaim is PDP-PMF's claim (Thm 6 and Remark 7).
var pdpPMFClaim = Privacy{Unit: "rating value", Trusted: "the recommender",
	Note: "personalized: rating k gets min(ε_k, t) against add/remove (Thm 6) and 2·min(ε_k, t) for a changed value (Remark 7); " +
		"EpsTotal is the largest 2·min(ε_k, t); like DP-PMF it covers V̄ given U, and U is fitted without noise"}

func init() {
	register(Spec{
		Name:    "pmf",
		Summary: "probabilistic matrix factorization as in pmf.m (PDP-PMF's non-private start)",
		Claim:   noPrivacy,
		Params:  PMFParams(pmf.DefaultConfig()),
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			r := p.Reader()
			cfg := pmfConfig(r, seed)
			if err := r.Err(); err != nil {
				return nil, nil, err
			}
			if err := cfg.Validate(); err != nil {
				return nil, nil, paramErr("%v", err)
			}
			m, err := pmf.Train(ctx, train, cfg, pmfHook(hook, 0))
			if err != nil {
				return nil, nil, err
			}
			return m, &Result{Privacy: noPrivacy}, nil
		},
	})
	register(Spec{
		Name:    "dp-pmf",
		Summary: "DP-PMF (Zhang et al. 2019, Alg. 2): PMF for U, objective perturbation for V",
		Claim:   dpPMFClaim,
		Params: append(append(PMFParams(pmf.DefaultConfig()),
			Param{"eps", "1", "privacy budget ε of every rating"}), dpPMFParams(pmf.DefaultDPConfig())...),
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			r := p.Reader()
			cfg := dpPMFConfig(r, seed)
			cfg.Eps = r.Float("eps")
			if err := r.Err(); err != nil {
				return nil, nil, err
			}
			if err := cfg.Validate(); err != nil {
				return nil, nil, paramErr("%v", err)
			}
			m, st, err := pmf.TrainDP(ctx, train, cfg, pmfHook(hook, cfg.Eps))
			if err != nil {
				return nil, nil, err
			}
			priv := dpPMFClaim
			priv.EpsRound, priv.EpsTotal = cfg.Eps, cfg.Eps
			if cfg.Solver == pmf.SolverPaper {
				priv.Note = "the paper's claimed ε; solver paper does not meet Thm 4's premise (exact minimizer, one η per item), so no guarantee is proven"
			}
			return m, &Result{Privacy: priv, Stats: map[string]float64{
				"train_rmse": st.TrainRMSE, "noise_norm": st.NoiseNorm, "sens": st.Sens,
				"clipped_users": float64(st.ClippedUsers), "reg_v": st.RegV, "center": st.Center}}, nil
		},
	})
	g := budget.DefaultPDP()
	register(Spec{
		Name:    "pdp-pmf",
		Summary: "PDP-PMF (Zhang et al. 2019, Alg. 1-2): RSM sampling by per-rating ε, then DP-PMF at ε = t",
		Claim:   pdpPMFClaim,
		Params: append(append(PMFParams(pmf.DefaultConfig()),
			Param{"f-c", ftoa(g.Conservative), "fraction of conservative ratings, ε uniform in [eps-c, eps-m)"},
			Param{"f-m", ftoa(g.Moderate), "fraction of moderate ratings, ε uniform in [eps-m, eps-l); the rest are liberal"},
			Param{"eps-c", ftoa(g.Low), "ε_c, lowest conservative ε"},
			Param{"eps-m", ftoa(g.Mid), "ε_m, conservative/moderate boundary"},
			Param{"eps-l", ftoa(g.High), "ε_l, the liberal ratings' ε"},
			Param{"threshold", "mean", "sampling threshold t: mean, min, max of the ε's, or a number"},
			Param{"spec-seed", "1", "seed of the simulated privacy specification"},
		), dpPMFParams(pmf.DefaultDPConfig())...),
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			r := p.Reader()
			cfg := dpPMFConfig(r, seed)
			groups := budget.Groups{Conservative: r.Float("f-c"), Moderate: r.Float("f-m"),
				Low: r.Float("eps-c"), Mid: r.Float("eps-m"), High: r.Float("eps-l")}
			mode := r.String("threshold")
			specSeed := r.Int("spec-seed")
			if err := r.Err(); err != nil {
				return nil, nil, err
			}
			if specSeed < 0 {
				return nil, nil, paramErr("spec-seed = %d must be ≥ 0", specSeed)
			}
			eps, err := budget.PDPSpec(train, groups, uint64(specSeed))
			if err != nil {
				return nil, nil, paramErr("%v", err)
			}
			t, err := budget.Threshold(eps, mode)
			if err != nil {
				return nil, nil, paramErr("%v", err)
			}
			m, st, err := pmf.TrainPDP(ctx, train, eps, t, cfg, pmfHook(hook, 2*t))
			if err != nil {
				return nil, nil, paramErr("%v", err)
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
		},
	})
}
