package method

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/federated"
	"github.com/privrec/privrec/ratings"
)

// federatedClaim is the claim of the untrusted-server Laplace family.
var federatedClaim = Privacy{
	Unit: "rating value", Trusted: "nobody",
	Note: "per-item noisy gradient sums; ε per round for the most exposed rating, total by basic composition over the rounds " +
		"(the paper's Thm 2 states it for one round); holds against a server that sees only the per-item sums, which secure aggregation " +
		"(secagg=true, the default; its ideal functionality in process, masked sums in a deployment) ensures; with secagg=false the server " +
		"reads single uploads, carrying 1/n_j of the noise (no finite ε), and learns which items each user rated",
}

// federatedParams are the parameters of the federated methods.
func federatedParams(v federated.Variant) []Param {
	def := federated.DefaultConfig(v)
	ps := []Param{
		{"dim", strconv.Itoa(def.Dim), "latent dimension K"},
		{"epochs", strconv.Itoa(def.Rounds), "training rounds T"},
		{"lr", ftoa(def.LearnRate), "initial item learning rate η (÷5 after 25% and 75% of the rounds), per public count n_j + pseudo"},
		{"lr-user", ftoa(def.UserLearnRate), "initial user learning rate on the device (0: lr)"},
		{"pseudo", ftoa(def.Pseudo), "pseudo count n0 of the step preconditioning η/(n + n0)"},
		{"reg", ftoa(def.Reg), "L2 regularization λ"},
		{"init", ftoa(def.InitScale), "standard deviation of the initial factors"},
		{"eps", ftoa(def.Eps), "maximum per-round budget ε (the budget of a rating of weight 1)"},
		{"eps-total", "0", "total budget of a weight-1 rating over the run (0: no cap); users out of budget upload nothing"},
		{"f-uc", ftoa(def.Spec.User.Conservative), "fraction of conservative users (Table 2)"},
		{"f-um", ftoa(def.Spec.User.Moderate), "fraction of moderate users"},
		{"eps-uc", ftoa(def.Spec.User.Low), "lowest weight of conservative users"},
		{"eps-um", ftoa(def.Spec.User.Mid), "lowest weight of moderate users"},
		{"f-ic", ftoa(def.Spec.Item.Conservative), "fraction of highly sensitive items"},
		{"f-im", ftoa(def.Spec.Item.Moderate), "fraction of moderately sensitive items"},
		{"eps-ic", ftoa(def.Spec.Item.Low), "lowest weight of highly sensitive items"},
		{"eps-im", ftoa(def.Spec.Item.Mid), "lowest weight of moderately sensitive items"},
		{"spec-seed", strconv.FormatUint(def.SpecSeed, 10), "seed of the privacy specification"},
		{"noise", def.Noise.String(), "noise shares: gamma (exact Laplace, hides the noise from the server) or mixture (the paper's, leaks to a server that knows h)"},
		{"secagg", "true", "secure aggregation: the server sees only per-item sums (false: it reads every user's upload, and the claim does not hold)"},
		{"workers", "0", "parallel client workers (0: all cores); results do not depend on it"},
	}
	if v == federated.PDPMF {
		ps = append(ps, Param{"threshold", def.Threshold, "sampling threshold t: mean, min, max or a number"})
	}
	if v == federated.HDPMF {
		ps = append(ps, Param{"rescale", "true", "divide predictions by W_ij (false: the HDPMF-R ablation of §5.2.4)"})
	}
	return ps
}

