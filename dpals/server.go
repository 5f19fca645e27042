package dpals

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Kinds of round, in the broadcast's Params[paramKind].
const (
	kindMean   = iota // the global mean
	kindBias          // a bias round
	kindInit          // the spectral warm start
	kindFactor        // a factor round
	kindFinal         // the devices' final solve; no upload
	kindSetup         // the integer path's setup: the clients count themselves
)

// Broadcast parameters.
const (
	paramKind  = "kind"  // the round's kind
	paramIndex = "index" // the bias or factor round's number, from 0
	paramMu    = "mu"    // the released global mean
	paramK     = "k"     // dimensions of the item factors in Aux
	paramM     = "m"     // the warm start's number of items
	paramStat  = "stat:" // prefix of the server's public figures, in the final round
)

// step is one round of the schedule: its kind, its number among the
// rounds of that kind, and its zCDP cost.
type step struct {
	kind, idx int
	rho       float64
}

// schedule returns the rounds of cfg (Validate'd) at total zCDP budget
// rho, a function of the config alone, and whether the run has factors.
// Under participation limits (Config.RoundsPerUser, MinGap) the rounds'
// ρ keep the config's proportions and are scaled so that the costliest
// set of rounds one user may answer spends rho (scaleForLimits).
func schedule(cfg Config, rho float64) ([]step, bool) {
	factors := cfg.Dim > 0 && (cfg.Rounds > 0 || cfg.InitItems > 0)
	rhoMean := cfg.FracMean * rho
	rhoBias := (1 - cfg.FracMean) * rho
	if factors {
		rhoBias = cfg.FracBias * rho
	}
	s := []step{{kind: kindMean, rho: rhoMean}}
	if cfg.Aggregation == protocol.AggMasked {
		s = append([]step{{kind: kindSetup}}, s...)
	}
	for r := range cfg.BiasRounds {
		s = append(s, step{kind: kindBias, idx: r, rho: rhoBias / float64(cfg.BiasRounds)})
	}
	if factors {
		rest := rho - rhoMean - rhoBias
		if cfg.InitItems > 0 {
			ri := rest
			if cfg.Rounds > 0 {
				ri = cfg.FracInit * rest
			}
			s = append(s, step{kind: kindInit, rho: ri})
			rest -= ri
		}
		for r := range cfg.Rounds {
			s = append(s, step{kind: kindFactor, idx: r, rho: rest / float64(cfg.Rounds)})
		}
	}
	s = append(s, step{kind: kindFinal})
	scaleForLimits(cfg, s, rho)
	return s, factors
}

// noiseSigmas records in l the releases of step st and returns their
// noise σ: mean (σ); bias (counts, sums); init (σ); factor (Gramians,
// counts, right-hand sides; counts = Gramians without SharedGram). stats,
// when not nil, receives the σ under the names of Report.Stats.
func noiseSigmas(cfg Config, st step, l *rdp.Ledger, stats map[string]float64) []float64 {
	put := func(k string, v float64) {
		if stats != nil {
			stats[k] = v
		}
	}
	switch st.kind {
	case kindMean:
		l2 := math.Sqrt(5)
		sigma := rdp.GaussianSigmaFor(st.rho, l2)
		l.Gaussian("global mean: sum of user means and user count", 1, l2, sigma)
		put("sigma_mean", sigma)
		return []float64{sigma}
	case kindBias:
		rg, rh := cfg.FracGram*st.rho, (1-cfg.FracGram)*st.rho
		sg, sh := rdp.GaussianSigmaFor(rg, 1), rdp.GaussianSigmaFor(rh, cfg.resBound())
		l.Gaussian(fmt.Sprintf("round %d: item weighted counts", st.idx+1), 1, 1, sg)
		l.Gaussian(fmt.Sprintf("round %d: item residual sums", st.idx+1), 1, cfg.resBound(), sh)
		put("sigma_bias_count", sg)
		put("sigma_bias_sum", sh)
		return []float64{sg, sh}
	case kindInit:
		c2 := cfg.resBound() * cfg.resBound()
		sigma := rdp.GaussianSigmaFor(st.rho, c2)
		l.Gaussian("warm start: item-item second moments of the top items", 1, c2, sigma)
		put("sigma_init", sigma)
		return []float64{sigma}
	case kindFactor:
		r := cfg.BiasRounds + st.idx
		lg := 1 + cfg.NormU*cfg.NormU
		lh := cfg.resBound() * math.Sqrt(lg)
		rg, rh := cfg.FracGram*st.rho, (1-cfg.FracGram)*st.rho
		sh := rdp.GaussianSigmaFor(rh, lh)
		var sg, sc float64
		if cfg.SharedGram {
			// The global Gramian sums over every user: a tenth of the
			// Gramian share is plenty.
			sg = rdp.GaussianSigmaFor(0.1*rg, lg)
			sc = rdp.GaussianSigmaFor(0.9*rg, 1)
			l.Gaussian(fmt.Sprintf("round %d: global Gramian of the user vectors", r+1), 1, lg, sg)
			l.Gaussian(fmt.Sprintf("round %d: item weighted counts", r+1), 1, 1, sc)
			put("sigma_count", sc)
		} else {
			sg = rdp.GaussianSigmaFor(rg, lg)
			sc = sg
			l.Gaussian(fmt.Sprintf("round %d: item Gramians (upper triangles)", r+1), 1, lg, sg)
		}
		l.Gaussian(fmt.Sprintf("round %d: item right-hand sides", r+1), 1, lh, sh)
		put("sigma_gram", sg)
		put("sigma_rhs", sh)
		return []float64{sg, sc, sh}
	}
	return nil
}

