package dpease

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// Config holds the hyperparameters.
type Config struct {
	Eps         float64 `json:"eps"`          // user-level ε of the whole run
	Delta       float64 `json:"delta"`        // user-level δ of the whole run
	TopItems    int     `json:"top_items"`    // M: items in the Gram release
	Cap         int     `json:"cap"`          // c: a device's Gram weight is 1/max(n', c)
	FracCounts  float64 `json:"frac_counts"`  // share of ρ spent on the counts (< 0: by roster, PopularityMode)
	Lambda      float64 `json:"lambda"`       // ridge of the EASE solve
	LambdaNoise float64 `json:"lambda_noise"` // ridge added per σ_g·√M
	PopWeight   float64 `json:"pop_weight"`   // weight of the noisy popularity in a score
	// PopDiagSNR k: when fewer than M items have a noisy count ŝ of at
	// least k·σ_c (the counts are weak against their noise), the top M
	// items' popularity coordinate is taken from the Gram release's
	// diagonal (0.9 of ρ at the default split) instead of ŝ. 0: never; +Inf:
	// always. Post-processing of the two releases.
	PopDiagSNR float64 `json:"pop_diag_snr"`
	// Shrink: the item-item weights are multiplied by the personal
	// weight the released Gram supports (PersonalWeight, a posterior-mean
	// weight under the known noise variance), and by 0 in popularity
	// mode (PopularityMode); with weight 0 the list is DP popularity.
	// Post-processing of the releases. False: the issue-33 rule.
	Shrink bool `json:"shrink"`
	// Roster is the public roster size N: the number of devices enrolled
	// in the run (in process, the training data's user IDs), public in a
	// deployment. With FracCounts < 0 (by roster) it decides the budget
	// split before anything is released (PopularityMode). 0: not known
	// yet (a served run's server sets it when enrolment closes, SetRoster).
	Roster  int  `json:"roster"`
	Seeded  bool `json:"seeded"`  // test mode: noise from the seed, not crypto/rand
	Workers int  `json:"workers"` // client workers of the in-process run (0: all cores)
	// Aggregation is how the server receives the uploads: AggIdeal (the
	// default in process: only their sums, to which the server adds the
	// Gaussian noise), AggMasked (the integer path of masked.go: dense
	// quantized vectors with the devices' Skellam noise shares, summed by
	// SecAgg+; privrec serve's default) or AggOff (the server reads every
	// upload, and the claim does not hold against it).
	Aggregation protocol.Aggregation `json:"secagg"`
	// Cohort, when > 0, releases each statistic over disjoint cohorts of
	// the population (issue 45): CohortRounds rounds of counts, then
	// CohortRounds rounds of the Gram, each asking Cohort users, and the
	// server releases the pooled sums after every round (a continual
	// release: the model after each cohort). Each device answers at most
	// one round of each (Participation: at most 2 training rounds, at
	// least CohortRounds apart), so whatever cohorts the server picks a
	// user enters each statistic once and ε is the roster's. 0: every
	// user in both rounds (a roster run).
	Cohort int `json:"cohort"`
	// CohortRounds is the number of cohorts (rounds) per statistic when
	// Cohort > 0 (0: 1); Cohort·CohortRounds ≥ the population lets every
	// user take part.
	CohortRounds int `json:"cohort_rounds"`
}

// cohortRounds returns the rounds per statistic: CohortRounds (at least
// 1) over cohorts, 1 in a roster run.
func (c Config) cohortRounds() int {
	if c.Cohort > 0 {
		return max(1, c.CohortRounds)
	}
	return 1
}

// Participation returns the run's participation limits, which the
// devices enforce: over cohorts at most one round of the counts and one
// of the Gram (2 training rounds at least CohortRounds apart: two rounds
// of one statistic are closer than that); the zero value for a roster
// run.
func (c Config) Participation() protocol.Participation {
	if c.Cohort <= 0 {
		return protocol.Participation{}
	}
	return protocol.Participation{Cohort: c.Cohort, MaxRounds: 2, MinGap: c.cohortRounds()}
}

// DefaultConfig returns the defaults: TopItems, LambdaNoise and PopWeight
// follow ε (ByEps; chosen on a validation split of the ML-1M training
// part), PopDiagSNR 2 (chosen on validation splits of five datasets'
// training parts; docs/results/private-topn.md).
func DefaultConfig() Config {
	return Config{Eps: 1, Delta: 1e-6, TopItems: 0, Cap: 10, FracCounts: -1,
		Lambda: 1, LambdaNoise: -1, PopWeight: -1, PopDiagSNR: 2, Shrink: true, Aggregation: protocol.AggIdeal}
}

// ByEps returns the ε-dependent defaults: the number of items in the
// Gram release, the noise ridge per σ·√M and the popularity weight.
// They interpolate log-linearly in ε between the settings chosen on the
// validation split at ε = 1 (M 300, λ-noise 6, pop-weight 0.12) and ε = 10
// (M 1000, λ-noise 5, pop-weight 0.04), and stay at those settings below
// ε = 1 and above ε = 10 (outside the validated range). More budget buys
// a larger, less shrunk item-item model and less weight on popularity.
func ByEps(eps float64) (topItems int, lambdaNoise, popWeight float64) {
	t := math.Min(math.Max(math.Log10(eps), 0), 1)
	topItems = int(math.Round(300 * math.Pow(1000.0/300, t)))
	lambdaNoise = 6 - t
	popWeight = 0.12 * math.Pow(0.04/0.12, t)
	return
}

