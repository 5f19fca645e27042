package hdpmf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/privrec/privrec/accountant"
	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// ErrConfig is wrapped by every error about an invalid Config.
var ErrConfig = errors.New("hdpmf: invalid config")

// Variant is one method of the family.
type Variant int

// The methods. The first four protect rating values against an untrusted
// server (trusting nobody with raw ratings, secure aggregation assumed:
// the ε below holds for the per-item sums, which is all the server sees
// under Config.Aggregation, ideal by default), with per-rating budgets
// ε_ij = W_ij·ε drawn from Config.Spec (HDPMF's Table 2 by default).
// Plain protects nothing.
const (
	// HDPMF stretches rating (i, j) by W_ij on the device, adds item
	// gradient noise Laplace(2√KΔ/ε) split among the item's raters, and
	// predicts u·v/W_ij. A rating spends W_ij·ε per round and T·W_ij·ε over
	// T rounds by basic composition.
	HDPMF Variant = iota
	// HDPMFR is HDPMF without the rescaling at prediction (the ablation of
	// §5.2.4): the same training and privacy, predictions u·v.
	HDPMFR
	// DPMF adds the same noise for every rating, set by the smallest budget
	// of all ratings: Laplace(2√KΔ/ε_min), no stretching. Every rating
	// spends ε_min per round, T·ε_min in total.
	DPMF
	// PDPMF keeps rating (i, j) with probability
	// (e^ε_ij − 1)/(e^t − 1) (Jorgensen's sample mechanism, drawn once on
	// the device in the setup round) and trains on the kept ratings with
	// noise Laplace(2√KΔ/t). A kept rating spends t per round, T·t in
	// total; the sampling protects rating (i, j) at
	// ln(1 + π_ij(e^(T·t) − 1)) over the run, ε_ij for one round.
	PDPMF
	// Plain is federated MF without noise, weights or sampling (the FedMF
	// setting of Chai et al. without its encryption): every client uploads
	// its exact item gradients. It protects nothing (ε = ∞) and is not a
	// registered method; it is the control that privacy audits
	// (privrec/audit) must break.
	Plain
)

