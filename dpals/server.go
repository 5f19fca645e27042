package dpals

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"gonum.org/v1/gonum/mat"
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
	return append(s, step{kind: kindFinal}), factors
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
	mask       *maskPlan
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

// Factors returns the public item factors: from the final round on the
// item factors followed by the public item features the devices fit their
// coefficients on (the model's V), before it the factors alone.
func (s *server) Factors() ([]float32, int) {
	v, k := s.v, s.k
	if s.round >= len(s.steps)-1 {
		v, k = s.finalTable()
	}
	out := make([]float32, s.ni*k)
	for c, x := range v {
		out[c] = float32(x)
	}
	return out, k
}

// Biases implements protocol.Biased: the released global mean and item
// biases, as the final broadcast carries them (Aux column 0), once the
// run has reached its final round.
func (s *server) Biases() (mean float32, bi []float32, ok bool) {
	if s.round < len(s.steps)-1 {
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
			b.Words, b.Bits = s.mask.steps[round].D+1, 32
			b.Params[paramClients] = float64(s.clients)
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
		want = s.mask.steps[round].D + 1
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
		s.arrA[round] = s.mask.steps[round].Decode(words, s.sum)
	}
	s.arrS[round] = shares(&s.b)
	s.release(st, s.sum)
	s.round++
	if s.steps[s.round].kind == kindFinal {
		s.stats["eps_spent"], _, _ = s.Spent()
	}
	return nil
}

// release adds the noise of step st to its noise-free sums and updates the
// public state.
func (s *server) release(st step, sums []float64) {
	sig := noiseSigmas(s.cfg, st, &s.led, s.stats)
	switch st.kind {
	case kindMean:
		s.releaseMean(sums, sig[0])
	case kindBias:
		s.releaseBias(st.idx, sums, sig[0], sig[1])
	case kindInit:
		s.releaseInit(sums, sig[0])
	case kindFactor:
		s.releaseFactor(s.cfg.BiasRounds+st.idx, sums, sig[0], sig[1], sig[2])
	}
}

// releaseMean releases the global mean: each user contributes (m_u − 3,
// 1), m_u the mean of the user's ratings, clipped to [1, 5]: L2
// sensitivity √5. μ = 3 + S̃/max(Ñ, 1), clamped to [1, 5].
func (s *server) releaseMean(sums []float64, sigma float64) {
	x, n := sums[0], sums[1]
	s.record("mean", []float64{x, n})
	r := s.noise(0)
	x += sigma * s.gauss(r)
	n += sigma * s.gauss(r)
	s.mu = min(max(3+x/max(n, 1), 1), 5)
}

// releaseBias releases bias round r: the noised per-item sums g_j = Σ_u
// w_uj (weighted count, sensitivity 1) and h_j = Σ_u w_uj·clip(r − μ −
// b_u) (sensitivity Clip, or ClipNorm), and sets b_j to its posterior
// mean given them (shrinkBiases: empirical Bayes under the noise variances
// the mechanism added), pooled over the bias rounds so far with PoolBias.
func (s *server) releaseBias(r int, sums []float64, sg, sh float64) {
	g, h := sums[:s.ni], sums[s.ni:2*s.ni]
	s.record("counts", g)
	s.record("sums", h)
	nz := s.noise(uint64(1 + r))
	for j := range s.ni {
		g[j] += sg * s.gauss(nz)
		h[j] += sh * s.gauss(nz)
	}
	pg, ph, vg, vh := g, h, sg*sg, sh*sh
	if s.cfg.PoolBias {
		if s.poolG == nil {
			s.poolG, s.poolH = make([]float64, s.ni), make([]float64, s.ni)
		}
		s.poolVar += sg * sg
		s.poolVarH += sh * sh
		for j := range s.ni {
			s.poolG[j] += g[j]
			s.poolH[j] += h[j]
		}
		pg, ph, vg, vh = s.poolG, s.poolH, s.poolVar, s.poolVarH
	}
	s.bi, s.countPost, s.prior = shrinkBiases(pg, ph, vg, vh, s.cfg.RegItem, s.prior)
	if s.cfg.PoolBias {
		for j := range s.countPost {
			s.countPost[j] /= float64(r + 1)
		}
	}
	s.stats["bias_prior_mean"] = s.prior.M
	s.stats["bias_prior_slope"] = s.prior.Slope
	s.stats["bias_prior_sd"] = math.Sqrt(s.prior.Tau2)
	s.setWeights(g)
	s.bBias = slices.Clone(s.bi)
}

