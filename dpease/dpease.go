// Package dpease is a private top-N recommender: EASE (Steck, WWW 2019)
// solved on item statistics released under user-level joint differential
// privacy.
//
// The protocol has two rounds between the users' devices and a server.
//
//  1. Counts: each device uploads its item indicator vector
//     scaled by 1/√n_u (n_u its number of items), so a user's whole
//     upload has L2 norm 1. The server receives the sum (secure
//     aggregation) and adds N(0, σ_c²) to every item: the noisy
//     popularity ŝ.
//  2. Gram: the server broadcasts the M items with the largest ŝ.
//     Each device forms x_u, its indicator on those items (n'_u of them),
//     and uploads the upper triangle (diagonal included) of
//     x_u x_uᵀ / max(n'_u, c): its L2 norm is at most √((1+1/c)/2). The
//     server adds N(0, σ_g²) to every entry of the summed triangle.
//
// Everything after is post-processing of the two releases: the server
// solves B = I − P·diag(P)⁻¹ with P = (G̃ + λI)⁻¹, λ = Lambda +
// LambdaNoise·σ_g·√M (the noise's spectral scale), and publishes the
// item factors: item i's row is column slot(i) of B, plus PopWeight·ŝ_i/
// max ŝ in a last coordinate. A device scores every item with its own
// history, x_u·B + PopWeight·ŝ_i/max ŝ, on the device: the history never
// leaves it. Items outside the top M are ranked by ŝ alone. When the
// counts are weak against their noise (fewer than M items with ŝ ≥
// PopDiagSNR·σ_c, default 2: few users for the budget), the top M items'
// popularity coordinate is PopWeight·(1 + G̃_ii/max G̃_jj) instead, from
// the Gram's diagonal (the larger share of ρ), above every other item's;
// a rule on the released counts alone, which keeps the ML-1M defaults.
//
// Graceful degradation (issue 41, Config.Shrink, the default): how much
// personalisation the releases can carry is decided by public and
// released quantities only, so that on any data the lists are at least
// DP popularity's at the same (ε, δ):
//
//   - Popularity mode, before anything is released: a user's Gram weights
//     sum to at most 1 on the diagonal, so the Gram's mass is at most the
//     public roster N (Config.Roster: the devices enrolled; in process the
//     training data's users). When N < RosterRidge·λ (4 times the ridge
//     the noise forces at the 0.1 split) the item-item weights cannot rise
//     above the ridge: the counts get PopularityFrac (0.99) of ρ and the
//     item-item weights are 0, so the list is DP popularity at nearly the
//     whole budget. Otherwise the counts get PersonalFrac (0.1). The
//     server broadcasts the split; devices calibrate their integer
//     uploads with it (any split keeps the total ρ).
//   - Personal weight, after the Gram: the item-item weights are scaled
//     by h·SNR/(h·SNR + 1) (PersonalWeight), the posterior-mean weight of
//     a score that sums h history items' weights, whose signals add
//     coherently and whose noise adds in quadrature; SNR is the released
//     off-diagonal entries' variance in excess of the known noise
//     variance σ_g², over σ_g², and h the release's typical history
//     1 + 2·Σ_off G̃/Σ_diag G̃. A weight of 0 lists DP popularity (the
//     result says so).
//
// A served run takes the roster from its enrolled count when enrolment
// closes (SetRoster, through protocol.RosterSetter), so it resolves the
// same split as in process; the personal weight applies on every path. Measured on seven datasets at
// ε = 1 and 10, 5 seeds (docs/results/dpease-any-data.md): at least 0.97
// of dp-pop's Recall@20 and NDCG@20 in 25 of 28 ratios, the other three
// (Douban and CiaoDVD at ε = 1, 0.93–0.96) within seed noise; ML-1M as
// before (1.34 × dp-pop at ε = 1, Recall@20 0.298 at ε = 10).
//
// Privacy: the unit is one user; the neighbouring relation is zero-out:
// one user's ratings all removed, the user's participation public (a
// deployment's server counts the participants exactly; a device without
// ratings contributes nothing, so the sensitivities are add/remove's of
// the user's ratings). Report.EpsReplace: one history replaced by any
// other. Each release has the sensitivity above, FracCounts of the zCDP
// budget ρ on the counts, the rest on the Gram, and ε is an upper bound
// over the whole run at Delta, listed release by release in
// Report.Ledger. A user's recommendations are computed from their own
// history on the device (joint DP). Hyperparameter tuning is not counted.
// Who is trusted depends on Config.Aggregation:
//
//   - ideal (in process): each release is the Gaussian mechanism, composed
//     in zCDP. The server is trusted to add the noise to the sum it
//     receives and with no single upload (the ideal functionality of
//     secure aggregation).
//   - masked (privrec serve's default; masked.go): the devices upload
//     quantized dense vectors with their shares of distributed Skellam
//     noise, summed by SecAgg+, so the server learns only the noisy sums
//     and is trusted with nothing; the devices are trusted to add their
//     shares. ε is the Rényi accounting of the two Skellam releases
//     (quantization slack included), calibrated to at most Eps.
//   - off: the server reads every upload; the ε holds only against
//     observers of the releases.
//
// The noise (the server's, or the devices' shares and rounding) is drawn
// from crypto/rand unless Config.Seeded selects the reproducible test
// mode (noise from the run's seed; over the network, the devices' shares
// are reproducible when the deployment runs in its test mode, --seed).
package dpease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/maskcal"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
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

