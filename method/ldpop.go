package method

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/ldpop"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// The LDP-OP family (Wang, Luo, Deng and Gao 2025; package ldpop). Every
// method runs on the client/server protocol: the devices hold the ratings
// and u_i, the server only V.
//
//   - "ldp-op": Alg. 2 with C2, one position of V per round without
//     replacement, distributed Laplace noise on every position, rated or
//     not. Protects all of one user's ratings (values and existence); trusts
//     nobody. ε per round 2ε·Σ_j √(positions of row j that round) (2ε with
//     one position per round); in total 2ε·Σ_j ‖c_j‖₂ (c_jl: releases of
//     position (j, l)): u_i is fitted to the user's own ratings, so they
//     enter every row she rated. The paper's figure, ε·max_j ‖c_j‖₂ per
//     rating with u_i held fixed as its Thm 1 assumes, is not a bound and
//     is kept as stats eps_total_paper. The ε holds
//     for the per-position sums: under secure aggregation (secagg=ideal,
//     the default in process; secagg=masked, the integer path with
//     distributed Skellam noise, (ε, δ)-DP by Rényi accounting, the
//     deployment's default); the paper's server reads single uploads,
//     which carry 1/n of the noise.
//   - "ldp-op-basic": Alg. 1, the same objective noise in every round.
//     No proven ε (Inf): differences of rounds cancel the noise even in
//     the sums, which then carry Σ_i u_i u_iᵀΔv_j exactly, u_i fitted to
//     the ratings. The paper claims rating values at ε·√d in total
//     against the sums (stats eps_total_paper); existence is not
//     protected at all: two rounds' uploads differ by exactly λΔv_j at every
//     unrated item (the difference attack). The server reads single uploads
//     (secagg=false), as in the paper: it is the attack target.
//   - "rsmf": LDP-OP's sampling without noise; no claim.
//
// The defaults are the paper's (iter = 1000 rounds of one position, γ =
// 0.015 decaying by 0.95 per round, λ = 1e-8) and barely move V: see the
// package documentation of ldpop and the README for what they give, and
// per-round, decay and refit for the documented departures.

var (
	ldpopClaim = model.Privacy{
		Unit: "user's ratings", Trusted: "nobody",
		Note: "Laplace(2ΔB/ε) on the sum of every released position, split among all users (noise on unrated items too); " +
			"the unit is all of one user's ratings, values and existence (the user takes part either way: the number of users is " +
			"public); u_i is fitted to the user's own ratings, so they enter every row she rated, and e·u_l ∈ [−2ΔB, 2ΔB] moves " +
			"by at most 4ΔB per position: ε per round 2ε·Σ_j √(positions of row j released that round), in total " +
			"2ε·Σ_j ‖c_j‖₂ by basic composition (c_jl = releases of position (j,l)); holds against a server that sees only the " +
			"per-position sums (secagg=ideal or masked); with secagg=off the server reads single uploads carrying 1/n of the " +
			"noise: no ε against it (Inf). As the paper computes it (stats eps_round_paper, eps_total_paper): ε per round and " +
			"ε·max_j ‖c_j‖₂ per rating, with u_i held fixed as its Thm 1 assumes; not an upper bound (privrec audit --attack canary)",
		Neighbouring: NeighboursUserRatings,
	}
	ldpopBasicClaim = model.Privacy{
		Unit: "rating value", Trusted: "nobody",
		Note: "no proven ε (Inf): the same objective noise in every round, so differences of rounds cancel it, even in the " +
			"sums: they carry 2·Σ_i u_i u_iᵀ·Δv_j exactly, and u_i is fitted to the user's ratings; rating existence falls to " +
			"the difference attack. As the paper computes it (stats eps_round_paper, eps_total_paper): ε·√d for values against " +
			"the sums, with u_i held fixed; secagg=off (the default) lets the server read single uploads",
		Neighbouring: NeighboursRatingValue,
	}
	rsmfClaim = model.Privacy{Unit: "none", Trusted: "everyone", Note: "exact gradient elements: each upload shows whether its user rated the item"}
)