// plannedLedger returns the ledger of every release of cfg's run and its
// σ figures: the calibration is a function of the config alone, so the
// clients know it as well as the server.
func plannedLedger(cfg Config) (*rdp.Ledger, float64, map[string]float64, error) {
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("dpals: %w", err)
	}
	steps, _ := schedule(cfg, rho)
	l := &rdp.Ledger{}
	stats := map[string]float64{}
	for _, st := range steps {
		noiseSigmas(cfg, st, l, stats)
	}
	return l, rho, stats, nil
}

// resBound is the L2 bound of a user's weighted residual vector (w_uj·y_uj
// over the user's contributed ratings): Clip, since the weights' squares
// sum to 1, or ClipNorm when it is set and smaller.
func (c Config) resBound() float64 {
	if c.ClipNorm > 0 && c.ClipNorm < c.Clip {
		return c.ClipNorm
	}
	return c.Clip
}

// server is the server half: it holds only public things (the config,
// the catalog's size and titles, its own seed) and what it released.
type server struct {
	cfg     Config
	seed    uint64
	ni      int
	k       int // factor dimension (0 without factors)
	titles  []string
	steps   []step
	factors bool
	round   int // next round to broadcast

	mu     float64   // released global mean
	bi     []float64 // item biases
	bBias  []float64 // item biases of the last bias round: the prior of the factor rounds
	v      []float64 // item factors, ni×k
	kaug   int       // columns of the final table (k + UserFeatures)
	weight []float64 // per-item popularity weight p_j from the last released counts
	count  []float64 // the last released (noisy) weighted counts
	// poolG and poolH sum the bias rounds' noisy counts and sums, and
	// poolVar their count noise variance (PoolBias).
	poolG, poolH []float64
	poolVar      float64
	// poolVarH is the pooled sums' noise variance; prior the fitted prior
	// of the posterior-mean biases (shrinkBiases) and countPost the items'
	// posterior-mean weighted counts per bias round.
	poolVarH  float64
	prior     *ebPrior
	countPost []float64
	active    []bool // items that get factors: the TopItems largest counts
	led       rdp.Ledger
	stats     map[string]float64 // public figures of the run
	// rec, when not nil, is given every release's sums before the noise
	// is added (tests use it to check sensitivities).
	rec func(name string, sums []float64)

	b   protocol.Broadcast
	aux []float32
	sum []float64

	// The integer path (nil mask on the float paths): its calibration,
	// the clients counted at setup, and per round the arrivals and the
	// share count the clients drew their noise for.
	mask       *maskplan.Plan
	clients    int
	arrA, arrS []int
}

// NewServer returns the server half of cfg for the public item catalog
// (its item IDs and titles; its ratings, if any, are not read), seeded by
// seed: the aggregate noise and the public initial factors come from it.
// Outside a reproducible test, seed must be secret (drawn from
// crypto/rand): whoever knows it can remove the noise.
func NewServer(cfg Config, catalog *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if catalog == nil {
		return nil, fmt.Errorf("dpals: no public item catalog: give the server the list of items (privrec serve --items, or the dataset's catalog)")
	}
	return newServer(cfg, catalog.NumItems(), catalog.ItemTitles, seed)
}

