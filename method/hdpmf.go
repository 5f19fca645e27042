package method

import (
	"context"
	"fmt"
	"math"
	"reflect"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// hdpmfClaim is the claim of the untrusted-server Laplace family: the
// proven one (see the hdpmf package documentation, Privacy).
var hdpmfClaim = model.Privacy{
	Unit: "user's rating values", Trusted: "nobody",
	Note: "per-item noisy gradient sums; the unit is all of one user's rating values (which items a user rated is not protected: " +
		"the setup round's counts are exact); each device clips its whole noise-free upload to user-clip ratings' worth " +
		"(L2 C·Δ, L1 C·√K·Δ), so one user's values move a round's release by at most 2C·Δ (L2), 2C·√K·Δ (L1): " +
		"ε per round C times the per-round ε of a weight-1 rating, composed over the rounds by the smaller of basic composition " +
		"(δ = 0) and zCDP (pure ε-DP is ε²/2-zCDP; δ = delta); holds against a server that sees only the per-item sums, which " +
		"secure aggregation (secagg=ideal, train's and evaluate's: its ideal functionality in process, with float gamma shares; secagg=masked, privrec serve's: SecAgg+ " +
		"masked integer sums with distributed Skellam noise, (ε, δ) by Rényi DP at the clip's integer sensitivity) ensures; " +
		"with secagg=off the server reads single uploads carrying 1/n_j of the noise: no ε against it (Inf). " +
		"As the paper computes it (stats eps_round_paper, eps_total_paper): W_ij·ε per rating per round, T·W_ij·ε in total, " +
		"assuming a rating moves only its item's row; not an upper bound, since from round 2 u_i carries a changed rating into " +
		"every row of the user (privrec audit --attack canary)",
	Neighbouring: NeighboursUserValues,
}

// schemeValue is a field holding a dp.ShareScheme.
type schemeValue struct{ p *dp.ShareScheme }

func (v schemeValue) String() string { return v.p.String() }
func (v schemeValue) Type() string   { return "gamma|mixture" }
func (v schemeValue) Get() any       { return v.p.String() }
func (v schemeValue) addr() uintptr  { return reflect.ValueOf(v.p).Pointer() }
func (v schemeValue) Set(s string) error {
	sc, err := dp.ParseShareScheme(s)
	if err != nil {
		return fmt.Errorf("want gamma or mixture")
	}
	*v.p = sc
	return nil
}

func schemeF(name string, p *dp.ShareScheme, usage string) Field {
	return Field{Name: name, Usage: usage, Value: schemeValue{p}}
}

// aggValue is a field holding a protocol.Aggregation.
type aggValue struct{ p *protocol.Aggregation }

func (v aggValue) String() string { return v.p.String() }
func (v aggValue) Type() string   { return "masked|ideal|off" }
func (v aggValue) Get() any       { return v.p.String() }
func (v aggValue) addr() uintptr  { return reflect.ValueOf(v.p).Pointer() }
func (v aggValue) Set(s string) error {
	a, err := protocol.ParseAggregation(s)
	if err != nil {
		return fmt.Errorf("want masked, ideal or off")
	}
	*v.p = a
	return nil
}

func aggF(name string, p *protocol.Aggregation, usage string) Field {
	return Field{Name: name, Usage: usage, Value: aggValue{p}}
}

// hdpmfFields names the fields of a hdpmf.Config for variant v,
// with help true for that variant.
func hdpmfFields(v hdpmf.Variant) func(c *hdpmf.Config) []Field {
	return func(c *hdpmf.Config) []Field {
		eps := "ε of every rating in every round as the paper computes it (DPMF's uniform budget: the smallest of the specification); the proven user-level ε a round is user-clip times it"
		switch v {
		case hdpmf.HDPMF:
			eps = "ε of one round for a rating of weight 1 (the largest budget) as the paper computes it; a rating of weight W_ij spends W_ij·ε a round; the proven user-level ε a round is user-clip × eps"
		case hdpmf.PDPMF:
			eps = "ε of one round for the most exposed rating: the sampled ratings' personal budgets are capped at the threshold"
		}
		fs := []Field{
			intF("dim", &c.Dim, "latent dimension K"),
			intF("epochs", &c.Rounds, "training rounds T (one protocol round each)"),
			floatF("lr", &c.LearnRate, "initial item learning rate η (÷5 after 25% and 75% of the rounds), per public count n_j + pseudo"),
			floatF("lr-user", &c.UserLearnRate, "initial user learning rate on the device (0: lr)"),
			floatF("pseudo", &c.Pseudo, "pseudo count n0 of the step preconditioning η/(n + n0)"),
			floatF("reg", &c.Reg, "L2 regularization λ"),
			floatF("init", &c.InitScale, "standard deviation of the initial factors"),
			floatF("eps", &c.Eps, eps),
			floatF("eps-total", &c.EpsTotal, "total ε cap of a weight-1 rating over the run (0: no cap, T·eps is spent); users out of budget upload nothing"),
			floatF("f-uc", &c.Spec.User.Conservative, "fraction of conservative users (HDPMF Table 2)"),
			floatF("f-um", &c.Spec.User.Moderate, "fraction of moderate users"),
			floatF("eps-uc", &c.Spec.User.Low, "lowest weight of conservative users, in (0, 1]"),
			floatF("eps-um", &c.Spec.User.Mid, "lowest weight of moderate users, in (0, 1]"),
			floatF("f-ic", &c.Spec.Item.Conservative, "fraction of highly sensitive items"),
			floatF("f-im", &c.Spec.Item.Moderate, "fraction of moderately sensitive items"),
			floatF("eps-ic", &c.Spec.Item.Low, "lowest weight of highly sensitive items, in (0, 1]"),
			floatF("eps-im", &c.Spec.Item.Mid, "lowest weight of moderately sensitive items, in (0, 1]"),
			uintF("spec-seed", &c.SpecSeed, "seed of the simulated privacy specification (public: it is not the data)"),
			schemeF("noise", &c.Noise, "noise shares: gamma (exact Laplace, hides the noise from the server) or mixture (the paper's, leaks to a server that knows h)"),
			floatF("delta", &c.Delta, "δ of the integer path's (ε, δ) guarantee with secagg=masked, and of the zCDP composition of the user-level total (0: 1e-6)"),
			floatF("user-clip", &c.UserClip, "C: each round a device scales its whole noise-free upload to at most C ratings' worth (L2 C·Δ, L1 C·√K·Δ), so that one user's rating values spend C·eps a round: the proven figure (0: no clip and no proven ε)"),
			boolF("paper-predict", &c.PaperPredict, "keep the paper's prediction: publish V itself and predict u·v/W_ij with each device's gradient-trained u (for reproducing the paper; default: a noise-shrunk table and a fold-in, as privrec recommend does)"),
			aggF("secagg", &c.Aggregation, "aggregation: masked (secure aggregation with quantized uploads and Skellam noise: the server sees only sums), ideal (in-process ideal functionality with float gamma shares) or off (the server reads every upload, and the claim does not hold)"),
			intF("workers", &c.Workers, "parallel client workers (0: all cores); results do not depend on it"),
		}
		switch v {
		case hdpmf.PDPMF:
			fs = append(fs, textF("threshold", &c.Threshold, "sampling threshold t: mean, min, max of the weights' budgets, or a number"))
		case hdpmf.HDPMF:
			fs = append(fs, boolFuncF("rescale",
				func() bool { return c.Variant != hdpmf.HDPMFR },
				func(b bool) {
					c.Variant = hdpmf.HDPMF
					if !b {
						c.Variant = hdpmf.HDPMFR
					}
				}, "divide predictions by W_ij (false: the HDPMF-R ablation of §5.2.4)"))
		}
		return fs
	}
}

// hdpmfConfig returns cfg with the method's fixed fields and seed,
// validated.
func hdpmfConfig(cfg *hdpmf.Config, seed uint64) (hdpmf.Config, error) {
	c := *cfg
	c.Spec.EpsMax = c.Eps
	c.Seed = seed
	return c, invalid(c.Validate())
}

// hdpmfResult is the Result of a run of variant v with config c: the
// proven user-level figures as the headline, the paper's per-rating ones
// in Stats, and no ε against the server at secagg=off.
func hdpmfResult(v hdpmf.Variant, c hdpmf.Config, rep *hdpmf.Report) *Result {
	priv := hdpmfClaim
	priv.EpsRound, priv.EpsTotal, priv.Delta = rep.UserEpsRound, rep.UserEpsTotal, rep.UserDelta
	priv.Aggregation, priv.Noise = rep.Aggregation, rep.Noise
	paper := fmt.Sprintf("as the paper computes it (per rating, not a bound): ε %.4g per round, %.4g in total", rep.EpsRound, rep.EpsTotal)
	if rep.Noise == "skellam" {
		paper += fmt.Sprintf(" at δ %.2g", rep.Delta)
	}
	if !c.Aggregation.Secure() {
		priv.EpsRound, priv.EpsTotal, priv.Delta = math.Inf(1), math.Inf(1), 0
		priv.Note = NotApplicable("secagg=off: the server reads single uploads, each carrying 1/n_j of an item's noise, "+
			fmt.Sprintf("so no ε holds against it (against an observer of the per-item sums only: user-level %.4g in total)", rep.UserEpsTotal)) +
			"; " + priv.Note
	}
	if c.UserClip == 0 {
		priv.Note = "user-clip=0: no clip, so no proven ε (Inf); " + priv.Note
	}
	if rep.Noise == "skellam" {
		priv.Note += "; integer path: uploads quantized (clipped rows, unbiased rounding) over every item and summed mod 2^32 " +
			"by secure aggregation, with distributed Skellam noise calibrated so that the rounds compose in Rényi DP to " +
			"the float path's proven user-level total at δ (the smaller of basic composition and zCDP; " +
			"without a user clip, the paper's T·ε per rating)"
	} else {
		priv.Note += fmt.Sprintf("; the paper's advanced composition: ε %.4g at δ %.2g", rep.AdvEpsTotal, rep.AdvDelta)
	}
	priv.Note += "; " + paper
	if v == hdpmf.PDPMF {
		priv.Note += fmt.Sprintf("; sampling threshold t = %.4g, kept %.1f%% of the ratings", rep.Threshold, 100*rep.Kept)
	}
	stats := map[string]float64{
		"noise_scale": rep.NoiseScale, "eps_total_advanced": rep.AdvEpsTotal,
		"kept_fraction": rep.Kept, "refused": float64(rep.Refused),
		"eps_round_paper": rep.EpsRound, "eps_total_paper": rep.EpsTotal,
		"user_clip": c.UserClip,
	}
	if v == hdpmf.PDPMF {
		stats["threshold"] = rep.Threshold
	}
	return &Result{Privacy: priv, Stats: stats}
}

// NotApplicable returns a privacy note saying that the run's ε does not
// hold against the server, and why: what a Result of a run whose privacy
// rests on an aggregation it did not run reports (with ε +Inf).
func NotApplicable(why string) string { return "ε not applicable against the server: " + why }

// hdpmfFederated is the client/server protocol of variant v in halves.
func hdpmfFederated(v hdpmf.Variant) *Federated {
	f := standard(hdpmfConfig, hdpmf.NewServer, hdpmf.NewClients,
		func(cl *hdpmf.Clients) []protocol.Client { return cl.List }, (*hdpmf.Clients).Finish,
		func(c hdpmf.Config, rep *hdpmf.Report, _ *ratings.Dataset) *Result { return hdpmfResult(v, c, rep) },
		func(cfg *hdpmf.Config) protocol.Aggregation { return cfg.Aggregation })
	f.Rounds = roundsOf(func(cfg *hdpmf.Config) (int, error) {
		c, err := hdpmfConfig(cfg, 0)
		if err != nil {
			return 0, err
		}
		return hdpmf.Rounds(c)
	})
	return f
}

func defineHDPMF(v hdpmf.Variant, summary string) {
	define(Spec{Name: v.String(), Summary: summary, Claim: hdpmfClaim, Federated: hdpmfFederated(v)},
		func() hdpmf.Config { return hdpmf.DefaultConfig(v) }, hdpmfFields(v),
		func(ctx context.Context, train *ratings.Dataset, cfg *hdpmf.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
			c, err := hdpmfConfig(cfg, seed)
			if err != nil {
				return nil, nil, err
			}
			if hook != nil {
				c.OnRound = func(s hdpmf.RoundStats) {
					if s.Phase == "train" {
						hook(Progress{Epoch: s.Round, Epochs: s.Rounds, TrainRMSE: math.NaN(), EpsSpent: s.EpsSpent})
					}
				}
			}
			m, rep, err := hdpmf.Train(ctx, train, c)
			if err != nil {
				return nil, nil, err
			}
			return m, hdpmfResult(v, c, rep), nil
		})
}

func init() {
	defineHDPMF(hdpmf.HDPMF, "HDPMF: decentralized MF with heterogeneous DP (stretch W⊙R, distributed Laplace gradient noise, rescaled predictions)")
	// HDPMF-R is hdpmf with rescale=false: as a method of its own it could
	// not meet the registry's bar of beating the global mean, by design.
	defineHDPMF(hdpmf.DPMF, "DPMF: decentralized MF with uniform DP at the smallest budget of all ratings")
	defineHDPMF(hdpmf.PDPMF, "PDPMF: decentralized MF with Jorgensen sampling at threshold t, then distributed Laplace noise")
}