// Blend returns the personal weight of the last solve (zero before the
// Gram round or with Shrink off).
func (s *Server) Blend() Blend { return s.blend }

// Personal reports whether the item factors v (NumItems×(M+1)) carry
// any item-item weight; false means every list is the popularity
// coordinate's, DP popularity.
func Personal(v []float32, dim int) bool {
	for j := 0; j+dim <= len(v); j += dim {
		for _, x := range v[j : j+dim-1] {
			if x != 0 {
				return true
			}
		}
	}
	return false
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
	sg := rdp.GaussianSigmaFor((1-PersonalFrac)*rho, GramL2(c.Cap))
	lam := c.Lambda + ln*sg*math.Sqrt(float64(m))
	return float64(c.Roster) < RosterRidge*lam
}

// PopularityMode reports whether the run is in popularity mode, decided
// before any release from public quantities alone (the roster N, ε, δ and
// the config, with FracCounts by roster): every user's whole Gram
// contribution weighs at most 1 (the diagonal of x xᵀ/max(n', c) sums to
// at most 1), so the Gram's total mass is at most N, and when N is below
// RosterRidge times the ridge λ = Lambda + LambdaNoise·σ_g·√M that the
// noise forces on the solve, the item-item weights cannot rise above the
// ridge's shrinkage. The run then spends PopularityFrac of ρ on the counts
// and lists DP popularity (the item-item weights are 0).
func (s *Server) PopularityMode() bool { return s.popMode }

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
	}
	return nil
}

// GramL2 is the L2 sensitivity of the Gram release for cap c.
func GramL2(c int) float64 { return math.Sqrt((1 + 1/float64(c)) / 2) }

// Report is what a run spent.
type Report struct {
	Ledger rdp.Ledger
	Rho    float64 // the zCDP budget (Eps, Delta) allows
	// Eps is the run's ε at Delta for add/remove-one-user neighbours: the
	// ledger's (Gaussian releases, zCDP) on the ideal path, the Skellam
	// releases' (Rényi, every noise share arriving) on the integer path.
	Eps float64
	// EpsReplace is the same for replace-one-user neighbours (every
	// sensitivity doubled).
	EpsReplace float64
	Stats      map[string]float64
}

// Server is the server half.
type Server struct {
	cfg    Config
	n      int
	m      int // min(TopItems, n)
	rho    float64
	sigmaC float64
	sigmaG float64
	noise  *rand.Rand
	st     state
	led    rdp.Ledger
	gram   []float64 // the last released noisy Gram triangle (for tests)
	// The integer path (nil mask on the ideal path): its calibration and
	// the last broadcast (a deployment adds its noise-share parameters to
	// it; the sum check and the accounting read them).
	mask *maskPlan
	b    protocol.Broadcast
	// Validation experiments only (validation_test.go sets it; zero in
	// every run of the method): snr > 0 lets the released counts choose M
	// (chooseM), post-processing.
	snr float64
	// blend is the personal weight of the last solve (cfg.Shrink).
	blend Blend
	// popMode: the config resolved to popularity mode (PopularityMode).
	popMode bool
	// given and seed are NewServer's arguments, for SetRoster.
	given Config
	seed  uint64
}

// Blend is what the released Gram says about how much personalisation it
// can carry (PersonalWeight).
type Blend struct {
	// EntrySNR is the signal-to-noise ratio of one off-diagonal Gram
	// entry: (Var − σ²)/σ², Var the released entries' variance and σ²
	// the known noise variance (0 when the excess is not detectable).
	EntrySNR float64
	// History is the typical number of top items in a user's history,
	// 1 + 2·(off-diagonal sum)/(diagonal sum) of the release.
	History float64
	// Weight is the posterior-mean (Wiener) weight of a history-sum
	// score, History·EntrySNR/(History·EntrySNR + 1): the share of the
	// personal score kept; 0 means the list is DP popularity.
	Weight float64
}