// federatedConfig reads the params of p.
func federatedConfig(v federated.Variant, p Params, seed uint64) (federated.Config, error) {
	cfg := federated.DefaultConfig(v)
	r := p.Reader()
	cfg.Dim, cfg.Rounds = r.Int("dim"), r.Int("epochs")
	cfg.LearnRate, cfg.UserLearnRate = r.Float("lr"), r.Float("lr-user")
	cfg.Pseudo, cfg.Reg, cfg.InitScale = r.Float("pseudo"), r.Float("reg"), r.Float("init")
	cfg.Eps, cfg.EpsTotal = r.Float("eps"), r.Float("eps-total")
	cfg.Spec.User.Conservative, cfg.Spec.User.Moderate = r.Float("f-uc"), r.Float("f-um")
	cfg.Spec.User.Low, cfg.Spec.User.Mid = r.Float("eps-uc"), r.Float("eps-um")
	cfg.Spec.Item.Conservative, cfg.Spec.Item.Moderate = r.Float("f-ic"), r.Float("f-im")
	cfg.Spec.Item.Low, cfg.Spec.Item.Mid = r.Float("eps-ic"), r.Float("eps-im")
	cfg.Spec.EpsMax = cfg.Eps
	cfg.Workers = r.Int("workers")
	cfg.SecureAggregation = r.Bool("secagg")
	specSeed := r.String("spec-seed")
	noise := r.String("noise")
	if v == federated.PDPMF {
		cfg.Threshold = r.String("threshold")
	}
	if v == federated.HDPMF && !r.Bool("rescale") {
		cfg.Variant = federated.HDPMFR
	}
	if err := r.Err(); err != nil {
		return cfg, err
	}
	s, err := strconv.ParseUint(strings.TrimSpace(specSeed), 10, 64)
	if err != nil {
		return cfg, paramErr("spec-seed = %q is not a non-negative integer", specSeed)
	}
	cfg.SpecSeed = s
	if cfg.Noise, err = dp.ParseShareScheme(noise); err != nil {
		return cfg, paramErr("noise = %q, want gamma or mixture", noise)
	}
	cfg.Seed = seed
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrParam, err)
	}
	return cfg, nil
}

func registerFederated(v federated.Variant, summary string) {
	register(Spec{
		Name: v.String(), Summary: summary, Claim: federatedClaim, Params: federatedParams(v),
		Fit: func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
			cfg, err := federatedConfig(v, p, seed)
			if err != nil {
				return nil, nil, err
			}
			if hook != nil {
				cfg.OnRound = func(s federated.RoundStats) {
					if s.Phase == "train" {
						hook(Progress{Epoch: s.Round, Epochs: s.Rounds, TrainRMSE: math.NaN(), EpsSpent: s.EpsSpent})
					}
				}
			}
			m, rep, err := federated.Train(ctx, train, cfg)
			if err != nil {
				return nil, nil, err
			}
			priv := federatedClaim
			priv.EpsRound, priv.EpsTotal, priv.Delta = rep.EpsRound, rep.EpsTotal, 0
			if !cfg.SecureAggregation {
				priv.Note = "secagg=false: the server reads single uploads, so the ε below holds only for an observer of the per-item sums, " +
					"not for the server; " + priv.Note
			}
			priv.Note += fmt.Sprintf("; advanced composition: ε %.4g at δ %.2g", rep.AdvEpsTotal, rep.AdvDelta)
			if v == federated.PDPMF {
				priv.Note += fmt.Sprintf("; sampling threshold t = %.4g, kept %.1f%% of the ratings", rep.Threshold, 100*rep.Kept)
			}
			stats := map[string]float64{
				"noise_scale": rep.NoiseScale, "eps_total_advanced": rep.AdvEpsTotal,
				"kept_fraction": rep.Kept, "refused": float64(rep.Refused),
			}
			if v == federated.PDPMF {
				stats["threshold"] = rep.Threshold
			}
			return m, &Result{Privacy: priv, Stats: stats}, nil
		},
	})
}

func init() {
	registerFederated(federated.HDPMF, "HDPMF: decentralized MF with heterogeneous DP (stretch W⊙R, distributed Laplace gradient noise, rescaled predictions)")
	// HDPMF-R is hdpmf with rescale=false: as a method of its own it could
	// not meet the registry's bar of beating the global mean, by design.
	registerFederated(federated.DPMF, "DPMF: decentralized MF with uniform DP at the smallest budget of all ratings")
	registerFederated(federated.PDPMF, "PDPMF: decentralized MF with Jorgensen sampling at threshold t, then distributed Laplace noise")
}