// setWeights sets the popularity weights p_j = (c̃_j + 1)^(−Beta) from
// released weighted counts (post-processing).
func (s *server) setWeights(count []float64) {
	s.count = slices.Clone(count)
	for j, c := range count {
		s.weight[j] = math.Pow(max(c, 0)+1, -s.cfg.Beta)
	}
}

// initV draws the initial item factors from public randomness and marks
// the active items: the TopItems with the largest released counts of the
// last bias round (post-processing), or all.
func (s *server) initV() {
	g := rng.New(s.seed, streamInit)
	s.v = make([]float64, s.ni*s.k)
	for k := range s.v {
		s.v[k] = s.cfg.InitScale * g.NormFloat64()
	}
	s.active = make([]bool, s.ni)
	m := s.cfg.TopItems
	if m == 0 || m >= s.ni {
		for j := range s.active {
			s.active[j] = true
		}
		return
	}
	for _, j := range s.topItems(m) {
		s.active[j] = true
	}
	for j, on := range s.active {
		if !on {
			clear(s.v[j*s.k : j*s.k+s.k])
		}
	}
}

// releaseFactor releases factor round r (numbered after the bias rounds):
// the noised right-hand sides h_j = Σ_u w·y·x (x = (1, u)), and either the
// per-item Gramians' upper triangles or, with SharedGram, the items'
// weighted counts and one global Gramian. It solves
// (G̃_j + λI) (b_j, v_j) = h̃_j + λ(b̄_j, 0) for the active items, b̄_j the
// bias rounds' item bias, λ = RegItem + RegNoise·σ of the count or
// Gramian entries.
func (s *server) releaseFactor(r int, sums []float64, sg, sc, sh float64) {
	k1 := s.k + 1
	nt := k1 * (k1 + 1) / 2
	shared := s.cfg.SharedGram
	var gram, cnt, rhs []float64
	if shared {
		gram, cnt, rhs = sums[:nt], sums[nt:nt+s.ni], sums[nt+s.ni:]
		s.record("global gram", gram)
		s.record("counts", cnt)
	} else {
		gram, rhs = sums[:s.ni*nt], sums[s.ni*nt:]
		cnt = make([]float64, s.ni)
		s.record("gram", gram)
	}
	s.record("rhs", rhs)
	nz := s.noise(uint64(1 + r))
	var global []float64
	if shared {
		for e := range gram {
			gram[e] += sg * s.gauss(nz)
		}
		global = make([]float64, nt)
		for e := range gram {
			global[e] = gram[e] / max(gram[0], 1)
		}
	}
	lam := s.cfg.RegItem + s.cfg.RegNoise*sc
	gj := make([]float64, nt)
	a := make([]float64, k1*k1)
	b := make([]float64, k1)
	for j := range s.ni {
		// Every item's statistics are released (a dense vector over the
		// public catalog); inactive items are not solved.
		hj := rhs[j*k1 : j*k1+k1]
		for e := range hj {
			hj[e] += sh * s.gauss(nz)
		}
		if shared {
			cnt[j] += sc * s.gauss(nz)
			c := max(cnt[j], 0)
			for e := range gj {
				gj[e] = c * global[e]
			}
		} else {
			copy(gj, gram[j*nt:j*nt+nt])
			for e := range gj {
				gj[e] += sg * s.gauss(nz)
			}
			cnt[j] = gj[0]
		}
		if s.active[j] {
			s.solveItem(j, gj, hj, lam, a, b)
		}
	}
}

