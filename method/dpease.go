package method

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// dpeaseNeighbouring is dp-ease's neighbouring relation.
const dpeaseNeighbouring = NeighboursZeroOutUser

// dpeaseClaim is the claim of dp-ease (see package dpease): user-level
// (ε, δ) for the whole run, for datasets that differ by one user's whole
// history; trusted: nobody on the masked path (privrec serve's default:
// the server sees only SecAgg+ sums of the devices' quantized vectors, to
// which each device adds its Skellam noise share), the aggregator that
// adds the noise to the sum on the ideal path (in process). ε per round:
// the counts and the Gram are one release each, composed into the one
// total eps_total (which eps_round also reports); the Result's note gives
// each release's ε alone.
var dpeaseClaim = model.Privacy{
	Unit: "user", Trusted: "nobody with secagg=masked (the server sees only SecAgg+ sums of the devices' quantized vectors, each carrying " +
		"its device's Skellam noise share; privrec serve's default); with secagg=ideal (in process) the aggregator that adds the noise to the sum",
	Note: "user-level joint DP over the whole run, for datasets that differ by adding or removing one user's whole history: two " +
		"releases, noisy item counts (indicators / √n_u, L2 sensitivity 1) and the noisy Gram matrix of the top-M noisy-popular items " +
		"(weights 1/max(n', c), upper triangle, L2 sensitivity √((1+1/c)/2)), composed in zCDP (secagg=ideal: Gaussian noise added by " +
		"the aggregator) or by Rényi accounting of distributed Skellam noise with the quantization's slack (secagg=masked: dense " +
		"integer vectors, γ = 2^15/√(2ρ_t), each device adding its share drawn for ⌊ρ·N⌋ clients, N the clients counted at setup or " +
		"the roster) and converted to (ε, δ); eps_round is the total (both releases make one user-level total); the EASE solve is " +
		"post-processing; each device scores with its own history, which never leaves it; hyperparameter tuning is not counted",
	Aggregation: "ideal", Noise: "gaussian", Neighbouring: dpeaseNeighbouring,
}

// dpeaseFields names the fields of a dpease.Config.
func dpeaseFields(c *dpease.Config) []Field {
	return []Field{
		floatF("eps", &c.Eps, "user-level ε of the whole run (both releases)"),
		floatF("delta", &c.Delta, "user-level δ of the whole run"),
		intF("top-items", &c.TopItems, "M: items (largest noisy counts) in the released Gram matrix (0: by ε, 300 at ε ≤ 1 to 1000 at ε ≥ 10)"),
		intF("cap", &c.Cap, "c: a device's Gram weight is 1/max(n', c), n' its items among the top M"),
		floatF("frac-counts", &c.FracCounts, "share of the zCDP budget spent on the item counts (negative: by the public roster, 0.99 in popularity mode, else 0.1)"),
		floatF("lambda", &c.Lambda, "ridge λ of the EASE solve"),
		floatF("lambda-noise", &c.LambdaNoise, "ridge added per unit of the Gram noise's spectral scale σ·√M (negative: by ε, 6 at ε ≤ 1 to 5 at ε ≥ 10)"),
		floatF("pop-weight", &c.PopWeight, "weight of the normalized noisy popularity in every score, shrinkage toward DP popularity (negative: by ε, 0.12 at ε ≤ 1 to 0.04 at ε ≥ 10)"),
		floatF("pop-diag-snr", &c.PopDiagSNR, "k: when fewer than M items' noisy counts clear k·σ_c (few users for the budget), the top items' popularity comes from the Gram release's diagonal instead (post-processing; 0: never, inf: always)"),
		intF("roster", &c.Roster, "the public roster size N, the devices enrolled in the run; with frac-counts by roster it decides popularity mode before anything is released (0: in process, the training data's users; served, the devices enrolled when enrolment closes)"),
		boolF("shrink", &c.Shrink, "weigh the item-item part by the personalisation the released Gram carries (its signal over the known noise) and list DP popularity when the public roster is too small for the budget (false: the issue-33 rule)"),
		boolF("seeded", &c.Seeded, "test mode: the noise is drawn from the run's seed (reproducible), not crypto/rand"),
		intF("workers", &c.Workers, "parallel client workers (0: all cores)"),
		intF("cohort", &c.Cohort, "users asked per round, a cohort the server picks (0: every user, a roster run); each statistic is released over cohort-rounds disjoint cohorts, pooled after each (the model after each cohort), and each device answers at most one round of each, so ε is the roster's whatever the server picks"),
		intF("cohort-rounds", &c.CohortRounds, "cohorts (rounds) per statistic when cohort > 0 (0: 1); cohort × cohort-rounds ≥ the population lets every user take part"),
		aggF("secagg", &c.Aggregation, "aggregation: masked (secure aggregation for real: each device uploads its counts and Gram triangle quantized, with its share of distributed Skellam noise, and the server sees only the sums; privrec serve's default), ideal (the server receives only the sums and adds Gaussian noise; in process, the ideal functionality of secure aggregation) or off (the server reads every upload, and the claim does not hold against it)"),
	}
}