// String returns the method's registry name.
func (v Variant) String() string {
	switch v {
	case HDPMF:
		return "hdpmf"
	case HDPMFR:
		return "hdpmf-r"
	case DPMF:
		return "dpmf"
	case PDPMF:
		return "pdpmf"
	case Plain:
		return "fedmf"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// DefaultDelta is the δ of the integer path when Config.Delta is 0.
const DefaultDelta = 1e-6

// Config configures Train.
type Config struct {
	Variant   Variant
	Dim       int     // K, latent dimension (paper: 10)
	Rounds    int     // T, training rounds (paper: 100)
	LearnRate float64 // initial η; divided by 5 after 25% and again after 75% of the rounds (§5.1.2)
	Reg       float64 // λ of the objective (paper: 0.01 or 0.001)
	// UserLearnRate is the initial η of the clients' user steps, on the
	// same schedule; zero means LearnRate. (With ‖u‖ ≤ 1 the item vectors
	// grow to the rating scale, so the user step needs a smaller rate.)
	UserLearnRate float64
	// Pseudo is n0 of the count preconditioning η/(n + n0) (see the
	// package documentation); ≥ 0.
	Pseudo    float64
	InitScale float64 // factors start N(0, InitScale²) (users then projected into the unit ball)
	// Eps is ε, the per-round budget of a rating of weight 1 (the maximum
	// budget of all ratings).
	Eps float64
	// EpsTotal caps the total budget of a rating of weight 1 over the run;
	// every rating's cap scales with its per-round ε. A user whose most
	// exposed rating would exceed it uploads nothing from then on. Zero
	// means no cap (Rounds·Eps is spent).
	EpsTotal float64
	// Spec gives the per-rating weights W_ij = β_iγ_j (HDPMF's Table 2 by
	// default), drawn with SpecSeed; Weights, when not nil, is used instead.
	Spec     budget.HDPMFGroups
	SpecSeed uint64
	Weights  *budget.HDPWeights
	// Threshold is PDPMF's t: "mean" (default), "min", "max" or a number.
	Threshold string
	// Noise is the share construction: dp.GammaShares (default) or
	// dp.MixtureShares (the paper's, with the server's h_j ~ Exp(1) sent in
	// Broadcast.Aux).
	Noise dp.ShareScheme
	// Aggregation ideal runs the protocol under protocol.SecureSum: the
	// server receives, each round, only the per-item sums of the uploads,
	// which is what the privacy claim covers (DefaultConfig sets it). Off,
	// the server reads every client's upload, whose noise share is only
	// 1/n_j of the item's noise, and the setup round tells it which items
	// each user rated.
	Aggregation protocol.Aggregation
	// Delta is the δ of the integer path's (ε, δ) guarantee (Aggregation
	// = protocol.AggMasked, Skellam noise accounted in Rényi DP); 0 means
	// DefaultDelta. The gamma-share paths are pure ε and ignore it.
	Delta float64

	Workers int    // client goroutines; the result does not depend on it
	Seed    uint64 // labels every random stream of the run
	// Transcript, when not nil, receives everything the server sends and
	// receives (protocol.TranscriptWriter format).
	Transcript io.Writer
	// OnRound, when not nil, is called after every round.
	OnRound func(RoundStats)
}

// RoundStats describes a finished round.
type RoundStats struct {
	Round, Rounds int     // finished training rounds and T
	Phase         string  // protocol phase
	Uploads       int     // clients that uploaded
	LearnRate     float64 // η of the round
	EpsSpent      float64 // largest ε any rating has spent so far
}

// DefaultConfig returns the paper's defaults for v: K = 10, T = 100, the
// step schedule, λ = 0.01, ε = 1, Table 2 weights, GammaShares, secure
// aggregation (except for Plain, the no-privacy control, whose server reads
// single uploads).
func DefaultConfig(v Variant) Config {
	return Config{
		Variant: v, Dim: 10, Rounds: 100, LearnRate: 0.5, UserLearnRate: 0.5, Reg: 0.01, Pseudo: 50,
		InitScale: 0.1, Eps: 1, Spec: budget.DefaultHDPMF(), SpecSeed: 1,
		Threshold: "mean", Noise: dp.GammaShares, Aggregation: protocol.SecureIf(v != Plain), Seed: 1,
	}
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrConfig, field, v, want)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Variant < HDPMF || c.Variant > Plain:
		return bad("Variant", int(c.Variant), "HDPMF, HDPMFR, DPMF, PDPMF or Plain")
	case c.Dim < 1 || c.Dim > 4096:
		return bad("Dim", c.Dim, "1..4096")
	case c.Rounds < 1:
		return bad("Rounds", c.Rounds, ">= 1")
	case !(c.LearnRate > 0) || !finite(c.LearnRate):
		return bad("LearnRate", c.LearnRate, "a finite number > 0")
	case !(c.UserLearnRate >= 0) || !finite(c.UserLearnRate):
		return bad("UserLearnRate", c.UserLearnRate, "a finite number >= 0 (0: LearnRate)")
	case !(c.Reg >= 0) || !finite(c.Reg):
		return bad("Reg", c.Reg, "a finite number >= 0")
	case !(c.Pseudo >= 0) || !finite(c.Pseudo):
		return bad("Pseudo", c.Pseudo, "a finite number >= 0")
	case !(c.InitScale >= 0) || !finite(c.InitScale):
		return bad("InitScale", c.InitScale, "a finite number >= 0")
	case !(c.Eps > 0) || !finite(c.Eps):
		return bad("Eps", c.Eps, "a finite number > 0")
	case !(c.EpsTotal >= 0) || !finite(c.EpsTotal):
		return bad("EpsTotal", c.EpsTotal, "a finite number >= 0 (0: no cap)")
	case c.Noise != dp.GammaShares && c.Noise != dp.MixtureShares:
		return bad("Noise", int(c.Noise), "GammaShares or MixtureShares")
	case c.Aggregation < protocol.AggOff || c.Aggregation > protocol.AggMasked:
		return bad("Aggregation", c.Aggregation, "off, ideal or masked")
	case c.Aggregation == protocol.AggMasked && c.Noise == dp.MixtureShares:
		return bad("Noise", "mixture", "gamma with masked aggregation (the integer path draws Skellam shares)")
	case !(c.Delta >= 0 && c.Delta < 1):
		return bad("Delta", c.Delta, "in [0, 1) (0: DefaultDelta)")
	}
	if c.Weights == nil {
		if err := c.Spec.Validate(); err != nil {
			return fmt.Errorf("%w: Spec: %w", ErrConfig, err)
		}
	} else if err := c.Weights.Validate(); err != nil {
		return fmt.Errorf("%w: Weights: %w", ErrConfig, err)
	}
	return nil
}

// rate returns η of training round t (0-based): the paper's schedule.
func (c Config) rate(t int) float64 { return schedule(c.LearnRate, t, c.Rounds) }

// schedule divides lr by 5 after 25% and again after 75% of the rounds.
func schedule(lr float64, t, rounds int) float64 {
	if 4*t >= rounds {
		lr /= 5
	}
	if 4*t >= 3*rounds {
		lr /= 5
	}
	return lr
}

