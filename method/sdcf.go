package method

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/sdcf"
)

// The SDCF family (Jiang, Li and Lin 2019; package sdcf). Every method runs
// on the client/server protocol: clients hold their ratings and user
// vectors, the server only the item factors.
//
//   - "sgld-mf": SGLD MF (§2.3). No DP claim: the uploads show which items
//     each user rated.
//   - "sdmf": SDMF (Alg. 1-2). Protects rating existence against an
//     untrusted server (trusted: nobody): per round ε_I (Thm 2, which items
//     are sent) plus ε_g (Thm 3, values of the fake gradients); over T
//     rounds min(ε_P, T·ε_I) + T·ε_g, since the send sets are post-
//     processing of the permanent PRR vector (ε_P = 2·ε_I, Thm 1). The
//     paper bounds one round only. Rating values and the user vector are
//     hidden by the Langevin noise and by never leaving the device; no ε is
//     claimed for them.
//   - "sdmf-alpha-inf": SDMF with α = ∞, i.e. ε_g = 0: per round ε_I, total
//     min(ε_P, T·ε_I).
//   - "isgld": Laplace noise on each rating on the device (ε-DP for the
//     rating value, one release, trusted: nobody), then SGLD MF; existence
//     is not protected.
//   - "bpr-sgld": BPR-MF trained by SGLD on one-class data (every training
//     rating is a positive). No DP claim.
//   - "sd-bprmf": SD-BPRMF (Lemma 2): rating existence, per round ε_I,
//     total min(ε_P, T·ε_I); no fake gradients, no ε_g.
//
// The BPR methods rank: their Predict returns a score, not a rating (see
// Spec.Ranks).
//
// Result.Stats reports, besides the ε spent (eps_g_round, eps_g_total,
// eps_i_round, eps_i_total, eps_p_round, eps_p_total), the measured uploads
// per client and round beside eq. (12)'s expectation z
// (uploads_per_client_round, eq12_expected_uploads, z), the fraction of
// uploads for unrated items (unrated_fraction: SDMF's fakes) beside its
// expectation, and the participation under dropout. Defaults are
// sdcf.DefaultConfig's, chosen on a validation split of training data.

// sdcfNote is the note shared by the private SDCF claims.
const sdcfNote = "existence of ratings against an untrusted server; the paper bounds one round only (§3.4): " +
	"EpsRound is ε_I + ε_g of one round, EpsTotal composes the run as min(ε_P, T·ε_I) + T·ε_g " +
	"(send sets are post-processing of the PRR vector; ε_g charged once per round as the paper does, " +
	"though Thm 3 bounds one fake gradient); rating values are hidden only by Langevin noise (no ε claimed)"

// sdmfNote is SDMF's note: sdcfNote and the limit the grid attack shows.
const sdmfNote = "no ε bounds existence against this server (EpsRound and EpsTotal are Inf; the paper's figures are " +
	"stats eps_round_paper and eps_total_paper, as the paper computes them, not a bound): real errors are sent " +
	"untruncated while Thm 3's ε_g assumes every error lies in [−α, α], and " + sdcfNote +
	"; the existence protection assumes the server cannot recover values: " +
	"at the shipped temperature it can (u[0] = 1 fixes u, so each upload's implied rating is recovered), real uploads' ratings " +
	"lie on the rating grid and the fakes' do not, and `privrec audit --attack grid` infers existence beyond the ε_P bound"

var (
	sdmfClaim   = model.Privacy{Unit: "rating existence", Trusted: "nobody", Note: sdmfNote, Neighbouring: NeighboursRatingExistence}
	sdbprClaim  = model.Privacy{Unit: "rating existence", Trusted: "nobody", Note: sdcfNote + "; no ε_g (no fake gradients)", Neighbouring: NeighboursRatingExistence}
	isgldClaim  = model.Privacy{Unit: "rating value", Trusted: "nobody", Note: "Laplace input perturbation on the device, one release; existence and the model are not protected", Neighbouring: NeighboursRatingValue}
	sgldNoClaim = model.Privacy{Unit: "none", Trusted: "everyone", Note: "ratings stay on the devices, but each upload shows which items its user rated"}
)

