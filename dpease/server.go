package dpease

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

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
	mask *maskplan.Plan
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
	// zeroNoise (tests only) adds no noise, so that the pooled sums can be
	// compared with a roster run's.
	zeroNoise bool
}

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
	// Over cohorts: the pooled noisy Gram triangle of the Gram rounds so
	// far and their number (the counts pool in Counts).
	GramSum     []float64
	GramRounds  int
	CountRounds int
}

const streamNoise uint64 = 0x6470_6561 // "dpea"

// NewServer returns the server for the public catalog (only its size is
// read); seed seeds the noise only in the test mode (cfg.Seeded). It
// returns the *Server itself, not only a protocol.Stateful: its ledger,
// blend and release figures are what the method's report and the audit
// read.
func NewServer(cfg Config, catalog *ratings.Dataset, seed uint64) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if catalog == nil {
		return nil, errors.New("dpease: no public item catalog")
	}
	numItems := catalog.NumItems()
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
		s.st.ArrA, s.st.ArrS = make([]int, 2*cfg.cohortRounds()), make([]int, 2*cfg.cohortRounds())
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
	ns, err := NewServer(c, ratings.AnonymousItems(s.n, ratings.Scale{}), s.seed)
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
	paramStep   = "dpease-step"   // 0: counts, 1: Gram (absent: the round number)
	paramFrac   = "frac-counts"   // the counts' share of ρ, as the server resolved it
	paramCohort = "dpease-cohort" // over cohorts, the cohort's number within its statistic
	// paramItems is the catalog's size, over cohorts: a device in a Gram
	// cohort that answered no counts round needs it for the integer
	// path's plan.
	paramItems = "dpease-items"
)

// stage returns the statistic round releases: −1 the setup round, 0 the
// counts, 1 the Gram (over cohorts, cohortRounds rounds each).
func (s *Server) stage(round int) int {
	st := round - s.offset()
	if st < 0 {
		return -1
	}
	return min(st/s.cfg.cohortRounds(), 1)
}

// rounds returns the number of rounds of the run.
func (s *Server) rounds() int { return 2*s.cfg.cohortRounds() + s.offset() }

// countsSigma returns the noise σ of each pooled count: √r·σ_c after r
// counts rounds (one release's σ_c in a roster run).
func (s *Server) countsSigma() float64 {
	return s.sigmaC * math.Sqrt(float64(max(1, s.st.CountRounds)))
}

// gramPoolSigma returns the Gaussian noise σ of each pooled Gram entry:
// √r·σ_g after r Gram rounds, and, before any, what the whole run's pool
// will carry (the ridge is fixed by the config).
func (s *Server) gramPoolSigma() float64 {
	r := s.st.GramRounds
	if r == 0 {
		r = s.cfg.cohortRounds()
	}
	return s.sigmaG * math.Sqrt(float64(r))
}

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
		return nil, fmt.Errorf("dpease: broadcast of round %d, the server is at round %d of %d", round, s.st.Round, s.rounds())
	}
	st := s.stage(round)
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
	if t := s.cfg.cohortRounds(); t > 1 {
		b.Params[paramCohort] = float64((round - s.offset()) % t)
		b.Params[paramItems] = float64(s.n)
	}
	if s.mask != nil {
		b.Words, b.Bits = s.mask.Steps[st].D+1, 32
		b.Params[maskplan.ParamClients] = float64(s.st.Clients)
		if c := s.cfg.Cohort; c > 0 && s.st.Clients > c {
			// A round's sum holds one cohort: the shares are drawn
			// for it.
			b.Params[maskplan.ParamClients] = float64(c)
		}
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
		return fmt.Errorf("dpease: aggregate of round %d, the server is at round %d of %d", round, s.st.Round, s.rounds())
	}
	st := s.stage(round)
	t := s.cfg.cohortRounds()
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
		if s.mask == nil && !s.zeroNoise {
			for j := range c {
				c[j] += s.sigmaC * s.noise.NormFloat64()
			}
		}
		s.led.Gaussian(s.releaseName(countsRelease), 1, 1, s.sigmaC)
		if s.st.Counts != nil && t > 1 {
			// Over cohorts the released sums add up: each user is in
			// one cohort's counts.
			for j := range c {
				c[j] += s.st.Counts[j]
			}
		}
		s.st.Counts = c
		s.st.CountRounds++
		if s.st.CountRounds == t {
			s.m = s.chooseM(c)
			s.st.Top = TopItems(c, s.m)
		}
	case 1:
		g := sums
		if s.mask == nil && !s.zeroNoise {
			for p := range g {
				g[p] += s.sigmaG * s.noise.NormFloat64()
			}
		}
		s.led.Gaussian(s.releaseName(s.gramRelease()), 1, GramL2(s.cfg.Cap), s.sigmaG)
		if t > 1 {
			if s.st.GramSum != nil {
				for p := range g {
					g[p] += s.st.GramSum[p]
				}
			}
			s.st.GramSum = slices.Clone(g)
		}
		s.st.GramRounds++
		s.gram = g
		v, err := s.solve(g)
		if err != nil {
			return err
		}
		s.st.V = v
	}
	s.st.Round = round + 1
	return nil
}