// PersonalWeight reads the released m×m Gram triangle g and its known
// per-entry noise σ = sigma and returns the weight of the personal part
// of every score. A history of h items sums h weights whose signals add
// coherently (h·s) while their noise adds in quadrature (√h·σ_B), so the
// score's signal-to-noise ratio is h·SNR for an entry SNR; the Wiener
// (posterior-mean) weight of the score is h·SNR/(h·SNR + 1). The entry
// SNR is the off-diagonal entries' variance in excess of σ² over σ²
// (detectable only above ShrinkDetect standard errors of the noise's
// sample variance), and h the release's typical history. Post-processing
// of the release.
func PersonalWeight(g []float64, m int, sigma float64) Blend {
	n := m * (m - 1) / 2
	var bl Blend
	if n < 2 || !(sigma > 0) {
		return bl
	}
	var off, diag float64
	for i := range m {
		diag += g[pairIndex(i, i, m)]
		for j := i + 1; j < m; j++ {
			off += g[pairIndex(i, j, m)]
		}
	}
	mean := off / float64(n)
	var ss float64
	for i := range m {
		for j := i + 1; j < m; j++ {
			d := g[pairIndex(i, j, m)] - mean
			ss += d * d
		}
	}
	v, s2 := ss/float64(n-1), sigma*sigma
	if excess := v - s2; excess > ShrinkDetect*s2*math.Sqrt(2/float64(n)) {
		bl.EntrySNR = excess / s2
	}
	bl.History = 1
	if diag > 0 && off > 0 {
		bl.History = 1 + 2*off/diag
	}
	x := bl.History * bl.EntrySNR
	bl.Weight = x / (x + 1)
	return bl
}

// ShrinkDetect is the number of standard errors of the noise's sample
// variance by which the released off-diagonal variance must exceed the
// noise variance for PersonalWeight to find a signal.
const ShrinkDetect = 3

// state is the server's state between rounds (its snapshot).
type state struct {
	Round  int
	Counts []float64 // noisy popularity ŝ after round 0
	Top    []int32   // the top M items after round 0
	V      []float32 // item factors after the Gram round
	// The integer path: the clients counted at setup, and per release
	// (counts, Gram) the noise shares that arrived and the number of
	// clients each share was drawn for.
	Clients    int
	ArrA, ArrS []int
}

const streamNoise uint64 = 0x6470_6561 // "dpea"

// NewServer returns the server for a catalog of numItems items; seed
// seeds the noise only in the test mode (cfg.Seeded).
func NewServer(cfg Config, numItems int, seed uint64) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	popMode, given := cfg.popularityMode(), cfg
	cfg = cfg.Resolve()
	if numItems < 1 {
		return nil, errors.New("dpease: no items")
	}
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpease: %w", err)
	}
	s := &Server{cfg: cfg, n: numItems, m: min(cfg.TopItems, numItems), rho: rho, popMode: popMode, given: given, seed: seed}
	s.sigmaC = rdp.GaussianSigmaFor(cfg.FracCounts*rho, 1)
	s.sigmaG = rdp.GaussianSigmaFor((1-cfg.FracCounts)*rho, GramL2(cfg.Cap))
	if cfg.Aggregation == protocol.AggMasked {
		if s.mask, err = newMaskPlan(cfg, numItems); err != nil {
			return nil, err
		}
		s.st.ArrA, s.st.ArrS = make([]int, 2), make([]int, 2)
	}
	if cfg.Seeded {
		s.noise = rng.New(seed, streamNoise)
	} else {
		s.noise = rng.Crypto()
	}
	return s, nil
}

// SetRoster gives a server built before its roster was known (a served
// run's, built before enrolment closes, with Config.Roster 0) the public
// roster size n, the devices enrolled: the budget split and popularity
// mode then follow the roster rule exactly as in process, where the
// roster is the training data's users (WithRoster). A deployment calls it
// once enrolment has closed, before the first broadcast, and again with
// the same n when it restarts (before restoring a snapshot), so that the
// split never changes within a run. It does nothing when the config gave
// a roster or n ≤ 0, and fails after the first round.
//
// The roster is public under the neighbouring relation of the claim: a
// user's data is replaced, not their enrolment (zero-out), as in process.
func (s *Server) SetRoster(n int) error {
	if s.given.Roster != 0 || n <= 0 {
		return nil
	}
	if s.st.Round > 0 {
		return fmt.Errorf("dpease: SetRoster(%d) after round %d: the budget split is fixed before the first release", n, s.st.Round)
	}
	c := s.given
	c.Roster = n
	ns, err := NewServer(c, s.n, s.seed)
	if err != nil {
		return err
	}
	ns.given = s.given // a restart calls SetRoster again
	*s = *ns
	return nil
}

// pairs is the number of entries of an m×m upper triangle.
func pairs(m int) int { return m * (m + 1) / 2 }

// pairIndex is the index of (a, b), a ≤ b, in the row-major upper
// triangle of an m×m matrix.
func pairIndex(a, b, m int) int { return a*m - a*(a-1)/2 + (b - a) }

// Broadcast parameters.
const (
	paramStep    = "dpease-step" // 0: counts, 1: Gram (absent: the round number)
	paramClients = "clients"     // the integer path: the clients counted at setup
	paramFrac    = "frac-counts" // the counts' share of ρ, as the server resolved it
)

// offset is the number of rounds before the counts: 1 (the setup round)
// on the integer path, else 0.
func (s *Server) offset() int {
	if s.mask != nil {
		return 1
	}
	return 0
}