// ldpopFields names the fields of an ldpop.Config for variant v, with
// help true for that variant.
func ldpopFields(v ldpop.Variant) func(c *ldpop.Config) []Field {
	return func(c *ldpop.Config) []Field {
		fs := []Field{
			intF("dim", &c.Dim, "latent dimension d"),
			intF("epochs", &c.Rounds, "training rounds, the paper's iter (one protocol round each)"),
		}
		if v != ldpop.Basic {
			fs = append(fs, intF("per-round", &c.PerRound, "positions of V named per round (the paper: 1); uploads are scaled by (positions left)/(named)"))
		}
		fs = append(fs,
			floatF("lr", &c.LearnRate, "initial learning rate γ_0 of the averaged item gradient"),
			floatF("decay", &c.Decay, "learning-rate decay per decay-every rounds: γ_t = γ_0·decay^⌊t/decay-every⌋"),
			intF("decay-every", &c.DecayEvery, "rounds per decay step (the paper: 1)"),
			floatF("reg", &c.Reg, "L2 regularization λ of objectives (2) and (8)"),
			floatF("bound", &c.Bound, "bound B on ‖u_i‖ (the user fit is constrained to it; noise scale 2ΔB/ε)"),
			floatF("init", &c.InitScale, "standard deviation of V⁰ (the first coordinate starts at r_max/B)"),
		)
		if v != ldpop.Basic {
			fs = append(fs, intF("refit", &c.Refit, "refit u_i against the current V every this many rounds (0: once against V⁰, the paper)"))
		}
		switch v {
		case ldpop.LDPOP:
			fs = append(fs, floatF("eps", &c.Eps, "ε of one released position of V (a round releases per-round positions: ε·√per-round a round)"))
		case ldpop.Basic:
			fs = append(fs, floatF("eps", &c.Eps, "ε of the objective noise, drawn once and reused every round (values only: existence is not protected)"))
		}
		if v != ldpop.RSMF {
			fs = append(fs, schemeF("noise", &c.Noise, "noise shares: gamma (exact Laplace, hides the noise from the server) or mixture (the paper's H ~ Exp(1), C ~ N(0, 1/n))"))
		}
		if v == ldpop.Basic {
			fs = append(fs, aggF("secagg", &c.Aggregation, "aggregation: ideal (the server sees only per-position sums) or off (it reads every user's upload)"))
		} else {
			fs = append(fs,
				aggF("secagg", &c.Aggregation, "aggregation: masked (secure aggregation for real: quantized uploads, distributed Skellam noise), ideal (the server sees only per-position float sums) or off (it reads every user's upload)"),
				floatF("delta", &c.Delta, "δ of the integer path's (ε, δ) guarantee with secagg=masked (0: 1e-6)"))
		}
		return append(fs,
			intF("workers", &c.Workers, "parallel client workers (0: all cores); results do not depend on it"),
		)
	}
}

// ldpopConfig returns cfg with the seed, validated.
func ldpopConfig(cfg *ldpop.Config, seed uint64) (ldpop.Config, error) {
	c := *cfg
	c.Seed = seed
	return c, invalid(c.Validate())
}

