package ldpop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// ErrConfig is wrapped by every error about an invalid Config or dataset.
var ErrConfig = errors.New("ldpop: invalid config")

// Variant is one method of the family.
type Variant int

// The methods (see the package documentation for their privacy claims).
const (
	// LDPOP is the paper's Alg. 2 with C2: one unmarked position of V per
	// round, drawn without replacement, noise shares on every position.
	LDPOP Variant = iota
	// Basic is Alg. 1: the whole gradient every round with the same noise
	// shares, which the difference of two rounds cancels.
	Basic
	// RSMF is LDP-OP's sampling without noise (§6.1): it protects nothing.
	RSMF
)

// String returns the method's registry name.
func (v Variant) String() string {
	switch v {
	case LDPOP:
		return "ldp-op"
	case Basic:
		return "ldp-op-basic"
	case RSMF:
		return "rsmf"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// Config configures a run. DefaultConfig gives the paper's settings.
type Config struct {
	Variant Variant
	// Dim is the latent dimension d (the paper does not give it; 10).
	Dim int
	// Rounds is the number of training rounds, the paper's iter (1000;
	// Basic: 100).
	Rounds int
	// PerRound is the number of positions of V named per round (LDP-OP,
	// RSMF; the paper: 1). The basic scheme uploads every position.
	PerRound int
	// LearnRate γ_0 (0.015) decays to γ_t = γ_0·Decay^⌊t/DecayEvery⌋
	// (0.95 per round).
	LearnRate, Decay float64
	DecayEvery       int
	// Reg is λ of objectives (2) and (8) (1e-8).
	Reg float64
	// Eps is ε of one released position (LDP-OP) or of the objective noise
	// (Basic); ignored by RSMF.
	Eps float64
	// Bound is B, the bound on ‖u_i‖ that the noise is calibrated to; the
	// user fit is constrained to it.
	Bound float64
	// InitScale is the standard deviation of V⁰'s coordinates but the
	// first, which starts at r_max/Bound.
	InitScale float64
	// Refit, when > 0, refits every u_i against the current V every Refit
	// rounds (not in the paper; 0: u_i is fitted once against V⁰). Not
	// allowed for Basic, whose fixed noise would then reveal the values.
	Refit int
	// Noise is the construction of the users' noise shares: dp.GammaShares
	// (default, hides the noise from the server) or dp.MixtureShares (the
	// paper's, with the server's H ~ Exp(1)).
	Noise dp.ShareScheme
	// Aggregation ideal runs the rounds under protocol.SecureSum: the
	// server sees only the per-item sums, against which the ε of the
	// claims holds. On by default for LDPOP; off for Basic (the attack
	// target, as in the paper, whose server receives every user's upload)
	// and RSMF (nothing to protect). Masked (LDPOP and RSMF) is the
	// integer path of secure aggregation for real: quantized uploads and
	// distributed Skellam noise instead of Laplace shares, (ε, δ)-DP by
	// Rényi accounting (see masked.go's notes in the package doc).
	Aggregation protocol.Aggregation
	// Delta is δ of the integer path's (ε, δ) guarantee (0: DefaultDelta).
	Delta float64
	// Seed labels every random stream; Workers is the number of client
	// goroutines (<= 0: all cores), on which results do not depend.
	Seed    uint64
	Workers int
	// Transcript, when not nil, receives every broadcast and upload (see
	// protocol.TranscriptWriter): exactly what the server sees.
	Transcript io.Writer
	// OnRound, when not nil, is called after every training round.
	OnRound func(RoundStats)
}

// RoundStats describes a finished training round.
type RoundStats struct {
	Round, Rounds int     // finished training rounds and the total
	Pass          int     // pass over the positions of V, from 0
	LearnRate     float64 // γ_t of the round
	EpsSpent      float64 // largest ε any rating has spent so far (u_i fixed)
}

// DefaultConfig returns the paper's settings for v: d = 10, iter = 1000
// rounds of one position, γ = 0.015 decaying by 0.95 per round, λ = 1e-8,
// ε = 1, B = 1, GammaShares; secure aggregation for LDPOP only. The basic
// scheme, which the paper defines but never runs, defaults to 100 rounds:
// each is a dense m × d upload per user, and with the decay the steps
// after round 100 add up to 0.6% (0.95^100) of the total step.
func DefaultConfig(v Variant) Config {
	rounds := 1000
	if v == Basic {
		rounds = 100
	}
	return Config{
		Variant: v, Dim: 10, Rounds: rounds, PerRound: 1,
		LearnRate: 0.015, Decay: 0.95, DecayEvery: 1, Reg: 1e-8,
		Eps: 1, Bound: 1, InitScale: 0.1, Noise: dp.GammaShares,
		Aggregation: protocol.SecureIf(v == LDPOP), Seed: 1,
	}
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrConfig, field, v, want)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Variant < LDPOP || c.Variant > RSMF:
		return bad("Variant", int(c.Variant), "LDPOP, Basic or RSMF")
	case c.Aggregation < protocol.AggOff || c.Aggregation > protocol.AggMasked:
		return bad("Aggregation", c.Aggregation, "off, ideal or masked")
	case c.Aggregation == protocol.AggMasked && c.Variant == Basic:
		return bad("Aggregation", c.Aggregation, "off or ideal for the basic scheme (its fixed noise is broken by differences whatever the aggregation)")
	case c.Aggregation == protocol.AggMasked && c.Noise != dp.GammaShares:
		return bad("Noise", c.Noise, "gamma with masked aggregation (the integer path draws Skellam shares)")
	case !(c.Delta >= 0 && c.Delta < 1):
		return bad("Delta", c.Delta, "a number in [0, 1) (0: DefaultDelta)")
	case c.Dim < 1 || c.Dim > 4096:
		return bad("Dim", c.Dim, "1..4096")
	case c.Rounds < 1:
		return bad("Rounds", c.Rounds, ">= 1")
	case c.PerRound < 1:
		return bad("PerRound", c.PerRound, ">= 1")
	case !(c.LearnRate > 0) || !finite(c.LearnRate):
		return bad("LearnRate", c.LearnRate, "a finite number > 0")
	case !(c.Decay > 0 && c.Decay <= 1):
		return bad("Decay", c.Decay, "a number in (0, 1]")
	case c.DecayEvery < 1:
		return bad("DecayEvery", c.DecayEvery, ">= 1")
	case !(c.Reg >= 0) || !finite(c.Reg):
		return bad("Reg", c.Reg, "a finite number >= 0")
	case c.Variant != RSMF && (!(c.Eps > 0) || !finite(c.Eps)):
		return bad("Eps", c.Eps, "a finite number > 0")
	case !(c.Bound > 0) || !finite(c.Bound):
		return bad("Bound", c.Bound, "a finite number > 0")
	case !(c.InitScale >= 0) || !finite(c.InitScale):
		return bad("InitScale", c.InitScale, "a finite number >= 0")
	case c.Refit < 0:
		return bad("Refit", c.Refit, ">= 0")
	case c.Refit > 0 && c.Variant == Basic:
		return bad("Refit", c.Refit, "0 for the basic scheme (its fixed noise would reveal the rating values once u_i moves)")
	case c.Noise != dp.GammaShares && c.Noise != dp.MixtureShares:
		return bad("Noise", int(c.Noise), "GammaShares or MixtureShares")
	}
	return nil
}

