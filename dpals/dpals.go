package dpals

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// Stream labels for rng.New.
const (
	streamNoise uint64 = 0x6470_616c_736e // "dpalsn": the aggregate noise
	streamInit  uint64 = 0x6470_616c_7369 // "dpalsi": the public initial item factors
	releaseInit uint64 = 1 << 20          // the noise stream of the spectral initialization
)

// Report is what a run released and spent.
type Report struct {
	// Ledger holds every release of the run.
	Ledger rdp.Ledger
	// Rho is the zCDP budget the target (Eps, Delta) allows; in a roster
	// run the ledger's total equals it up to rounding.
	Rho float64
	// UserRho is the most ρ one user is charged: the ledger's total in a
	// roster run; under participation limits the largest total of the
	// rounds the limits let one user answer (equal to Rho up to rounding),
	// UserRounds being such a set of rounds.
	UserRho    float64
	UserRounds []int
	// Participation is the run's participation limits (the zero value
	// for a roster run).
	Participation protocol.Participation
	// Eps is ε at Delta of UserRho, for neighbouring datasets that differ
	// by adding or removing one user's whole rating history.
	Eps float64
	// EpsReplace is the total ε at Delta for neighbouring datasets that
	// differ by replacing one user's ratings with another's: the same
	// noise, every sensitivity doubled (ρ four times), by the same
	// zCDP → (ε, δ) conversion.
	EpsReplace float64
	// Mean is the released global mean.
	Mean float64
	// Stats holds figures for reports: "train_rmse", the noise σ of each
	// kind of release, "failed_solves".
	Stats map[string]float64
}

// Neighbouring names the neighbouring relation of the claim: zero-out,
// since a deployment's server counts the participants exactly; a user
// with an empty history contributes nothing, so ε is the add/remove
// analysis's for the user's ratings.
const Neighbouring = "zero-out one user: all of one user's ratings removed (their history emptied), the user's " +
	"participation and the number of participants public (the server counts them exactly); eps_replace_one is for " +
	"one user's history replaced by any other"

// Claim is the privacy claim of Train.
var Claim = model.Privacy{
	Unit: "user", Trusted: "nobody",
	Note: "user-level joint DP over the whole run, for datasets that differ by adding or removing one user's whole rating " +
		"history (eps_total; eps_replace gives ε for replacing one user: the same noise, sensitivities doubled): each user's " +
		"vector and bias are solved on the device and never leave it; the " +
		"server receives only Gaussian-noised sums over users of per-item statistics (weighted counts and residual sums, Gramians " +
		"and right-hand sides) and a noised global mean, every release composed in zCDP and converted to (ε, δ); each user's " +
		"contribution is bounded (at most c ratings, clipped residuals, norm-bounded vectors, weights whose squares sum to 1); " +
		"every release is a dense vector over the public item catalog (items nobody rated included), so its shape does not " +
		"depend on the data; holds against a server that sees only the sums (aggregation ideal: the ideal functionality of " +
		"secure aggregation, the noise drawn once as the sum of the clients' Gaussian shares); on the device each user also fits " +
		"their own coefficients on public item features (the released item bias and count, the release year in the public " +
		"catalog's title), which releases nothing; hyperparameter tuning is not counted",
	Aggregation: "ideal", Noise: "gaussian", Neighbouring: Neighbouring,
}

// Train fits the model on train (ratings on 1..5) with cfg and seed, by
// running the client/server protocol (NewServer, NewClients) in process
// over protocol.InMem: the item catalog is train's item index (its IDs
// and titles, items without ratings included), the server's noise comes
// from seed and the clients' sampling from seed's client streams. With
// cfg.Cohort, RoundsPerUser or MinGap it runs over cohorts
// (protocol.Cohorts): each training round asks Cohort users drawn from
// seed among those whose limits allow it, and every client enforces its
// limits. See the package documentation for the protocol and its
// privacy.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, seed uint64) (*model.Model, *Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if train == nil {
		return nil, nil, fmt.Errorf("dpals: no training data")
	}
	srv, err := NewServer(cfg, train, seed)
	if err != nil {
		return nil, nil, err
	}
	cl, err := NewClients(train, cfg)
	if err != nil {
		return nil, nil, err
	}
	opt := protocol.RunOptions{Seed: seed, Aggregation: cfg.Aggregation, MaxRounds: srv.(*server).numRounds() + 1,
		Participation: cfg.Participation()}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	return cl.Finish(v)
}

// epsReplace returns ε at delta for replace-one neighbours of a run whose
// add/remove-one ledger totals rho: replacing one user moves every sum by
// at most twice the add/remove sensitivity, so each Gaussian release's ρ
// = Δ²/(2σ²) is four times larger, and the total too.
func epsReplace(rho, delta float64) float64 { return rdp.ZCDPToDP(4*rho, delta) }

// CohortNeighbouring is what the neighbouring relation fixes in a run
// over cohorts: the cohorts themselves.
const CohortNeighbouring = "over cohorts, the rounds each user is asked and answers are the same in both datasets " +
	"(cohort membership is visible to the server, which may choose it adaptively from earlier releases; the ε protects " +
	"the ratings, not the fact of taking part)"

// CohortNote is the claim's note for a run over cohorts, a format taking
// the cohort size, the rounds per user (0: any), the minimum gap, the
// ledger's total ρ, the size of the costliest allowed set of rounds, that
// set and its ρ.
const CohortNote = "run over cohorts of %d users (0: every user) with participation limits each device enforces whatever " +
	"the server picks: at most %d training rounds per user (0: any), two at least %d apart; the server may choose " +
	"cohorts adversarially, so no amplification by sampling is assumed: a round costs a user its ρ_t if the user " +
	"answers it and nothing otherwise, and a user's ε composes the costliest set of rounds the limits allow (the rounds' " +
	"ρ_t, in the config's proportions, are scaled so that it spends the target; composition valid for adaptively " +
	"chosen cohorts by the Rényi filter, Feldman and Zrnic 2021); the ledger below lists every round's releases " +
	"(ρ = %.4g summed over all of them), a user answers at most %d of them (costliest: rounds %v, ρ = %.4g); " +
	"no correlated (tree-aggregation, DP-FTRL) noise: each round's statistics are used on their own (the " +
	"identity workload, for which independent noise is optimal among linear correlated-noise mechanisms when a user's " +
	"contributions may take any sign), only the " +
	"pooled bias rounds form prefix sums, and there the binary tree's gain at these round counts is small " +
	"(docs/results/dpals-cohorts.md)"