// Broadcast implements protocol.Server. On the integer path round 0 is a
// setup round (each device uploads the word 1, so the server counts the
// clients its noise shares are drawn for), and the counts and the Gram
// follow as rounds 1 and 2, each asking for a dense vector of words.
func (s *Server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.st.Round || s.Done() {
		return nil, fmt.Errorf("dpease: broadcast of round %d, the server is at round %d of %d", round, s.st.Round, 2+s.offset())
	}
	st := round - s.offset()
	b := &s.b
	switch st {
	case -1:
		*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseSetup, Dim: 1, NumItems: s.n, Words: 1, Bits: 32}
		return b, nil
	case 0:
		*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, Dim: 1, NumItems: s.n}
	case 1:
		// The uploads index the pairs of the top items' upper triangle:
		// the index space is the larger of the catalog and the pairs.
		*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, Dim: 1,
			NumItems: max(s.n, pairs(s.m)), Items: s.st.Top}
	}
	b.Params = map[string]float64{paramStep: float64(st), paramFrac: s.cfg.FracCounts}
	if s.mask != nil {
		b.Words, b.Bits = s.mask.steps[st].D+1, 32
		b.Params[paramClients] = float64(s.st.Clients)
	}
	return b, nil
}

// sum adds the uploads of a round into a dense vector of length size.
func sum(ups []*protocol.Upload, size int) ([]float64, error) {
	out := make([]float64, size)
	for _, u := range ups {
		if u == nil {
			continue
		}
		if len(u.Values) != len(u.Items) {
			return nil, fmt.Errorf("dpease: upload of client %d: %d values for %d items", u.Client, len(u.Values), len(u.Items))
		}
		for k, i := range u.Items {
			if int(i) >= size {
				return nil, fmt.Errorf("dpease: upload of client %d: index %d ≥ %d", u.Client, i, size)
			}
			out[i] += float64(u.Values[k])
		}
	}
	return out, nil
}

// Aggregate implements protocol.Server: it adds up the round's uploads
// (one summed upload under secure aggregation), adds the Gaussian noise
// on the ideal path (the integer path's sum carries the devices' Skellam
// shares), records the release and updates the public state.
func (s *Server) Aggregate(round int, ups []*protocol.Upload) error {
	if round != s.st.Round || s.Done() {
		return fmt.Errorf("dpease: aggregate of round %d, the server is at round %d of %d", round, s.st.Round, 2+s.offset())
	}
	st := round - s.offset()
	var sums []float64
	var err error
	size := s.n
	if st == 1 {
		size = pairs(s.m)
	}
	if s.mask != nil {
		if sums, err = s.decode(round, st, ups); err != nil || st < 0 {
			return err
		}
	} else if sums, err = sum(ups, size); err != nil {
		return err
	}
	switch st {
	case 0:
		c := sums
		if s.mask == nil {
			for j := range c {
				c[j] += s.sigmaC * s.noise.NormFloat64()
			}
		}
		s.led.Gaussian(countsRelease, 1, 1, s.sigmaC)
		s.st.Counts = c
		s.m = s.chooseM(c)
		s.st.Top = TopItems(c, s.m)
	case 1:
		g := sums
		if s.mask == nil {
			for p := range g {
				g[p] += s.sigmaG * s.noise.NormFloat64()
			}
		}
		s.gram = g
		s.led.Gaussian(s.gramRelease(), 1, GramL2(s.cfg.Cap), s.sigmaG)
		v, err := s.solve(g)
		if err != nil {
			return err
		}
		s.st.V = v
	}
	s.st.Round = round + 1
	return nil
}

// chooseM returns the number of items in the Gram release from the
// released noisy counts c (post-processing): cfg's M, or with the
// validation hook snr > 0 the number of items whose noisy count clears
// snr·σ_c, between 1 and cfg's M.
func (s *Server) chooseM(c []float64) int {
	m := min(s.cfg.TopItems, s.n)
	if !(s.snr > 0) {
		return m
	}
	return max(1, min(m, signalItems(c, s.snr*s.sigmaC)))
}

// PopDiag reports whether the solve takes the top items' popularity from
// the Gram's diagonal: after the counts release, when fewer than M items'
// noisy counts clear PopDiagSNR·σ_c (a function of the released counts
// alone).
func (s *Server) PopDiag() bool {
	k := s.cfg.PopDiagSNR
	return !s.popMode && k > 0 && s.st.Counts != nil && (math.IsInf(k, 1) || signalItems(s.st.Counts, k*s.sigmaC) < s.m)
}

// signalItems returns the number of entries of c at or above thr.
func signalItems(c []float64, thr float64) int {
	k := 0
	for _, x := range c {
		if x >= thr {
			k++
		}
	}
	return k
}

// countsRelease names the counts in the ledger.
const countsRelease = "item counts (indicators / √n_u)"

// gramRelease names the Gram in the ledger.
func (s *Server) gramRelease() string {
	return fmt.Sprintf("Gram of the top %d items (upper triangle, weights 1/max(n', %d))", s.m, s.cfg.Cap)
}

// Lambda returns the ridge of the EASE solve.
func (s *Server) Lambda() float64 {
	return s.cfg.Lambda + s.cfg.LambdaNoise*s.sigmaG*math.Sqrt(float64(s.m))
}