// Report is what a run spent and measured.
type Report struct {
	// EpsRound is the largest ε any rating spends in one round; EpsTotal the
	// largest total by basic composition, AdvEpsTotal by advanced
	// composition with δ' = AdvDelta.
	EpsRound, EpsTotal    float64
	AdvEpsTotal, AdvDelta float64
	// NoiseScale is the Laplace scale per coordinate of each item's noise.
	NoiseScale float64
	// Threshold is PDPMF's t (0 otherwise); Kept the fraction of training
	// ratings the clients kept (1 except for PDPMF).
	Threshold, Kept float64
	// Refused counts uploads refused for lack of budget.
	Refused int
	// Accountant is the full report of the per-user ledger (the ε of each
	// user's most exposed rating).
	Accountant accountant.Report
	// Aggregation is what ran ("masked", "ideal", "off") and Noise the
	// noise ("skellam", "gamma-shares", "mixture-shares", "none"). With
	// Skellam noise EpsRound and EpsTotal are (ε, Delta) by Rényi DP
	// (EpsRound: one round alone) and NoiseScale is the standard deviation
	// of an item coordinate's noise in rating units.
	Aggregation, Noise string
	Delta              float64
}

// Train runs the method on train over the in-process transport and
// returns the gathered model.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config) (*model.Model, *Report, error) {
	cl, err := NewClients(train, cfg) // checks cfg and train
	if err != nil {
		return nil, nil, err
	}
	srv, err := NewServer(cfg, train.NumItems(), train.Scale)
	if err != nil {
		return nil, nil, err
	}
	run := cl.run
	opt := protocol.RunOptions{
		Workers: cfg.Workers, Seed: cfg.Seed, Transcript: cfg.Transcript,
		Aggregation: cfg.Aggregation,
		Header: protocol.TranscriptHeader{Method: cfg.Variant.String(), Meta: map[string]string{
			"dim": fmt.Sprint(cfg.Dim), "rounds": fmt.Sprint(cfg.Rounds), "eps": fmt.Sprint(cfg.Eps),
			"noise": cfg.Noise.String(), "noise_scale": fmt.Sprint(run.noise),
			"pseudo": fmt.Sprint(cfg.Pseudo), "secagg": cfg.Aggregation.String(),
		}},
		OnRound: func(info protocol.RoundInfo) error {
			if cfg.OnRound == nil {
				return nil
			}
			t := max(0, info.Round) // round 0 is setup
			if t > cfg.Rounds {
				t = cfg.Rounds
			}
			st := RoundStats{Round: t, Rounds: cfg.Rounds, Phase: info.Phase, Uploads: info.Uploads}
			if info.Phase == protocol.PhaseTrain {
				st.LearnRate = cfg.rate(t - 1)
				st.EpsSpent = run.acct.Report().Basic.MaxEps
			}
			cfg.OnRound(st)
			return nil
		},
	}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, cl.Report(), nil
}

// Clients is the client half of a run: one client per user of the
// training data, built from the users' own ratings, with what they share
// (the accountant of their spending, the noise calibration).
type Clients struct {
	// List holds one client per user index of the training data, in
	// order; List[u].ID() is u.
	List []protocol.Client
	run  *run
}

// NewClients builds the clients of cfg from train, drawing their initial
// user vectors from cfg.Seed. Run them with a server from NewServer for
// train's number of items and scale, over protocol.Run or any transport,
// under the aggregation cfg.Aggregation names.
func NewClients(train *ratings.Dataset, cfg Config) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if train == nil || train.Len() == 0 {
		return nil, fmt.Errorf("%w: no training ratings", ErrConfig)
	}
	if err := train.Validate(); err != nil {
		return nil, err
	}
	r, err := newRun(train, cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{List: r.clients, run: r}, nil
}

// Model gathers the model from the clients' user vectors and the server's
// final V (train.NumItems()×Dim), on train's scale.
func (c *Clients) Model(v []float32) (*model.Model, error) {
	if want := c.run.train.NumItems() * c.run.cfg.Dim; len(v) != want {
		return nil, fmt.Errorf("%w: V holds %d values, want %d items × %d", ErrConfig, len(v), c.run.train.NumItems(), c.run.cfg.Dim)
	}
	return c.run.model(v), nil
}

// Report returns what the clients spent and measured so far.
func (c *Clients) Report() *Report { return c.run.report() }

// NoiseScale returns the Laplace scale per coordinate of each item's
// summed noise.
func (c *Clients) NoiseScale() float64 { return c.run.noise }