// newServer returns the server of cfg for ni items with the given titles
// (nil: none).
func newServer(cfg Config, ni int, titles []string, seed uint64) (*server, error) {
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpals: %w", err)
	}
	steps, factors := schedule(cfg, rho)
	s := &server{cfg: cfg, seed: seed, ni: ni, titles: titles, steps: steps, factors: factors,
		stats: map[string]float64{}}
	if factors {
		s.k = cfg.Dim
	}
	if cfg.Aggregation == protocol.AggMasked {
		if s.mask, err = newMaskPlan(cfg, ni); err != nil {
			return nil, err
		}
		s.arrA, s.arrS = make([]int, len(steps)), make([]int, len(steps))
	}
	s.bi = make([]float64, ni)
	s.weight = make([]float64, ni)
	for j := range s.weight {
		s.weight[j] = 1
	}
	return s, nil
}

// numRounds returns the number of rounds of the run.
func (s *server) numRounds() int { return len(s.steps) }

// gauss returns a standard normal draw from r, or 0 on the integer path,
// whose sums arrive with the clients' Skellam noise in them.
func (s *server) gauss(r *rand.Rand) float64 {
	if s.mask != nil {
		return 0
	}
	return r.NormFloat64()
}

// noise returns the stream of the aggregate noise of release r.
func (s *server) noise(r uint64) *rand.Rand { return rng.New(s.seed, streamNoise, r) }

// record passes a release's noise-free sums to rec.
func (s *server) record(name string, sums []float64) {
	if s.rec != nil {
		s.rec(name, slices.Clone(sums))
	}
}

// Done reports whether every round was aggregated.
func (s *server) Done() bool { return s.round >= len(s.steps) }

// Round returns the next round the server will broadcast.
func (s *server) Round() int { return s.round }

// Factors returns the public item table of the final round as the
// released state makes it now: the item factors (zero before the warm
// start) followed by the public item features the devices fit their
// coefficients on (the model's V). Before the final round it is what an
// interim release publishes: the model a device would solve itself
// against were the run to end here.
func (s *server) Factors() ([]float32, int) {
	v, k := s.finalTable()
	out := make([]float32, s.ni*k)
	for c, x := range v {
		out[c] = float32(x)
	}
	return out, k
}

// Biases implements protocol.Biased: the released global mean and item
// biases as the server holds them now, which the final broadcast carries
// (Aux column 0), once the global mean's round has been aggregated.
func (s *server) Biases() (mean float32, bi []float32, ok bool) {
	if !slices.ContainsFunc(s.steps[:s.round], func(st step) bool { return st.kind == kindMean }) {
		return 0, nil, false
	}
	bi = make([]float32, s.ni)
	for j, x := range s.bi {
		bi[j] = float32(x)
	}
	return float32(s.mu), bi, true
}

// words returns the length of the dense upload of step st.
func (s *server) words(st step) int {
	k1 := s.k + 1
	nt := k1 * (k1 + 1) / 2
	switch st.kind {
	case kindMean:
		return 2
	case kindBias:
		return 2 * s.ni
	case kindInit:
		m := min(s.cfg.InitItems, s.ni)
		return m * (m + 1) / 2
	case kindFactor:
		if s.cfg.SharedGram {
			return nt + s.ni + s.ni*k1
		}
		return s.ni*nt + s.ni*k1
	}
	return 0
}