// gramNoiseSigma returns the standard deviation of the noise in each
// entry of the released Gram: σ_g on the ideal path; on the integer path
// the decoded Skellam noise's, scaled by the share of the noise that
// arrived. A function of the config, the catalog size and the arrival
// counts, never of the data.
func (s *Server) gramNoiseSigma() float64 {
	if s.mask == nil {
		return s.sigmaG
	}
	f := 1.0
	if s.st.ArrS[1] > 0 {
		f = math.Min(1, float64(s.st.ArrA[1])/float64(s.st.ArrS[1]))
	}
	return s.mask.steps[1].NoiseSigma(0) * math.Sqrt(f)
}

// solve turns the noisy Gram triangle g into item factors (post-processing).
func (s *Server) solve(g []float64) ([]float32, error) {
	m := s.m
	a := make([]float64, m*m)
	lam := s.Lambda()
	for i := range m {
		for j := i; j < m; j++ {
			x := g[pairIndex(i, j, m)]
			a[i*m+j], a[j*m+i] = x, x
		}
		a[i*m+i] += lam
	}
	p, ok := spdInverse(a, m)
	if !ok {
		return nil, fmt.Errorf("dpease: the noisy Gram plus λ = %.4g is not positive definite: raise lambda or lambda-noise", lam)
	}
	dim := m + 1
	v := make([]float32, s.n*dim)
	maxc := 0.0
	for _, c := range s.st.Counts {
		maxc = math.Max(maxc, c)
	}
	for j := range s.n {
		if maxc > 0 {
			v[j*dim+m] = float32(s.cfg.PopWeight * s.st.Counts[j] / maxc)
		}
	}
	if s.PopDiag() {
		// The top items' coordinate from the Gram's diagonal, in
		// PopWeight·[1, 2], above every other item's (at most PopWeight).
		maxd := 0.0
		for sj := range m {
			maxd = math.Max(maxd, g[pairIndex(sj, sj, m)])
		}
		for sj, j := range s.st.Top {
			x := 0.0
			if maxd > 0 {
				x = math.Max(g[pairIndex(sj, sj, m)], 0) / maxd
			}
			v[int(j)*dim+m] = float32(s.cfg.PopWeight * (1 + x))
		}
	}
	// B[k][j] = −P[k][j] / P[j][j] off the diagonal, 0 on it.
	b := make([]float64, m*m)
	for j := range m {
		pjj := p[j*m+j]
		for k := range m {
			if k != j {
				b[k*m+j] = -p[k*m+j] / pjj
			}
		}
	}
	if s.cfg.Shrink {
		s.blend = PersonalWeight(g, m, s.gramNoiseSigma())
		if s.PopularityMode() {
			s.blend.Weight = 0
		}
		for k := range b {
			b[k] *= s.blend.Weight
		}
	}
	for sj, j := range s.st.Top {
		for k := range m {
			if k != sj {
				v[int(j)*dim+k] = float32(b[k*m+sj])
			}
		}
	}
	return v, nil
}

// spdInverse inverts the symmetric positive definite n×n matrix a (full,
// row-major) in place by Cholesky; false when a is not positive definite.
func spdInverse(a []float64, n int) ([]float64, bool) {
	// Cholesky a = L Lᵀ, L in the lower triangle.
	for j := range n {
		rj := a[j*n : j*n+j]
		s := a[j*n+j]
		for _, x := range rj {
			s -= x * x
		}
		if !(s > 0) {
			return nil, false
		}
		l := math.Sqrt(s)
		a[j*n+j] = l
		for i := j + 1; i < n; i++ {
			ri := a[i*n : i*n+j]
			t := a[i*n+j]
			for k, x := range ri {
				t -= x * rj[k]
			}
			a[i*n+j] = t / l
		}
	}
	// W = L⁻¹ (lower triangular), row by row.
	w := make([]float64, n*n)
	for i := range n {
		w[i*n+i] = 1 / a[i*n+i]
		for j := range i {
			var t float64
			for k := j; k < i; k++ {
				t += a[i*n+k] * w[k*n+j]
			}
			w[i*n+j] = -t / a[i*n+i]
		}
	}
	// a⁻¹ = Wᵀ W: (i, j) = Σ_k W[k][i] W[k][j], k ≥ max(i, j).
	inv := make([]float64, n*n)
	for k := range n {
		wk := w[k*n : k*n+k+1]
		for i, x := range wk {
			if x == 0 {
				continue
			}
			row := inv[i*n : i*n+k+1]
			for j, y := range wk {
				row[j] += x * y
			}
		}
	}
	return inv, true
}

// TopItems returns the m items with the largest c, largest first (ties
// by index).
func TopItems(c []float64, m int) []int32 {
	idx := make([]int32, len(c))
	for j := range idx {
		idx[j] = int32(j)
	}
	sort.SliceStable(idx, func(a, b int) bool { return c[idx[a]] > c[idx[b]] })
	return slices.Clone(idx[:min(m, len(c))])
}

// Done implements protocol.Server.
func (s *Server) Done() bool { return s.st.Round >= 2+s.offset() }

// Round implements protocol.Stateful.
func (s *Server) Round() int { return s.st.Round }

