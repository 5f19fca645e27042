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
// ε_ij = W_ij·ε drawn from Config.Spec (HDPMF's Table 2 by default):
// those per-rating figures are the papers', not upper bounds; the proven
// figure is user-level, C·ε_w a round with the user clip C (package
// documentation, Privacy). Plain protects nothing.
const (
	// HDPMF stretches rating (i, j) by W_ij on the device, adds item
	// gradient noise Laplace(2√KΔ/ε) split among the item's raters, and
	// predicts with the item factors unstretched by γ_j and shrunk by
	// their noise (the paper's u·v/W_ij rescaling, applied to the
	// published table; see the package documentation). A rating spends
	// W_ij·ε per round and T·W_ij·ε over T rounds by basic composition.
	HDPMF Variant = iota
	// HDPMFR is HDPMF without the rescaling at prediction (the ablation of
	// §5.2.4): the same training and privacy, the published table left
	// stretched (shrunk by its noise likewise).
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
	// = protocol.AggMasked, Skellam noise accounted in Rényi DP), and of
	// the zCDP composition of the user-level figure; 0 means DefaultDelta.
	Delta float64
	// UserClip is C, the bound on one user's whole contribution to a
	// round, in units of one rating's: before adding its noise share, a
	// client scales its whole noise-free upload (every rated item's row)
	// down, if needed, to L2 norm C·Δ and L1 norm C·√K·Δ (Δ the rating
	// range; on the integer path to L2 norm C·Δ·64 integer units after
	// rounding). All of one user's rating values then move a round's
	// release by at most 2C·Δ in L2 and 2C·√K·Δ in L1, which is what the
	// proven user-level figure (Report.UserEpsTotal) rests on; see the
	// package documentation. 0 switches the clip off, and with it the
	// proof (UserEps* are then +Inf). DefaultConfig sets 8 (0 for Plain).
	UserClip float64
	// PaperPredict keeps the paper's prediction rule, for reproducing its
	// experiments: the server publishes V itself and each device takes
	// one more gradient step against it and predicts u·v/W_ij (HDPMF) or
	// u·v. By default (false) the HDPMF and HDPMF-R servers publish the
	// posterior-mean table and every device folds in against it, as
	// privrec recommend does (see the package documentation). Privacy is
	// the same either way.
	PaperPredict bool

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
		UserClip: userClipFor(v),
	}
}

// userClipFor is the default UserClip of v: 8, and 0 for Plain, which
// protects nothing.
func userClipFor(v Variant) float64 {
	if v == Plain {
		return 0
	}
	return 8
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
	case !(c.UserClip >= 0) || !finite(c.UserClip):
		return bad("UserClip", c.UserClip, "a finite number >= 0 (0: no clip, no proven bound)")
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
	// UserEpsRound and UserEpsTotal are the proven figures, the headline:
	// the ε of one user's rating values (all of them, changed in any way)
	// in one round and over the run, with δ UserDelta (0 when the total is
	// pure ε by basic composition; the zCDP composition's δ when that is
	// smaller). They rest on Config.UserClip and are +Inf without it. See
	// the package documentation, Privacy.
	UserEpsRound, UserEpsTotal, UserDelta float64
	// EpsRound is the largest ε any rating spends in one round; EpsTotal the
	// largest total by basic composition, AdvEpsTotal by advanced
	// composition with δ' = AdvDelta. These are the per-rating figures as
	// the paper computes them, assuming one rating moves only its item's
	// row: not upper bounds, since from round 2 u_i carries every rating
	// of the user into every row (privrec/audit's canary measures it).
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
	srv, err := NewServer(cfg, train.Public(), cfg.Seed)
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
	return cl.Finish(v)
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

// Finish returns the model with the server's final V (Model) and what
// the clients spent and measured (Report).
func (c *Clients) Finish(v []float32) (*model.Model, *Report, error) {
	m, err := c.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, c.Report(), nil
}

// Report returns what the clients spent and measured so far.
func (c *Clients) Report() *Report { return c.run.report() }

// NoiseScale returns the Laplace scale per coordinate of each item's
// summed noise.
func (c *Clients) NoiseScale() float64 { return c.run.noise }

// Sensitivity is the change of one round's release, in L1 and L2 norm
// over every coordinate of the per-item sums, that a privacy figure
// charges for: the figure's ε of the round is L1 over the Laplace scale
// per coordinate.
type Sensitivity struct{ L1, L2 float64 }

// Charged returns the per-round sensitivities the two figures of client
// u charge on the float paths: rating, the paper's, for one rating of
// user u's most exposed weight (what the accountant charges: the row of
// that rating's item, 2W·Δ in L2 and 2√K·W·Δ in L1, W = the user's ε per
// round over the weight-1 ε the noise is calibrated for); user, the
// proven one, for all of user u's rating values (twice the user clip:
// 2C·Δ and 2C·√K·Δ; +Inf without a clip). privrec/audit's canary checks
// measured changes against them.
func (c *Clients) Charged(u int) (rating, user Sensitivity) {
	r := c.run
	sens := float64(r.train.Scale.Max - r.train.Scale.Min)
	k := math.Sqrt(float64(r.cfg.Dim))
	w := 0.0
	if r.epsEff > 0 {
		w = r.cls[u].charge / r.epsEff
	}
	rating = Sensitivity{L1: 2 * k * w * sens, L2: 2 * w * sens}
	user = Sensitivity{L1: 2 * r.sh.clipL1, L2: 2 * r.sh.clipL2}
	if r.sh.clipL1 == 0 {
		user = Sensitivity{L1: math.Inf(1), L2: math.Inf(1)}
	}
	return rating, user
}

// ChargedMasked returns the per-round sensitivities, in integer units of
// the summed words, that the integer path (secagg=masked) charges:
// rating, the paper's, for one rating value (2Δ·Scale + 2√K for the
// rounding in L2, min(√K·L2, L2²) in L1); user, the proven one, for all
// of one user's rating values (2C·Δ·Scale in L2, its square in L1; +Inf
// without a user clip). ok is false when the clients were not built for
// the integer path.
func (c *Clients) ChargedMasked() (rating, user Sensitivity, ok bool) {
	m := c.run.sh.mask
	if m == nil {
		return Sensitivity{}, Sensitivity{}, false
	}
	return Sensitivity{L1: m.l1, L2: m.l2}, Sensitivity{L1: m.ul1, L2: m.ul2}, true
}

// Noiseless switches the noise shares off (the float paths' and the
// integer path's Skellam shares), so that the uploads carry only their data: for privrec/audit's sensitivity canary,
// which replays the same broadcasts to the clients of two neighbouring
// datasets and compares the noise-free releases. The uploads then protect
// nothing.
func (c *Clients) Noiseless() { c.run.sh.noiseless = true }