// Resolve returns the config with the ε-dependent fields filled in:
// TopItems 0, LambdaNoise < 0 and PopWeight < 0 take ByEps(Eps);
// FracCounts < 0 takes PopularityFrac in popularity mode (PopularityMode)
// and PersonalFrac otherwise.
func (c Config) Resolve() Config {
	m, ln, pw := ByEps(c.Eps)
	if c.TopItems == 0 {
		c.TopItems = m
	}
	if c.LambdaNoise < 0 {
		c.LambdaNoise = ln
	}
	if c.PopWeight < 0 {
		c.PopWeight = pw
	}
	if c.FracCounts < 0 {
		f := PersonalFrac
		if c.popularityMode() {
			f = PopularityFrac
		}
		c.FracCounts = f
	}
	return c
}

// WithRoster returns c with Roster set, when it is 0, to the number of
// user IDs of train: in process the training data's users are the
// run's roster (the deployment's enrolled devices, public).
func (c Config) WithRoster(train *ratings.Dataset) Config {
	if c.Roster == 0 {
		c.Roster = train.NumUsers()
	}
	return c
}

// Budget splits and the roster rule (PopularityMode).
const (
	// PersonalFrac is the counts' share of ρ when the Gram can carry
	// personalisation (the issue-33 default, chosen on ML-1M).
	PersonalFrac = 0.1
	// PopularityFrac is the counts' share of ρ in popularity mode: the
	// list is DP popularity at nearly the whole budget.
	PopularityFrac = 0.99
	// RosterRidge: popularity mode when the roster N is below
	// RosterRidge times the EASE ridge λ the Gram release would get at
	// PersonalFrac.
	RosterRidge = 4
)

// popularityMode is PopularityMode for a config whose FracCounts is
// still by roster (< 0); false with Shrink off, when Roster is 0 or
// when the budget is invalid.
func (c Config) popularityMode() bool {
	m, ln, _ := ByEps(c.Eps)
	if c.TopItems != 0 {
		m = c.TopItems
	}
	if c.LambdaNoise >= 0 {
		ln = c.LambdaNoise
	}
	if !c.Shrink || c.FracCounts >= 0 || c.Roster <= 0 || m < 1 || c.Cap < 1 {
		return false
	}
	rho, err := rdp.ZCDPRhoFor(c.Eps, c.Delta)
	if err != nil {
		return false
	}
	// Over cohorts the pooled Gram carries one release's noise per
	// cohort.
	sg := rdp.GaussianSigmaFor((1-PersonalFrac)*rho, GramL2(c.Cap)) * math.Sqrt(float64(c.cohortRounds()))
	lam := c.Lambda + ln*sg*math.Sqrt(float64(m))
	return float64(c.Roster) < RosterRidge*lam
}

// Validate checks the config (after Resolve).
func (c Config) Validate() error {
	c = c.Resolve()
	switch {
	case !(c.Eps > 0) || math.IsInf(c.Eps, 0):
		return fmt.Errorf("dpease: eps %v, want > 0", c.Eps)
	case !(c.Delta > 0 && c.Delta < 1):
		return fmt.Errorf("dpease: delta %v, want in (0, 1)", c.Delta)
	case c.TopItems < 1:
		return fmt.Errorf("dpease: top-items %d, want ≥ 1", c.TopItems)
	case c.Cap < 1:
		return fmt.Errorf("dpease: cap %d, want ≥ 1", c.Cap)
	case !(c.FracCounts > 0 && c.FracCounts < 1):
		return fmt.Errorf("dpease: frac-counts %v, want in (0, 1)", c.FracCounts)
	case !(c.Lambda >= 0) || !(c.LambdaNoise >= 0) || c.Lambda+c.LambdaNoise <= 0:
		return fmt.Errorf("dpease: lambda %v, lambda-noise %v: want ≥ 0, not both 0", c.Lambda, c.LambdaNoise)
	case !(c.PopWeight >= 0):
		return fmt.Errorf("dpease: pop-weight %v, want ≥ 0", c.PopWeight)
	case !(c.PopDiagSNR >= 0):
		return fmt.Errorf("dpease: pop-diag-snr %v, want ≥ 0", c.PopDiagSNR)
	case c.Aggregation != protocol.AggIdeal && c.Aggregation != protocol.AggMasked && c.Aggregation != protocol.AggOff:
		return fmt.Errorf("dpease: aggregation %v: want masked, ideal or off", c.Aggregation)
	case c.Cohort < 0 || c.CohortRounds < 0 || c.CohortRounds > 1000:
		return fmt.Errorf("dpease: cohort %d, cohort-rounds %d: want ≥ 0 (cohort-rounds at most 1000)", c.Cohort, c.CohortRounds)
	case c.CohortRounds > 0 && c.Cohort == 0:
		return fmt.Errorf("dpease: cohort-rounds %d without a cohort size: set cohort", c.CohortRounds)
	}
	return nil
}

// GramL2 is the L2 sensitivity of the Gram release for cap c.
func GramL2(c int) float64 { return math.Sqrt((1 + 1/float64(c)) / 2) }