// sdcfFields names the fields of an sdcf.Config for a method that is
// private or not and has fake gradients (ε_g) or not.
func sdcfFields(private, epsG bool) func(c *sdcf.Config) []Field {
	return func(c *sdcf.Config) []Field {
		fs := []Field{
			intF("dim", &c.Dim, "latent dimension K"),
			intF("epochs", &c.Rounds, "training iterations T (protocol rounds)"),
			floatF("lr0", &c.LR0, "initial step η_0 of η_t = η_0/t^γ (on mean gradients)"),
			floatF("gamma", &c.Gamma, "step decay γ"),
			floatF("lambda", &c.Lambda, "fixed prior precision Λ_u = Λ_v (0: draw per dimension from Gamma(lambda-shape, rate lambda-rate), the paper's)"),
			floatF("lambda-shape", &c.LambdaShape, "shape of the Gamma prior of the precisions Λ_u, Λ_v (with lambda 0)"),
			floatF("lambda-rate", &c.LambdaRate, "rate of that prior (the paper's Gamma(1, 100))"),
			floatF("temp", &c.Temp, "Langevin noise N(0, temp·η_t I) per gradient (1: eq. (5) literally)"),
			floatF("init", &c.InitScale, "standard deviation of the initial factors"),
			boolF("item-bias", &c.ItemBias, "fix u_i[0] = 1 on the device so that v_j[0] learns the item offset"),
			floatF("server-step", &c.ServerStep, "κ: the server moves v_j by κ × the mean data gradient received (prior applied once)"),
			floatF("server-pseudo", &c.ServerPseudo, "n0: the server averages an item's uploads over n + n0 (damps items few clients sent)"),
			floatF("dropout", &c.Dropout, "probability that a client is offline in a round"),
			intF("workers", &c.Workers, "parallel client workers (0: all cores); results do not depend on it"),
		}
		if private {
			fs = append(fs, floatF("eps-i", &c.EpsI, "ε_I of one round's item randomized response (Thm 2); ε_P = 2·ε_I bounds all rounds"),
				floatF("z", &c.Z, "expected uploads per client and round, eq. (12) (0: |R|/|U|)"))
		}
		if epsG {
			fs = append(fs, floatF("eps-g", &c.EpsG, "ε_g of one round's fake gradients (Thm 3), sets the truncation α"))
		}
		return fs
	}
}

// sdcfVariant is one method of the SDCF family on an sdcf.Config.
type sdcfVariant struct {
	name, summary string
	loss          sdcf.Loss
	private, epsG bool
	claim         model.Privacy
}

// defaults returns the variant's default config.
//
// sdmf-alpha-inf defaults to κ = 2 rather than SDMF's 4: its untruncated
// fake errors feed back (noisier V, larger errors, wider fakes), and at κ = 4
// it is far noisier early on sparse data (ml-latest-small after 10 rounds:
// RMSE 1.285 against 1.014 at κ = 2 and 0.952 at κ = 1), while on the ML-100K
// validation split κ = 2 and 4 differ by 0.003.
func (v sdcfVariant) defaults() sdcf.Config {
	c := sdcf.DefaultConfig(v.loss, v.private)
	if v.private && !v.epsG && v.loss == sdcf.Squared {
		c.ServerStep = 2
	}
	if !v.epsG {
		c.EpsG = 0
	}
	return c
}

// config returns cfg with the variant's fixed fields and seed, validated.
func (v sdcfVariant) config(cfg sdcf.Config, seed uint64) (sdcf.Config, error) {
	c := cfg
	c.Loss, c.Private, c.Seed = v.loss, v.private, seed
	if !v.epsG {
		c.EpsG = 0
	} else if !(c.EpsG > 0) {
		return c, paramErr("eps-g = %g must be positive (sdmf-alpha-inf is ε_g = 0)", c.EpsG)
	}
	if !(c.ServerStep > 0) {
		return c, paramErr("server-step = %g must be positive", c.ServerStep)
	}
	return c, invalid(c.Validate())
}