// rate returns γ_t of training round t (from 0).
func (c Config) rate(t int) float64 {
	return c.LearnRate * math.Pow(c.Decay, float64(t/c.DecayEvery))
}

// Report is what a run spent and measured.
type Report struct {
	// EpsRound is the largest ε any rating spends in one round and
	// EpsTotal over the run, with u_i held fixed (the paper's assumption),
	// against the per-position sums. 0 for RSMF, which protects nothing.
	EpsRound, EpsTotal float64
	// EpsTotalUser bounds a whole user's data (ratings and thus u_i)
	// against the sums, by basic composition over every released row;
	// EpsRoundUser the same for one round. These are the proven figures:
	// EpsRound and EpsTotal are the paper's, which assume u_i fixed while
	// u_i is fitted to the user's own ratings, so a changed rating moves
	// every row she rated (privrec/audit's canary measures it).
	EpsTotalUser, EpsRoundUser float64
	// NoiseScale is b = 2ΔB/ε, the Laplace scale of a position's summed
	// noise (0 for RSMF).
	NoiseScale float64
	// Passes counts the passes over the md positions begun; Updated the
	// positions of V updated at least once, out of Positions = m·d.
	Passes, Updated, Positions int
	// ClippedUsers counts users whose fitted u_i met the bound B.
	ClippedUsers int
	// TrainRMSE is the final model's error on the training ratings.
	TrainRMSE float64
	// Aggregation is what ran ("off", "ideal", "masked"); Noise the noise
	// ("gamma-shares", "mixture-shares", "skellam", "none").
	Aggregation, Noise string
	// SkellamMu is μ of a position's summed Skellam(μ) noise on the
	// integer path, in units of 1/64, and Delta the δ at which the ε above
	// hold there (0: pure ε-DP).
	SkellamMu, Delta float64
}