// solveItem solves item j's (b_j, v_j) from its noisy upper-triangle
// Gramian gj and right-hand side hj with ridge lam, shrinking b_j towards
// the bias rounds' estimate. A Gramian the noise made indefinite gets its
// ridge doubled until the solve succeeds.
func (s *server) solveItem(j int, gj, hj []float64, lam float64, a, b []float64) {
	k1 := s.k + 1
	for try := 0; try < 60; try++ {
		e := 0
		for p1 := range k1 {
			for p2 := p1; p2 < k1; p2++ {
				a[p2*k1+p1] = gj[e] // lower triangle, row p2
				e++
			}
			a[p1*k1+p1] += lam
		}
		copy(b, hj)
		b[0] += lam * s.bBias[j]
		if linalg.CholeskySolve(a, b, k1) {
			s.bi[j] = b[0]
			copy(s.v[j*s.k:j*s.k+s.k], b[1:])
			return
		}
		lam *= 2
	}
	s.stats["failed_solves"]++
}

// releaseInit releases the warm start's item-item second-moment matrix of
// the InitItems items with the largest released counts (its upper
// triangle, row by row) with symmetric Gaussian noise and replaces their
// initial factors by its top Dim eigenvectors, in the manner of Dwork et
// al.'s Analyze Gauss (STOC 2014), scaled by √(λ/λ_max)·InitScale·√m.
func (s *server) releaseInit(upper []float64, sigma float64) {
	m := min(s.cfg.InitItems, s.ni)
	if m == 0 {
		return // no items: an empty matrix, nothing to release
	}
	top := s.topItems(m)
	s.record("init", upper)
	a := make([]float64, m*m)
	e := 0
	for i := range m {
		for k := i; k < m; k++ {
			a[i*m+k] = upper[e]
			e++
		}
	}
	nz := s.noise(releaseInit)
	for i := range m {
		for k := i; k < m; k++ {
			a[i*m+k] += sigma * s.gauss(nz)
			a[k*m+i] = a[i*m+k]
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(m, a), true) {
		s.stats["failed_solves"]++
		return
	}
	vals := eig.Values(nil) // ascending
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	clear(s.v)
	// A Gaussian symmetric m×m matrix of entry σ has spectral norm about
	// 2σ√m: components below InitFloor times that are noise and are left
	// at 0 (the user vectors then leave those dimensions unused).
	floor := s.cfg.InitFloor * 2 * sigma * math.Sqrt(float64(m))
	kept := 0
	for c := range min(s.k, m) {
		col := m - 1 - c
		l := max(vals[col], 0)
		if l <= floor {
			break
		}
		kept++
		sc := s.cfg.InitScale * math.Sqrt(float64(m)) * math.Sqrt(l/vals[m-1])
		for q, j := range top {
			s.v[j*s.k+c] = sc * vecs.At(q, col)
		}
	}
	s.stats["init_dims"] = float64(kept)
	s.stats["init_top_eigenvalue"] = vals[m-1]
	s.stats["init_noise_floor"] = floor
}

// topItems returns the m items with the largest released counts, largest
// first (ties by index).
func (s *server) topItems(m int) []int {
	order := make([]int, s.ni)
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case s.count[a] > s.count[b]:
			return -1
		case s.count[a] < s.count[b]:
			return 1
		}
		return 0
	})
	return order[:m]
}

// snapshotVersion versions the server's snapshot format.
const snapshotVersion = 1

// snapshot is the server's state between rounds.
type snapshot struct {
	NumItems, Dim, Round int
	Mu, PoolVar          float64
	PoolVarH             float64
	CountPost            []float64
	Prior                *ebPrior
	BI, BBias, V, Weight []float64
	Count, PoolG, PoolH  []float64
	Active               []bool
	Releases             []rdp.Release
	Stats                map[string]float64
	Clients              int
	ArrA, ArrS           []int
}