// fitSDCF trains cfg and fills the Result.
func fitSDCF(ctx context.Context, train *ratings.Dataset, cfg sdcf.Config, claim model.Privacy, hook Hook) (*model.Model, *Result, error) {
	var h func(sdcf.RoundStats)
	if hook != nil {
		h = func(s sdcf.RoundStats) {
			hook(Progress{Epoch: s.Round, Epochs: s.Rounds, TrainRMSE: s.TrainRMSE, EpsSpent: sdcfSpent(cfg, s.Round)})
		}
	}
	m, rep, err := sdcf.Train(ctx, train, cfg, h)
	if err != nil {
		return nil, nil, err
	}
	return m, sdcfResult(cfg, claim, rep), nil
}

// sdcfResult is the Result of a run with cfg.
func sdcfResult(cfg sdcf.Config, claim model.Privacy, rep *sdcf.Report) *Result {
	priv := claim
	stats := map[string]float64{
		"train_rmse": rep.TrainRMSE, "uploads_per_client_round": rep.UploadsPerClientRound,
		"participation": rep.Participation, "clients": float64(rep.Clients),
		"unrated_fraction": rep.UnratedFraction,
	}
	if cfg.Private {
		priv.EpsRound = rep.EpsI.Round + rep.EpsG.Round
		priv.EpsTotal = rep.ExistenceTotal
		stats["eps_round_paper"], stats["eps_total_paper"] = priv.EpsRound, priv.EpsTotal
		if sdcfUnbounded(cfg) {
			priv.EpsRound, priv.EpsTotal = math.Inf(1), math.Inf(1)
		}
		priv.Note = fmt.Sprintf("%s; this run: ε_I %g/round, %g total; ε_g %g/round, %g total; ε_P %g total",
			claim.Note, rep.EpsI.Round, rep.EpsI.Total, rep.EpsG.Round, rep.EpsG.Total, rep.EpsP.Total)
		for k, v := range map[string]float64{
			"eps_g_round": rep.EpsG.Round, "eps_g_total": rep.EpsG.Total,
			"eps_i_round": rep.EpsI.Round, "eps_i_total": rep.EpsI.Total,
			"eps_p_round": rep.EpsP.Round, "eps_p_total": rep.EpsP.Total,
			"z": rep.Z, "eq12_expected_uploads": rep.ExpectedUploads,
			"expected_unrated_fraction": rep.ExpectedUnrated,
		} {
			stats[k] = v
		}
	}
	return &Result{Privacy: priv, Stats: stats}
}

