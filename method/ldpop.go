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
//     not. Protects one rating's value and existence; trusts nobody. ε per
//     round: ε with one position per round (ε·√(positions of one row) with
//     more); in total ε·max_j ‖c_j‖₂ ≤ ε·√d per pass over V (c_jl: releases
//     of position (j, l)), with u_i held fixed as the paper's Thm 1
//     assumes; since u_i is fitted to the user's own ratings, the honest
//     user-level bound is 2ε·Σ_j ‖c_j‖₂ (stat eps_total_user). The ε holds
//     for the per-position sums: under secure aggregation (secagg=ideal,
//     the default in process; secagg=masked, the integer path with
//     distributed Skellam noise, (ε, δ)-DP by Rényi accounting, the
//     deployment's default); the paper's server reads single uploads,
//     which carry 1/n of the noise.
//   - "ldp-op-basic": Alg. 1, the same objective noise in every round.
//     Protects rating values only, at ε·√d in total against the sums (the
//     values enter every round through one fixed term); existence is not
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
		Unit: "rating value and existence", Trusted: "nobody",
		Note: "Laplace(2ΔB/ε) on the sum of every released position, split among all users (noise on unrated items too); " +
			"ε per round and ε·max_j ‖c_j‖₂ in total (c_jl = releases of position (j,l); ≤ ε·√d per pass) with u_i held fixed " +
			"as the paper's Thm 1 assumes; u_i is fitted to the user's ratings, so the user-level bound is eps_total_user; " +
			"holds against a server that sees only the per-position sums (secagg=true); with secagg=false the server reads " +
			"single uploads carrying 1/n of the noise (no finite ε)",
	}
	ldpopBasicClaim = model.Privacy{
		Unit: "rating value", Trusted: "nobody",
		Note: "the same objective noise in every round: differences of rounds cancel it, so rating existence is not protected " +
			"(the difference attack); values enter every round through one fixed term, ε·√d in total against the sums; " +
			"secagg=false (the default) lets the server read single uploads carrying 1/n of the noise (no finite ε)",
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
	if v == ldpop.LDPOP {
		stats["eps_total_user"] = rep.EpsTotalUser
		priv.Note += fmt.Sprintf("; this run: user-level total %.4g", rep.EpsTotalUser)
	}
	if c.Noise == dp.MixtureShares && v != ldpop.RSMF {
		priv.Note += "; noise=mixture: a server that knows H sees Gaussian noise, only (ε, δ) with δ ≈ 0.19 at ε = 1 (dp.MixtureServerDelta)"
	}
	if !c.Aggregation.Secure() && v != ldpop.RSMF {
		priv.Note += "; this run had secagg=off: the ε above does not hold against this server"
	}
	return &Result{Privacy: priv, Stats: stats}
}

// ldpopFederated is the client/server protocol of variant v in halves.
func ldpopFederated(v ldpop.Variant, claim model.Privacy) *Federated {
	return federated(
		func(cfg *ldpop.Config, numItems int, scale ratings.Scale, seed uint64) (protocol.Stateful, error) {
			c, err := ldpopConfig(cfg, seed)
			if err != nil {
				return nil, err
			}
			return ldpop.NewServer(c, numItems, scale)
		},
		func(cfg *ldpop.Config, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := ldpopConfig(cfg, seed)
			if err != nil {
				return nil, err
			}
			cl, err := ldpop.NewClients(train, c)
			if err != nil {
				return nil, err
			}
			return &Clients{List: cl.List, Finish: func(vf []float32) (*model.Model, *Result, error) {
				m, err := cl.Model(vf)
				if err != nil {
					return nil, nil, err
				}
				return m, ldpopResult(v, claim, c, cl.Report(m)), nil
			}}, nil
		},
		func(cfg *ldpop.Config) protocol.Aggregation { return cfg.Aggregation })
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