// Factors implements protocol.Stateful: after the run, the item factors
// (NumItems×(M+1)); before it, nil.
func (s *Server) Factors() ([]float32, int) {
	if s.st.V == nil {
		return nil, s.m + 1
	}
	return s.st.V, s.m + 1
}

// UserItems implements protocol.Indicating: the top M items, whose
// indicator (and a constant 1) is a user's row; nil before the counts
// round.
func (s *Server) UserItems() []int32 { return s.st.Top }

// Ledger returns the releases so far.
func (s *Server) Ledger() *rdp.Ledger { return &s.led }

// Sigmas returns the noise of the counts and of the Gram.
func (s *Server) Sigmas() (counts, gram float64) { return s.sigmaC, s.sigmaG }

const snapVersion = 1

type snapshot struct {
	State    state
	Releases []rdp.Release
}

// MarshalBinary implements protocol.Stateful.
func (s *Server) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(snapVersion, snapshot{State: s.st, Releases: s.led.Releases()})
}

// UnmarshalBinary implements protocol.Stateful.
func (s *Server) UnmarshalBinary(data []byte) error {
	var sn snapshot
	if err := protocol.DecodeSnapshot(data, snapVersion, &sn); err != nil {
		return fmt.Errorf("dpease: %w", err)
	}
	st := sn.State
	o := s.offset()
	if st.Round < 0 || st.Round > 2+o || (st.Round >= 1+o && (len(st.Counts) != s.n || len(st.Top) != s.m)) ||
		(st.Round == 2+o && len(st.V) != s.n*(s.m+1)) ||
		(s.mask != nil) != (st.ArrA != nil) || (st.ArrA != nil && (len(st.ArrA) != 2 || len(st.ArrS) != 2)) {
		return errors.New("dpease: the snapshot does not fit this server")
	}
	s.st = st
	s.led = rdp.Ledger{}
	for _, r := range sn.Releases {
		s.led.Gaussian(r.Name, r.Count, r.L2, r.Sigma)
	}
	return nil
}

// client is one user's device.
type client struct {
	id    int
	items []int32
	cfg   *Config
	pub   *public
	n     int // the catalog's size, from the counts round
}

// public is what every device learns from the broadcasts: the top items,
// the budget split the server resolved; and the integer path's
// calibration, built on first use.
type public struct {
	once      sync.Once
	top       []int32
	mu        sync.Mutex
	frac      float64 // the broadcast's counts share of ρ (0: none seen)
	plan      *maskPlan
	noiseless bool // Clients.Noiseless: no Skellam shares (tests only)
}

// setFrac records the counts' share of ρ a broadcast carries: it must be
// in (0, 1) and the same in every round. Any share keeps the total ρ, so
// a device may take the server's.
func (p *public) setFrac(b *protocol.Broadcast) error {
	f, ok := b.Params[paramFrac]
	if !ok {
		return nil
	}
	if !(f > 0 && f < 1) {
		return fmt.Errorf("dpease: round %d: the broadcast's counts share %v of ρ is not in (0, 1)", b.Round, f)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frac != 0 && p.frac != f {
		return fmt.Errorf("dpease: round %d: the broadcast's counts share %v of ρ, earlier %v", b.Round, f, p.frac)
	}
	p.frac = f
	return nil
}

// maskPlan returns the integer path's calibration of cfg for n items,
// with the broadcast's budget split when one was seen.
func (p *public) maskPlan(cfg Config, n int) (*maskPlan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frac > 0 {
		cfg.FracCounts = p.frac
	}
	if p.plan == nil || p.plan.n != n || p.plan.frac != cfg.Resolve().FracCounts {
		mp, err := newMaskPlan(cfg.Resolve(), n)
		if err != nil {
			return nil, err
		}
		p.plan = mp
	}
	return p.plan, nil
}

// ID implements protocol.Client.
func (c *client) ID() int { return c.id }

// Round implements protocol.Client. On the ideal path the uploads are
// sparse (the items or pairs the user has); on the integer path (the
// broadcast asks for Words) they are dense vectors over every coordinate
// of the release, quantized, with the device's Skellam noise share drawn
// from r, so the server, which sees only the sum, cannot tell who has
// data where.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	if b.Phase == protocol.PhaseSetup {
		if b.Words != 1 {
			return nil, fmt.Errorf("dpease: setup round %d asks for %d words, want 1", b.Round, b.Words)
		}
		return &protocol.Upload{Client: c.id, Round: b.Round, Words: []uint32{1}}, nil
	}
	st := int(b.Param(paramStep, float64(b.Round)))
	masked := b.Words > 0
	if err := c.pub.setFrac(b); err != nil {
		return nil, err
	}
	for _, j := range c.items {
		if st == 0 && int(j) >= b.NumItems {
			return nil, fmt.Errorf("dpease: round %d: the user's item %d is outside the server's catalog of %d", b.Round, j, b.NumItems)
		}
	}
	if len(c.items) == 0 && !masked {
		return nil, nil
	}
	switch st {
	case 0:
		c.n = b.NumItems
		if !masked {
			w := float32(1 / math.Sqrt(float64(len(c.items))))
			vals := make([]float32, len(c.items))
			for k := range vals {
				vals[k] = w
			}
			return &protocol.Upload{Client: c.id, Round: b.Round, Items: slices.Clone(c.items), Values: vals}, nil
		}
		ms, err := c.step(b, 0)
		if err != nil {
			return nil, err
		}
		x := make([]float64, ms.D)
		for _, j := range c.items {
			x[j] = 1 / math.Sqrt(float64(len(c.items)))
		}
		return c.encode(b, ms, x, r)
	case 1:
		c.pub.once.Do(func() { c.pub.top = slices.Clone(b.Items) })
		up := GramUpload(c.id, c.items, b.Items, c.cfg.Cap)
		if !masked {
			if up != nil {
				up.Round = b.Round
			}
			return up, nil
		}
		ms, err := c.step(b, 1)
		if err != nil {
			return nil, err
		}
		x := make([]float64, ms.D)
		if up != nil {
			for k, p := range up.Items {
				x[p] = float64(up.Values[k])
			}
		}
		return c.encode(b, ms, x, r)
	}
	return nil, fmt.Errorf("dpease: no step %d (round %d)", st, b.Round)
}