// countsRelease names the counts in the ledger.
const countsRelease = "item counts (indicators / √n_u)"

// releaseName returns the ledger's name of the release of the round
// being aggregated: over cohorts, name and the cohort's number.
func (s *Server) releaseName(name string) string {
	t := s.cfg.cohortRounds()
	if t == 1 {
		return name
	}
	return fmt.Sprintf("%s, cohort %d of %d", name, (s.st.Round-s.offset())%t+1, t)
}

// gramRelease names the Gram in the ledger.
func (s *Server) gramRelease() string {
	return fmt.Sprintf("Gram of the top %d items (upper triangle, weights 1/max(n', %d))", s.m, s.cfg.Cap)
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
func (s *Server) Done() bool { return s.st.Round >= s.rounds() }

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
	o, t := s.offset(), s.cfg.cohortRounds()
	if st.Round < 0 || st.Round > s.rounds() || (st.Round >= t+o && (len(st.Counts) != s.n || len(st.Top) != s.m)) ||
		(st.Round > o && st.Round < t+o && len(st.Counts) != s.n) ||
		(st.Round >= t+o+1 && len(st.V) != s.n*(s.m+1)) ||
		(t > 1 && st.Round >= t+o+1 && len(st.GramSum) != pairs(s.m)) ||
		(s.mask != nil) != (st.ArrA != nil) || (st.ArrA != nil && (len(st.ArrA) != 2*t || len(st.ArrS) != 2*t)) {
		return errors.New("dpease: the snapshot does not fit this server")
	}
	s.st = st
	s.led = rdp.Ledger{}
	for _, r := range sn.Releases {
		s.led.Gaussian(r.Name, r.Count, r.L2, r.Sigma)
	}
	return nil
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
	rho := l.Rho()
	if s.cfg.cohortRounds() > 1 {
		rho = userRho(l)
	}
	r := &Report{Ledger: l, Rho: s.rho, Eps: rdp.ZCDPToDP(rho, s.cfg.Delta), EpsReplace: rdp.ZCDPToDP(4*rho, s.cfg.Delta)}
	r.Stats = s.stats()
	r.Stats["eps_counts"], r.Stats["eps_gram"] = s.ReleaseEps()
	if s.mask != nil {
		r.Eps, r.EpsReplace = s.mask.Eps, s.mask.EpsReplace
		r.Stats["skellam_eta"] = s.mask.Eta
		r.Stats["sigma_counts_skellam"] = s.mask.Steps[0].NoiseSigma(0)
		r.Stats["sigma_gram_skellam"] = s.mask.Steps[1].NoiseSigma(0)
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
	t := s.cfg.cohortRounds()
	name := func(n string, i int) string {
		if t == 1 {
			return n
		}
		return fmt.Sprintf("%s, cohort %d of %d", n, i+1, t)
	}
	for i := range t {
		l.Gaussian(name(countsRelease, i), 1, 1, s.sigmaC)
	}
	for i := range t {
		l.Gaussian(name(s.gramRelease(), i), 1, GramL2(s.cfg.Cap), s.sigmaG)
	}
	return s.report(l)
}

// ReleaseEps returns the ε at Delta of each release taken alone (counts,
// Gram): the Gaussian releases' zCDP shares on the ideal path, the
// calibrated Skellam releases (every share arriving) on the integer path.
func (s *Server) ReleaseEps() (counts, gram float64) {
	if s.mask != nil {
		c, _ := rdp.ToDP(s.mask.Steps[0].Curve(1, 1), s.cfg.Delta)
		g, _ := rdp.ToDP(s.mask.Steps[1].Curve(1, 1), s.cfg.Delta)
		return c, g
	}
	return rdp.ZCDPToDP(s.cfg.FracCounts*s.rho, s.cfg.Delta), rdp.ZCDPToDP((1-s.cfg.FracCounts)*s.rho, s.cfg.Delta)
}

// Rounds returns the number of rounds the server of cfg broadcasts: the
// counts and the Gram (over cohorts, CohortRounds rounds of each), after
// a setup round on the integer path (secagg=masked) that counts the
// clients. A client refuses a round numbered past it.
func Rounds(cfg Config) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	if cfg.Aggregation == protocol.AggMasked {
		return 1 + 2*cfg.cohortRounds(), nil
	}
	return 2 * cfg.cohortRounds(), nil
}

// userRho returns the most ρ one user is charged by the releases of l in
// a run over cohorts: a device answers at most one round of each
// statistic (Config.Participation), so the costliest counts release plus
// the costliest Gram release.
func userRho(l rdp.Ledger) float64 {
	var c, g float64
	for _, r := range l.Releases() {
		if strings.HasPrefix(r.Name, countsRelease) {
			c = max(c, r.Rho)
		} else {
			g = max(g, r.Rho)
		}
	}
	return c + g
}
