package method

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// dpeaseClaim is the claim of dp-ease (see package dpease).
var dpeaseClaim = model.Privacy{
	Unit: "user", Trusted: "the aggregator that adds the noise to the sum (ideal secure aggregation); no one with a single upload",
	Note: "user-level joint DP over the whole run: two Gaussian releases, noisy item counts (indicators / √n_u, L2 sensitivity 1) " +
		"and the noisy Gram matrix of the top-M noisy-popular items (weights 1/max(n', c), upper triangle, L2 sensitivity " +
		"√((1+1/c)/2)), composed in zCDP and converted to (ε, δ); the EASE solve is post-processing; each device scores with " +
		"its own history, which never leaves it; hyperparameter tuning is not counted",
	Aggregation: "ideal", Noise: "gaussian",
}

// dpeaseFields names the fields of a dpease.Config.
func dpeaseFields(c *dpease.Config) []Field {
	return []Field{
		floatF("eps", &c.Eps, "user-level ε of the whole run (both releases)"),
		floatF("delta", &c.Delta, "user-level δ of the whole run"),
		intF("top-items", &c.TopItems, "M: items (largest noisy counts) in the released Gram matrix (0: by ε, 300 at ε ≤ 1 to 1000 at ε ≥ 10)"),
		intF("cap", &c.Cap, "c: a device's Gram weight is 1/max(n', c), n' its items among the top M"),
		floatF("frac-counts", &c.FracCounts, "share of the zCDP budget spent on the item counts"),
		floatF("lambda", &c.Lambda, "ridge λ of the EASE solve"),
		floatF("lambda-noise", &c.LambdaNoise, "ridge added per unit of the Gram noise's spectral scale σ·√M (negative: by ε, 6 at ε ≤ 1 to 5 at ε ≥ 10)"),
		floatF("pop-weight", &c.PopWeight, "weight of the normalized noisy popularity in every score, shrinkage toward DP popularity (negative: by ε, 0.12 at ε ≤ 1 to 0.04 at ε ≥ 10)"),
		boolF("seeded", &c.Seeded, "test mode: the noise is drawn from the run's seed (reproducible), not crypto/rand"),
		intF("workers", &c.Workers, "parallel client workers (0: all cores)"),
	}
}

// dpeaseResult is the Result of a run.
func dpeaseResult(c dpease.Config, rep *dpease.Report) *Result {
	p := dpeaseClaim
	p.EpsTotal, p.EpsRound, p.Delta = rep.Eps, rep.Eps, c.Delta
	p.Releases = rep.Ledger.Releases()
	p.Note = fmt.Sprintf("%s; %d releases, ρ = %.4g in total", p.Note, len(p.Releases), rep.Ledger.Rho())
	if !c.Seeded {
		p.Noise = "gaussian (crypto/rand)"
	} else {
		p.Noise = "gaussian (seeded test mode: reproducible, not private against whoever knows the seed)"
	}
	return &Result{Privacy: p, Stats: rep.Stats}
}

func dpeaseConfig(cfg *dpease.Config) (dpease.Config, error) {
	return *cfg, invalid(cfg.Validate())
}

func init() {
	fed := federated(
		func(cfg *dpease.Config, numItems int, _ ratings.Scale, seed uint64) (protocol.Stateful, error) {
			c, err := dpeaseConfig(cfg)
			if err != nil {
				return nil, err
			}
			return dpease.NewServer(c, numItems, seed)
		},
		func(cfg *dpease.Config, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := dpeaseConfig(cfg)
			if err != nil {
				return nil, err
			}
			// The clients' Finish needs the server's report: build a
			// twin server only for its ledger arithmetic (no data).
			acct, err := dpease.NewServer(c, train.NumItems(), seed)
			if err != nil {
				return nil, err
			}
			cl := dpease.NewClients(train, c)
			return &Clients{List: cl.List, Finish: func(v []float32) (*model.Model, *Result, error) {
				m, err := cl.Model(v)
				if err != nil {
					return nil, nil, err
				}
				return m, dpeaseResult(c, acct.PlannedReport()), nil
			}}, nil
		},
		func(*dpease.Config) protocol.Aggregation { return protocol.AggIdeal })
	define(Spec{
		Name:      "dp-ease",
		Summary:   "user-level (ε, δ) joint-DP EASE: noisy item counts and top-M Gram matrix, item-item ridge solve, scores on the device (ranks, no ratings)",
		Claim:     dpeaseClaim,
		Ranks:     true,
		Federated: fed,
	}, dpease.DefaultConfig, dpeaseFields,
		func(ctx context.Context, train *ratings.Dataset, cfg *dpease.Config, seed uint64, hook Hook) (*model.Model, *Result, error) {
			c, err := dpeaseConfig(cfg)
			if err != nil {
				return nil, nil, err
			}
			m, rep, err := dpease.Train(ctx, train, c, seed)
			if err != nil {
				return nil, nil, err
			}
			if hook != nil {
				hook(Progress{Epoch: 1, Epochs: 1, TrainRMSE: 0, EpsSpent: rep.Eps})
			}
			return m, dpeaseResult(c, rep), nil
		})
}