// step returns the integer path's calibration of release st (0 counts, 1
// Gram), after checking that the broadcast's shape is the public plan's
// (before anything is allocated for it).
func (c *client) step(b *protocol.Broadcast, st int) (*maskcal.Step, error) {
	if c.n <= 0 {
		return nil, fmt.Errorf("dpease: round %d: the device saw no counts round, so it does not know the catalog's size", b.Round)
	}
	p, err := c.pub.maskPlan(*c.cfg, c.n)
	if err != nil {
		return nil, err
	}
	ms := &p.steps[st]
	if b.Words != ms.D+1 || (st == 1 && len(b.Items) != p.m) {
		return nil, fmt.Errorf("dpease: round %d asks for %d words (%d top items), the integer path's plan for %d items has %d (%d)",
			b.Round, b.Words, len(b.Items), c.n, ms.D+1, p.m)
	}
	return ms, nil
}

// encode returns the device's integer upload of release ms from its dense
// float statistics x (maskcal.Step.Encode).
func (c *client) encode(b *protocol.Broadcast, ms *maskcal.Step, x []float64, r *rand.Rand) (*protocol.Upload, error) {
	// The noise scratch is not kept: a vendor process holds thousands of
	// devices, and the Gram's is M(M+1)/2 values.
	noise := make([]int64, ms.D)
	return &protocol.Upload{Client: c.id, Round: b.Round, Words: ms.Encode(x, r, shares(b), noise, c.pub.noiseless)}, nil
}

// slots returns the positions in top of the items (sorted ascending).
func slots(items, top []int32) []int {
	pos := make(map[int32]int, len(top))
	for k, j := range top {
		pos[j] = k
	}
	var out []int
	for _, j := range items {
		if k, ok := pos[j]; ok {
			out = append(out, k)
		}
	}
	sort.Ints(out)
	return out
}

// GramUpload is a device's Gram upload: the upper triangle of
// x xᵀ / max(n', cap) over its items among top.
func GramUpload(id int, items, top []int32, capN int) *protocol.Upload {
	sl := slots(items, top)
	if len(sl) == 0 {
		return nil
	}
	m := len(top)
	w := float32(1 / float64(max(len(sl), capN)))
	up := &protocol.Upload{Client: id, Round: 1, Items: make([]int32, 0, len(sl)*(len(sl)+1)/2)}
	for a, i := range sl {
		for _, j := range sl[a:] {
			up.Items = append(up.Items, int32(pairIndex(i, j, m)))
		}
	}
	up.Values = make([]float32, len(up.Items))
	for k := range up.Values {
		up.Values[k] = w
	}
	return up
}

// Clients is the client half.
type Clients struct {
	List  []protocol.Client
	train *ratings.Dataset
	pub   *public
}

// NewClients returns one client per user of train with ratings, with
// the Gram weight cap of cfg (the device's own, not the broadcast's).
func NewClients(train *ratings.Dataset, cfg Config) *Clients {
	byUser := train.ByUser()
	cl := &Clients{train: train, pub: &public{}}
	for u := range train.NumUsers() {
		items, _ := byUser.Row(u)
		if len(items) == 0 {
			continue
		}
		cl.List = append(cl.List, &client{id: u, items: slices.Clone(items), cfg: &cfg, pub: cl.pub})
	}
	return cl
}

// Model builds the evaluation harness's model from the published item
// factors v (NumItems×(M+1)): user u's row is their indicator on the top
// items (M coordinates) and 1, computed from their own history.
func (cl *Clients) Model(v []float32) (*model.Model, error) {
	top := cl.pub.top
	d := cl.train
	dim := len(top) + 1
	if len(v) != d.NumItems()*dim {
		return nil, fmt.Errorf("dpease: %d factors for %d items × %d", len(v), d.NumItems(), dim)
	}
	byUser := d.ByUser()
	nu := d.NumUsers()
	u := make([]float32, nu*dim)
	for uu := range nu {
		items, _ := byUser.Row(uu)
		for _, k := range slots(items, top) {
			u[uu*dim+k] = 1
		}
		u[uu*dim+dim-1] = 1
	}
	// Every user row is known (Rated nil): a user without training items
	// has the empty history, whose scores are the popularity coordinate,
	// so they get the DP popularity list, not the catalog's index order.
	return &model.Model{Dim: dim, NumUsers: nu, NumItems: d.NumItems(), U: u, V: slices.Clone(v),
		Ranking: true, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles,
		UserItems: slices.Clone(top)}, nil
}