// sdcfClients builds the clients of cfg on train; finish, when not nil,
// amends the Result.
func sdcfClients(train *ratings.Dataset, cfg sdcf.Config, claim model.Privacy, finish func(*Result)) (*Clients, error) {
	cl, err := sdcf.NewClients(train, cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{List: cl.List, Finish: func(v []float32) (*model.Model, *Result, error) {
		m, rep, err := cl.Finish(v)
		if err != nil {
			return nil, nil, err
		}
		res := sdcfResult(cfg, claim, rep)
		if finish != nil {
			finish(res)
		}
		return m, res, nil
	}}, nil
}

// sdcfServer builds the server of cfg (the scale plays no part), which
// accounts what the run spent (accounted).
func sdcfServer(cfg sdcf.Config, numItems int) (protocol.Stateful, error) {
	srv, err := sdcf.NewServer(cfg, ratings.AnonymousItems(numItems, ratings.Scale{}), cfg.Seed)
	if err != nil || !cfg.Private {
		return srv, err
	}
	return &accounted{Stateful: srv, total: func(t int) float64 { return sdcfSpent(cfg, t) }, round: sdcfRoundEps(cfg)}, nil
}

// sdcfSpent is the existence ε a user has spent after uploading in t
// rounds of cfg, the headline: the paper's figure (sdcfSpentPaper) where
// it bounds the unit, +Inf where it does not (sdcfUnbounded).
func sdcfSpent(cfg sdcf.Config, t int) float64 {
	if sdcfUnbounded(cfg) {
		return math.Inf(1)
	}
	return sdcfSpentPaper(cfg, t)
}

// sdcfUnbounded says whether cfg's existence ε is not a bound: a private
// run with the squared loss, whose uploads carry the rating values the
// grid attack reads existence from and whose real errors are not
// truncated to [−α, α] as Thm 3's ε_g assumes.
func sdcfUnbounded(cfg sdcf.Config) bool { return cfg.Private && cfg.Loss == sdcf.Squared }

// sdcfSpentPaper is the existence ε after t rounds as the paper computes
// it and the clients' ledger composes it: min(ε_P, t·ε_I) + t·ε_g (ε_g for
// the squared loss only).
func sdcfSpentPaper(cfg sdcf.Config, t int) float64 {
	if !cfg.Private {
		return 0
	}
	x := float64(t)
	return math.Min(cfg.EffectiveEpsP(), x*cfg.EpsI) + x*sdcfEpsG(cfg)
}

// sdcfRoundEps is one round's existence ε, the headline: ε_I + ε_g as
// the paper computes it, +Inf where that is not a bound (sdcfUnbounded).
func sdcfRoundEps(cfg sdcf.Config) float64 {
	if sdcfUnbounded(cfg) {
		return math.Inf(1)
	}
	return cfg.EpsI + sdcfEpsG(cfg)
}

// sdcfEpsG is the ε_g a round charges: the fake gradients' (squared
// loss only).
func sdcfEpsG(cfg sdcf.Config) float64 {
	if cfg.Loss != sdcf.Squared {
		return 0
	}
	return cfg.EpsG
}

// accounted is the server of a method whose privacy figures follow from
// its public configuration and the number of rounds released (the SDCF
// family: the clients' randomized response and noise are calibrated by
// the config alone), so that a deployment's ledger reports the ε the
// clients' own report gives: protocol.Spent and protocol.RoundSpent.
// Each round's total is that of a user who uploaded in every round so
// far, the worst case; the clients' report takes the maximum over the
// users it ran, equal when one of them answered every round.
type accounted struct {
	protocol.Stateful
	total func(t int) float64 // ε after t rounds
	round float64             // ε of one round alone
}

// Spent implements protocol.Spent, at δ 0 (pure ε-DP).
func (a *accounted) Spent() (eps, delta float64, ok bool) { return a.total(a.Round()), 0, true }

// RoundSpent implements protocol.RoundSpent.
func (a *accounted) RoundSpent() (eps float64, ok bool) { return a.round, a.Round() > 0 }

// noAggregation is SecureSum of the SDCF family: the server reads single
// uploads (the existence protection is the clients' randomized response).
func noAggregation[C any](*C) protocol.Aggregation { return protocol.AggOff }

func init() {
	for _, v := range []sdcfVariant{
		{"sgld-mf", "SGLD matrix factorization between devices and a server (SDCF §2.3, non-private)", sdcf.Squared, false, false, sgldNoClaim},
		{"sdmf", "SDMF (SDCF Alg. 1-2): SGLD gradients, two-stage randomized response, truncated fake gradients", sdcf.Squared, true, true, sdmfClaim},
		{"sdmf-alpha-inf", "SDMF with α = ∞ (SDCF §4.1): untruncated fake gradients, ε_g = 0", sdcf.Squared, true, false, sdmfClaim},
		{"bpr-sgld", "BPR-MF trained by SGLD between devices and a server (SDCF §4.1 Task 2, non-private; ranks, no ratings)", sdcf.BPR, false, false, sgldNoClaim},
		{"sd-bprmf", "SD-BPRMF (SDCF Lemma 2): BPR by SGLD with two-stage randomized response (ranks, no ratings)", sdcf.BPR, true, false, sdbprClaim},
	} {
		fed := federated(
			func(cfg *sdcf.Config, numItems int, _ ratings.Scale, seed uint64) (protocol.Stateful, error) {
				c, err := v.config(*cfg, seed)
				if err != nil {
					return nil, err
				}
				return sdcfServer(c, numItems)
			},
			func(cfg *sdcf.Config, train *ratings.Dataset, seed uint64) (*Clients, error) {
				c, err := v.config(*cfg, seed)
				if err != nil {
					return nil, err
				}
				return sdcfClients(train, c, v.claim, nil)
			}, noAggregation[sdcf.Config])
		fed.Rounds = roundsOf(func(cfg *sdcf.Config) (int, error) {
			c, err := v.config(*cfg, 0)
			if err != nil {
				return 0, err
			}
			return sdcf.Rounds(c)
		})
		define(Spec{Name: v.name, Summary: v.summary, Claim: v.claim, Ranks: v.loss == sdcf.BPR, Federated: fed},
			v.defaults, sdcfFields(v.private, v.epsG),
			func(ctx context.Context, train *ratings.Dataset, cfg *sdcf.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
				c, err := v.config(*cfg, seed)
				if err != nil {
					return nil, nil, err
				}
				return fitSDCF(ctx, train, c, v.claim, hook)
			})
	}
	isgld := sdcfVariant{loss: sdcf.Squared}
	// ISGLD runs on the client/server protocol too: the clients perturb
	// their ratings once, on the device, before training.
	isgldFed := federated(
		func(cfg *sdcf.ISGLDConfig, numItems int, _ ratings.Scale, seed uint64) (protocol.Stateful, error) {
			c, err := isgld.config(cfg.Config, seed)
			if err != nil {
				return nil, err
			}
			srv, err := sdcfServer(c, numItems)
			if err != nil {
				return nil, err
			}
			// The clients perturbed every rating once, before the first
			// round: the whole run spends ε.
			eps := cfg.Eps
			return &accounted{Stateful: srv, total: func(int) float64 { return eps }, round: eps}, nil
		},
		func(cfg *sdcf.ISGLDConfig, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := isgld.config(cfg.Config, seed)
			if err != nil {
				return nil, err
			}
			noisy, err := sdcf.PerturbRatings(rng.New(seed, rngISGLD), train, cfg.Eps)
			if err != nil {
				return nil, invalid(err)
			}
			eps := cfg.Eps
			return sdcfClients(noisy, c, isgldClaim, func(res *Result) {
				res.Privacy.EpsRound, res.Privacy.EpsTotal = eps, eps
			})
		}, noAggregation[sdcf.ISGLDConfig])
	isgldFed.Rounds = roundsOf(func(cfg *sdcf.ISGLDConfig) (int, error) {
		c, err := isgld.config(cfg.Config, 0)
		if err != nil {
			return 0, err
		}
		return sdcf.Rounds(c)
	})
	define(Spec{
		Name:      "isgld",
		Summary:   "ISGLD (SDCF §4.1): Laplace noise on each rating on the device, then SGLD MF",
		Claim:     isgldClaim,
		Federated: isgldFed,
	}, sdcf.DefaultISGLDConfig,
		func(c *sdcf.ISGLDConfig) []Field {
			return append(sdcfFields(false, false)(&c.Config),
				floatF("eps", &c.Eps, "ε of every rating value, spent once on the device (Laplace input perturbation)"))
		},
		func(ctx context.Context, train *ratings.Dataset, cfg *sdcf.ISGLDConfig, seed uint64, hook Hook) (*model.Model, *Result, error) {
			c, err := isgld.config(cfg.Config, seed)
			if err != nil {
				return nil, nil, err
			}
			noisy, err := sdcf.PerturbRatings(rng.New(seed, rngISGLD), train, cfg.Eps)
			if err != nil {
				return nil, nil, invalid(err)
			}
			m, res, err := fitSDCF(ctx, noisy, c, isgldClaim, hook)
			if err != nil {
				return nil, nil, err
			}
			res.Privacy.EpsRound, res.Privacy.EpsTotal = cfg.Eps, cfg.Eps
			return m, res, nil
		})
}

// rngISGLD labels ISGLD's input-perturbation stream.
const rngISGLD uint64 = 0x6973_676c // "isgl"