// MarshalBinary returns the server's state: a version byte, then the gob
// encoding of a snapshot.
func (s *server) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(snapshotVersion, snapshot{
		NumItems: s.ni, Dim: s.k, Round: s.round, Mu: s.mu, PoolVar: s.poolVar,
		PoolVarH: s.poolVarH, CountPost: s.countPost, Prior: s.prior,
		BI: s.bi, BBias: s.bBias, V: s.v, Weight: s.weight, Count: s.count, PoolG: s.poolG, PoolH: s.poolH,
		Active: s.active, Releases: s.led.Releases(), Stats: s.stats,
		Clients: s.clients, ArrA: s.arrA, ArrS: s.arrS,
	})
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration and catalog; it fails, leaving s
// unchanged, on corrupt data or another shape.
func (s *server) UnmarshalBinary(data []byte) error {
	var x snapshot
	if err := protocol.DecodeSnapshot(data, snapshotVersion, &x); err != nil {
		return fmt.Errorf("dpals: server snapshot: %w", err)
	}
	ok := func(v []float64) bool { return v == nil || len(v) == s.ni }
	switch {
	case x.NumItems != s.ni || x.Dim != s.k:
		return fmt.Errorf("dpals: server snapshot of %d items × %d, the server has %d × %d", x.NumItems, x.Dim, s.ni, s.k)
	case x.Round < 0 || x.Round > len(s.steps):
		return fmt.Errorf("dpals: server snapshot at round %d of %d", x.Round, len(s.steps))
	case len(x.BI) != s.ni || len(x.Weight) != s.ni || !ok(x.BBias) || !ok(x.Count) || !ok(x.PoolG) || !ok(x.PoolH) || !ok(x.CountPost):
		return fmt.Errorf("dpals: server snapshot: per-item vectors of the wrong length")
	case x.Prior != nil && (len(x.Prior.Grid) != ebGrid || len(x.Prior.Pi) != ebGrid):
		return fmt.Errorf("dpals: server snapshot: a bias prior of %d grid points, want %d", len(x.Prior.Grid), ebGrid)
	case x.Active != nil && len(x.Active) != s.ni, x.V != nil && len(x.V) != s.ni*s.k:
		return fmt.Errorf("dpals: server snapshot: %d factors, %d active flags", len(x.V), len(x.Active))
	}
	if (s.mask != nil) != (x.ArrA != nil) || x.ArrA != nil && (len(x.ArrA) != len(s.steps) || len(x.ArrS) != len(s.steps)) {
		return fmt.Errorf("dpals: server snapshot: integer-path arrivals of %d rounds, the server has %d (masked: %v)", len(x.ArrA), len(s.steps), s.mask != nil)
	}
	var l rdp.Ledger
	for _, r := range x.Releases {
		if !(r.Sigma > 0) || !(r.L2 > 0) || r.Count < 1 || math.IsInf(r.Sigma, 0) || math.IsInf(r.L2, 0) {
			return fmt.Errorf("dpals: server snapshot: bad release %+v", r)
		}
		l.Gaussian(r.Name, r.Count, r.L2, r.Sigma)
	}
	if x.Stats == nil {
		x.Stats = map[string]float64{}
	}
	s.round, s.mu, s.poolVar, s.poolVarH = x.Round, x.Mu, x.PoolVar, x.PoolVarH
	s.countPost, s.prior = x.CountPost, x.Prior
	s.bi, s.bBias, s.v, s.weight, s.count, s.poolG, s.poolH = x.BI, x.BBias, x.V, x.Weight, x.Count, x.PoolG, x.PoolH
	s.active, s.led, s.stats = x.Active, l, x.Stats
	s.clients, s.arrA, s.arrS = x.Clients, x.ArrA, x.ArrS
	return nil
}