// Train runs the method on train over the in-process transport and
// returns the model gathered from the server's V and the devices' u_i.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config) (*model.Model, *Report, error) {
	cl, err := NewClients(train, cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, err := NewServer(cfg, train.Public(), cfg.Seed)
	if err != nil {
		return nil, nil, err
	}
	opt := protocol.RunOptions{
		Workers: cfg.Workers, Seed: cfg.Seed, Aggregation: cfg.Aggregation,
		Transcript: cfg.Transcript,
		Header: protocol.TranscriptHeader{Method: cfg.Variant.String(), Meta: map[string]string{
			"dim": fmt.Sprint(cfg.Dim), "rounds": fmt.Sprint(cfg.Rounds), "per-round": fmt.Sprint(cfg.PerRound),
			"eps": fmt.Sprint(cfg.Eps), "noise": cfg.Noise.String(), "noise-scale": fmt.Sprint(cl.NoiseScale()),
		}},
		MaxRounds: 2*cfg.Rounds + 2,
	}
	if cfg.OnRound != nil {
		opt.OnRound = func(info protocol.RoundInfo) error {
			if s, ok := srv.(*server).trained(info.Round); ok {
				cfg.OnRound(s)
			}
			return nil
		}
	}
	if err := protocol.Run(ctx, srv, cl.List, opt); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	return cl.Finish(v)
}

// Clients is the client half of a run: one client per user index of the
// training data, built from the users' own ratings.
type Clients struct {
	// List holds one client per user index of the training data, in
	// order; List[u].ID() is u.
	List []protocol.Client
	run  *run
}

// NewClients builds the clients of cfg from train. Run them with a server
// from NewServer for train's number of items and scale, with secure
// aggregation as cfg.Aggregation names. The noise is split among
// train's users.
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
	if !(train.Scale.Max > train.Scale.Min) {
		return nil, fmt.Errorf("%w: rating scale %v has no range", ErrConfig, train.Scale)
	}
	n, m := train.NumUsers(), train.NumItems()
	if cfg.Variant == Basic && float64(n)*float64(m)*float64(cfg.Dim) > 1<<30 {
		return nil, fmt.Errorf("%w: the basic scheme holds %d users × %d items × d = %d dense noise values, above 2^30",
			ErrConfig, n, m, cfg.Dim)
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

// Finish returns the model with the server's final V (Model) and the
// run's figures for it (Report).
func (c *Clients) Finish(v []float32) (*model.Model, *Report, error) {
	m, err := c.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, c.Report(m), nil
}

// Report returns the run's figures for mod, the model from Model: the
// accounting the clients kept from the broadcasts and mod's error on the
// training ratings.
func (c *Clients) Report(mod *model.Model) *Report { return c.run.report(mod) }

// NoiseScale returns b, the Laplace scale of a position's summed noise.
func (c *Clients) NoiseScale() float64 { return c.run.sh.b }

// Sensitivity is the change of one round's release, in L1 and L2 norm
// over its released positions, that a privacy figure charges for: the
// figure's ε of the round is L1 over the Laplace scale b.
type Sensitivity struct{ L1, L2 float64 }

// Charged returns the sensitivities of the release of b's round (a
// sampled training round) that the two figures charge, for a unit whose
// rating is at item j: rating, the paper's (Thm 1, u_i held fixed),
// 2ΔB·scale at each released position of row j and nothing elsewhere;
// user, the user-level figure's (u_i is fitted to the user's own
// ratings, so all of them move every row the user rated, and e·u_l ∈
// [−2ΔB, 2ΔB] on either side), 4ΔB·scale at every released position.
// scale is the round's unbiasing factor of C2 line 5. privrec/audit's
// canary checks measured changes against them.
func (c *Clients) Charged(b *protocol.Broadcast, j int32) (rating, user Sensitivity) {
	sh := c.run.sh
	k := sh.k
	scale := math.Abs(b.Param(paramScale, 0))
	per := 2 * sh.delta * sh.bound * scale
	var inRow, all float64
	if b.AuxDim >= k {
		for q, row := range b.Items {
			for _, on := range b.Aux[q*b.AuxDim : q*b.AuxDim+k] {
				if on == 0 {
					continue
				}
				all++
				if row == j {
					inRow++
				}
			}
		}
	}
	rating = Sensitivity{L1: per * inRow, L2: per * math.Sqrt(inRow)}
	user = Sensitivity{L1: 2 * per * all, L2: 2 * per * math.Sqrt(all)}
	return rating, user
}

// Noiseless switches the float paths' noise shares off, so that the
// uploads carry only their data: for privrec/audit's sensitivity canary,
// which replays the same broadcasts to the clients of two neighbouring
// datasets and compares the noise-free releases. The uploads then protect
// nothing.
func (c *Clients) Noiseless() { c.run.sh.b = 0 }