// ldpopResult is the Result of a run of variant v with config c.
func ldpopResult(v ldpop.Variant, claim model.Privacy, c ldpop.Config, rep *ldpop.Report) *Result {
	priv := claim
	priv.EpsRound, priv.EpsTotal, priv.Delta = rep.EpsRound, rep.EpsTotal, rep.Delta
	if v != ldpop.RSMF { // the proven figures (Inf for Basic); the paper's go to Stats
		priv.EpsRound, priv.EpsTotal = rep.EpsRoundUser, rep.EpsTotalUser
	}
	if v == ldpop.Basic {
		priv.Delta = 0
	}
	if !c.Aggregation.Secure() && v != ldpop.RSMF {
		priv.EpsRound, priv.EpsTotal, priv.Delta = math.Inf(1), math.Inf(1), 0
		priv.Note = NotApplicable("secagg=off: the server reads every user's upload, each carrying 1/n of a position's noise") +
			"; " + priv.Note
	}
	priv.Aggregation, priv.Noise = rep.Aggregation, rep.Noise
	if rep.Noise == "skellam" {
		priv.Note += fmt.Sprintf("; this run: integer path (secagg=masked), distributed Skellam(μ = %.4g, in 1/64 units) on every position, "+
			"(ε, δ = %g) by Rényi accounting, calibrated to ε·√d per pass over V", rep.SkellamMu, rep.Delta)
	}
	stats := map[string]float64{
		"train_rmse": rep.TrainRMSE, "passes": float64(rep.Passes),
		"updated_fraction": float64(rep.Updated) / float64(max(1, rep.Positions)),
		"clipped_users":    float64(rep.ClippedUsers),
	}
	switch {
	case rep.Noise == "skellam":
		stats["skellam_mu"] = rep.SkellamMu
	case v != ldpop.RSMF:
		stats["noise_scale"] = rep.NoiseScale
	}
	if v != ldpop.RSMF {
		stats["eps_round_paper"], stats["eps_total_paper"] = rep.EpsRound, rep.EpsTotal
		priv.Note += fmt.Sprintf("; this run, as the paper computes it (per rating, u_i held fixed; not a bound): ε %.4g per round, %.4g in total", rep.EpsRound, rep.EpsTotal)
	}
	if c.Noise == dp.MixtureShares && v != ldpop.RSMF {
		priv.Note += "; noise=mixture: a server that knows H sees Gaussian noise, only (ε, δ) with δ ≈ 0.19 at ε = 1 (dp.MixtureServerDelta)"
	}
	return &Result{Privacy: priv, Stats: stats}
}

// ldpopFederated is the client/server protocol of variant v in halves.
func ldpopFederated(v ldpop.Variant, claim model.Privacy) *Federated {
	f := standard(ldpopConfig, ldpop.NewServer, ldpop.NewClients,
		func(cl *ldpop.Clients) []protocol.Client { return cl.List }, (*ldpop.Clients).Finish,
		func(c ldpop.Config, rep *ldpop.Report, _ *ratings.Dataset) *Result {
			return ldpopResult(v, claim, c, rep)
		},
		func(cfg *ldpop.Config) protocol.Aggregation { return cfg.Aggregation })
	f.Rounds = roundsOf(func(cfg *ldpop.Config) (int, error) {
		c, err := ldpopConfig(cfg, 0)
		if err != nil {
			return 0, err
		}
		return ldpop.Rounds(c)
	})
	return f
}

func defineLDPOP(v ldpop.Variant, summary string, claim model.Privacy) {
	define(Spec{Name: v.String(), Summary: summary, Claim: claim, Federated: ldpopFederated(v, claim)},
		func() ldpop.Config { return ldpop.DefaultConfig(v) }, ldpopFields(v),
		func(ctx context.Context, train *ratings.Dataset, cfg *ldpop.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
			c, err := ldpopConfig(cfg, seed)
			if err != nil {
				return nil, nil, err
			}
			if hook != nil {
				c.OnRound = func(s ldpop.RoundStats) {
					hook(Progress{Epoch: s.Round, Epochs: s.Rounds, TrainRMSE: math.NaN(), EpsSpent: s.EpsSpent})
				}
			}
			m, rep, err := ldpop.Train(ctx, train, c)
			if err != nil {
				return nil, nil, err
			}
			return m, ldpopResult(v, claim, c, rep), nil
		})
}

func init() {
	defineLDPOP(ldpop.LDPOP, "LDP-OP (Wang et al. 2025, Alg. 2): objective perturbation, one position of V per round without replacement, noise on every item", ldpopClaim)
	defineLDPOP(ldpop.Basic, "LDP-OP basic scheme (Alg. 1): the same objective noise every round, broken by the difference attack (attack target)", ldpopBasicClaim)
	defineLDPOP(ldpop.RSMF, "RSMF (LDP-OP §6.1): LDP-OP's position sampling without noise (non-private)", rsmfClaim)
}