// Frac returns the counts' share of ρ the server's broadcasts carried
// (the split it resolved, PopularityMode), or 0 before any broadcast.
func (cl *Clients) Frac() float64 {
	cl.pub.mu.Lock()
	defer cl.pub.mu.Unlock()
	return cl.pub.frac
}

// Noiseless switches the integer path's Skellam shares off, so that the
// masked uploads carry only their data (tests compare the noise-free sums
// of both paths). The uploads then protect nothing.
func (cl *Clients) Noiseless() { cl.pub.noiseless = true }

// Train runs the protocol in process over protocol.InMem with
// cfg.Aggregation: the server's noise (ideal path) comes from crypto/rand,
// and so do the devices' noise shares and rounding (integer path: their
// streams are seeded by a secret seed), unless cfg.Seeded selects the
// test mode, where seed reproduces both. The roster is train's users
// (WithRoster) unless cfg gives one.
func Train(ctx context.Context, train *ratings.Dataset, cfg Config, seed uint64) (*model.Model, *Report, error) {
	cfg = cfg.WithRoster(train)
	srv, err := NewServer(cfg, train.NumItems(), seed)
	if err != nil {
		return nil, nil, err
	}
	cl := NewClients(train, cfg)
	runSeed := seed
	if !cfg.Seeded {
		runSeed = rng.Crypto().Uint64()
	}
	if err := protocol.Run(ctx, srv, cl.List, protocol.RunOptions{Workers: cfg.Workers, Seed: runSeed, Aggregation: cfg.Aggregation}); err != nil {
		return nil, nil, err
	}
	v, _ := srv.Factors()
	m, err := cl.Model(v)
	if err != nil {
		return nil, nil, err
	}
	return m, srv.Report(), nil
}

// Report returns what the run spent so far (on the integer path Eps is
// the calibrated plan's, every share arriving; Stats["eps_spent"] counts
// the shares that arrived).
func (s *Server) Report() *Report {
	r := s.report(s.led)
	if s.mask != nil && s.st.Round > 1 {
		r.Stats["eps_spent"], _, _ = s.Spent()
	}
	return r
}

// report is the report of the releases in l.
func (s *Server) report(l rdp.Ledger) *Report {
	r := &Report{Ledger: l, Rho: s.rho, Eps: l.Epsilon(s.cfg.Delta), EpsReplace: rdp.ZCDPToDP(4*l.Rho(), s.cfg.Delta)}
	r.Stats = s.stats()
	if s.mask != nil {
		r.Eps, r.EpsReplace = s.mask.eps, s.mask.epsR
		r.Stats["skellam_eta"] = s.mask.eta
		r.Stats["sigma_counts_skellam"] = s.mask.steps[0].NoiseSigma(0)
		r.Stats["sigma_gram_skellam"] = s.mask.steps[1].NoiseSigma(0)
	}
	return r
}

// stats are the run's figures, the resolved ε-dependent settings
// included.
func (s *Server) stats() map[string]float64 {
	st := map[string]float64{"sigma_counts": s.sigmaC, "sigma_gram": s.sigmaG, "lambda": s.Lambda(),
		"top_items": float64(s.m), "lambda_noise": s.cfg.LambdaNoise, "pop_weight": s.cfg.PopWeight}
	st["frac_counts"] = s.cfg.FracCounts
	return st
}

// PlannedReport returns the report of a full run of this server's config
// (both releases), without running it: the ledger depends only on the
// config, never on the data.
func (s *Server) PlannedReport() *Report {
	var l rdp.Ledger
	l.Gaussian(countsRelease, 1, 1, s.sigmaC)
	l.Gaussian(s.gramRelease(), 1, GramL2(s.cfg.Cap), s.sigmaG)
	return s.report(l)
}

// ReleaseEps returns the ε at Delta of each release taken alone (counts,
// Gram): the Gaussian releases' zCDP shares on the ideal path, the
// calibrated Skellam releases (every share arriving) on the integer path.
func (s *Server) ReleaseEps() (counts, gram float64) {
	if s.mask != nil {
		c, _ := rdp.ToDP(s.mask.steps[0].Curve(1, 1), s.cfg.Delta)
		g, _ := rdp.ToDP(s.mask.steps[1].Curve(1, 1), s.cfg.Delta)
		return c, g
	}
	return rdp.ZCDPToDP(s.cfg.FracCounts*s.rho, s.cfg.Delta), rdp.ZCDPToDP((1-s.cfg.FracCounts)*s.rho, s.cfg.Delta)
}