// Broadcast returns round's message: the round's kind, the released mean
// and, per item of the catalog, the public values the devices need (Aux):
// bias rounds (b_j, p_j); the warm start (b_j, p_j, slot of j among the
// top items or −1); factor rounds (b_j, p_j, active, v_j); the final round
// (b_j, v_j and the public features).
func (s *server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.round || s.Done() {
		return nil, fmt.Errorf("dpals: broadcast of round %d, the server is at round %d of %d", round, s.round, len(s.steps))
	}
	st := s.steps[round]
	if s.factors && s.v == nil && (st.kind == kindInit || st.kind == kindFactor) {
		s.initV()
	}
	var fin []float64
	if st.kind == kindFinal {
		fin, s.kaug = s.finalTable()
	}
	b := &s.b
	*b = protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, NumItems: s.ni,
		Params: map[string]float64{paramKind: float64(st.kind), paramIndex: float64(st.idx), paramMu: s.mu}}
	if s.mask != nil {
		switch st.kind {
		case kindSetup:
			b.Phase, b.Words, b.Bits = protocol.PhaseSetup, 1, 32
		case kindFinal:
		default:
			b.Words, b.Bits = s.mask.Steps[round].D+1, 32
			b.Params[maskplan.ParamClients] = float64(s.clients)
			if s.cfg.Cohort > 0 && s.clients > s.cfg.Cohort {
				// A training round's sum holds one cohort: the shares
				// are drawn for it.
				b.Params[maskplan.ParamClients] = float64(s.cfg.Cohort)
			}
		}
	} else if n := s.words(st); n > 0 {
		// The float paths' dense statistics: a deployment caps an
		// upload's size by them.
		b.Params[protocol.ParamScalars] = float64(n)
	}
	cols := 0
	switch st.kind {
	case kindBias:
		cols = 2
	case kindInit:
		cols = 3
		b.Params[paramM] = float64(min(s.cfg.InitItems, s.ni))
	case kindFactor:
		cols = 3 + s.k
		b.Params[paramK] = float64(s.k)
	case kindFinal:
		b.Phase = protocol.PhaseFinal
		cols = 1 + s.kaug
		b.Params[paramK] = float64(s.kaug)
		for name, x := range s.stats {
			b.Params[paramStat+name] = x
		}
	}
	if cols == 0 {
		return b, nil
	}
	var slot []int
	if st.kind == kindInit {
		slot = make([]int, s.ni)
		for j := range slot {
			slot[j] = -1
		}
		for q, j := range s.topItems(min(s.cfg.InitItems, s.ni)) {
			slot[j] = q
		}
	}
	s.aux = slices.Grow(s.aux[:0], s.ni*cols)[:s.ni*cols]
	for j := range s.ni {
		row := s.aux[j*cols : j*cols+cols]
		row[0] = float32(s.bi[j])
		switch st.kind {
		case kindBias:
			row[1] = float32(s.weight[j])
		case kindInit:
			row[1], row[2] = float32(s.weight[j]), float32(slot[j])
		case kindFactor:
			row[1], row[2] = float32(s.weight[j]), 0
			if s.active[j] {
				row[2] = 1
			}
			for c := range s.k {
				row[3+c] = float32(s.v[j*s.k+c])
			}
		case kindFinal:
			for c := range s.kaug {
				row[1+c] = float32(fin[j*s.kaug+c])
			}
		}
	}
	b.Aux, b.AuxDim = s.aux, cols
	return b, nil
}

// Aggregate adds up the round's uploads (one summed upload under secure
// aggregation, the clients' own otherwise, in client order), adds the
// noise and updates the public state.
func (s *server) Aggregate(round int, ups []*protocol.Upload) error {
	if round != s.round || s.Done() {
		return fmt.Errorf("dpals: aggregate of round %d, the server is at round %d", round, s.round)
	}
	st := s.steps[round]
	n := s.words(st)
	s.sum = slices.Grow(s.sum[:0], n)[:n]
	clear(s.sum)
	if s.mask != nil && st.kind != kindFinal {
		return s.aggregateMasked(round, st, ups)
	}
	for _, u := range ups {
		if u == nil || st.kind == kindFinal {
			continue
		}
		if len(u.Scalars) != n {
			return fmt.Errorf("%w: dpals round %d: an upload of %d values, want %d", protocol.ErrMessage, round, len(u.Scalars), n)
		}
		for e, x := range u.Scalars {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: dpals round %d: a non-finite value", protocol.ErrMessage, round)
			}
			s.sum[e] += x
		}
	}
	s.release(st, s.sum)
	s.round++
	return nil
}

// aggregateMasked folds the integer path's summed words of round.
func (s *server) aggregateMasked(round int, st step, ups []*protocol.Upload) error {
	want := 1
	if st.kind != kindSetup {
		want = s.mask.Steps[round].D + 1
	}
	var words []uint32
	for _, u := range ups {
		if u == nil {
			continue
		}
		if words != nil || len(u.Words) != want || u.Scalars != nil {
			return fmt.Errorf("%w: dpals round %d: want one summed upload of %d words (secagg=masked)", protocol.ErrMessage, round, want)
		}
		words = u.Words
	}
	if st.kind == kindSetup {
		if words != nil {
			s.clients = int(words[0])
		}
		s.round++
		return nil
	}
	if words != nil {
		s.arrA[round] = s.mask.Steps[round].Decode(words, s.sum)
		s.arrS[round] = maskplan.Shares(&s.b)
	} // else the round was skipped: no sum, nothing released, no ε (arrS 0)
	s.release(st, s.sum)
	s.round++
	if s.steps[s.round].kind == kindFinal {
		s.stats["eps_spent"], _, _ = s.Spent()
	}
	return nil
}

// Rounds returns the number of rounds the server of cfg broadcasts, its
// schedule's length: on the integer path a setup round, the global mean,
// BiasRounds bias rounds, the warm start and Rounds factor rounds when
// the run has factors, and the final round. A client refuses a round
// numbered past it.
func Rounds(cfg Config) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	steps, _ := schedule(cfg, 1) // the schedule's length does not depend on ρ
	return len(steps), nil
}