// dpeaseResult is the Result of a run of c, whose report gives each
// release's ε alone, with the item factors v of dimension dim.
func dpeaseResult(c dpease.Config, rep *dpease.Report, v []float32, dim int) *Result {
	p := dpeaseClaim
	p.EpsTotal, p.EpsRound, p.Delta, p.EpsReplace = rep.Eps, rep.Eps, c.Delta, rep.EpsReplace
	p.Releases = rep.Ledger.Releases()
	p.Aggregation = c.Aggregation.String()
	ec, eg := rep.Stats["eps_counts"], rep.Stats["eps_gram"]
	switch c.Aggregation {
	case protocol.AggMasked:
		p.Trusted = "nobody: the server saw only SecAgg+ sums of the devices' quantized vectors, each with its device's Skellam noise share (devices are trusted to add their share)"
		p.Noise = "skellam"
		p.Note += fmt.Sprintf("; integer path (secagg=masked): ε by Rényi accounting of the two Skellam releases (η = %.3g: the "+
			"releases below are the Gaussian plan the integer noise stands for, σ scaled by √(1+η)·(2^15+√d)/2^15)", rep.Stats["skellam_eta"])
	case protocol.AggIdeal:
		p.Trusted = "the aggregator that adds the Gaussian noise to the sum it receives (ideal secure aggregation); no one with a single upload"
	case protocol.AggOff:
		p.Trusted = "the server, which read every upload"
		p.Note = "secagg=off: the server read every user's upload, so the ε below does not hold against the server, only " +
			"against an observer of the released sums; " + p.Note
	}
	p.Note = fmt.Sprintf("%s; %d releases, ρ = %.4g in total; ε per release alone: counts %.4g, Gram %.4g; total ε = %.4g at δ = %g "+
		"(%s), replace-one ε = %.4g", p.Note, len(p.Releases), rep.Ledger.Rho(), ec, eg, rep.Eps, c.Delta, dpeaseNeighbouring, rep.EpsReplace)
	if pa := c.Participation(); pa != (protocol.Participation{}) {
		p.Note += fmt.Sprintf("; released over disjoint cohorts of %d users (%d rounds per statistic, the pooled sums released after "+
			"each: the model after each cohort): each device answers at most %d training rounds, two at least %d apart, so it enters "+
			"the counts once and the Gram once whatever cohorts the server picks; no amplification by sampling is assumed, and ε "+
			"is that of one counts and one Gram release (each round's noise at the release's full ρ, the pooled sums carrying one "+
			"release's noise per cohort); cohort membership is visible to the server (the neighbouring relation keeps it fixed)",
			pa.Cohort, max(1, c.CohortRounds), pa.MaxRounds, pa.MinGap)
		p.Neighbouring = dpeaseNeighbouring + "; over cohorts, the rounds each user is asked and answers are the same in both datasets"
	}
	if !dpease.Personal(v, dim) {
		p.Note += "; the released statistics carry no personalisation here (the Gram's signal is below its known noise, " +
			"or the public roster is too small for the budget): list = DP popularity"
	}
	if c.Seeded {
		p.Noise += " (seeded test mode: reproducible, not private against whoever knows the seed)"
		p.Note += "; TEST MODE (--seeded): the noise was drawn from the run's seed, which reproduces it, so anyone who knows " +
			"the seed can remove it: this model is not a release and carries no privacy guarantee"
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
			return dpease.NewServer(c, ratings.AnonymousItems(numItems, ratings.Scale{}), seed)
		},
		func(cfg *dpease.Config, train *ratings.Dataset, seed uint64) (*Clients, error) {
			c, err := dpeaseConfig(cfg)
			if err != nil {
				return nil, err
			}
			cl, err := dpease.NewClients(train, c)
			if err != nil {
				return nil, err
			}
			return &Clients{List: cl.List, Finish: func(v []float32) (*model.Model, *Result, error) {
				m, rep, err := cl.Finish(v)
				if err != nil {
					return nil, nil, err
				}
				return m, dpeaseResult(c, rep, v, m.Dim), nil
			}}, nil
		},
		func(c *dpease.Config) protocol.Aggregation { return c.Aggregation })
	// The server from the public catalog: its user IDs, when it lists
	// them, are the run's public roster (dpease.Config.Roster), as Fit's
	// training data's are.
	fed.ServerFor = func(cfg any, items *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
		p, err := typedConfig[dpease.Config](cfg)
		if err != nil {
			return nil, err
		}
		c, err := dpeaseConfig(p)
		if err != nil {
			return nil, err
		}
		return dpease.NewServer(c.WithRoster(items), items, seed)
	}
	fed.Participation = func(cfg any) protocol.Participation {
		if c, ok := cfg.(*dpease.Config); ok {
			return c.Participation()
		}
		return protocol.Participation{}
	}
	fed.Rounds = roundsOf(func(cfg *dpease.Config) (int, error) {
		c, err := dpeaseConfig(cfg)
		if err != nil {
			return 0, err
		}
		return dpease.Rounds(c)
	})
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
			c = c.WithRoster(train) // public: the run's devices
			m, rep, err := dpease.Train(ctx, train, c, seed)
			if err != nil {
				return nil, nil, err
			}
			if hook != nil {
				hook(Progress{Epoch: 1, Epochs: 1, TrainRMSE: 0, EpsSpent: rep.Eps})
			}
			// Spec.Fit labels the noise source (a served device's is its
			// deployment's: privrec client labels its test mode).
			return m, dpeaseResult(c, rep, m.V, m.Dim), nil
		})
}
