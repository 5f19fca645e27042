package ldpop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Random stream labels under Config.Seed, apart from the clients' streams
// rng.New(Seed, clientID, round) that the transport draws.
const (
	streamInit uint64 = 0x4c44504f + iota // "LDPO": V⁰
	streamPos                             // the server's choice of positions
	streamMix                             // the server's H (MixtureShares), per pass
)

// Broadcast parameters.
const (
	paramFit    = "fit"    // 1: clients (re)fit u_i against the full V and upload nothing
	paramLambda = "lambda" // λ
	paramScale  = "scale"  // R/k, the unbiasing scale of C2 line 5 (md − t for k = 1)
	// paramClients is the number of clients announced in setup, among
	// which a masked round's Skellam noise is split.
	paramClients = "clients"
)

// run is the client half of a training run: the clients and what they
// share. The server is built apart, by newServer, from public information
// only.
type run struct {
	cfg     Config
	train   *ratings.Dataset
	sh      *shared
	cls     []*client
	clients []protocol.Client
}

// newRun builds one client per user index of train (users without
// ratings too: they add noise shares and count in the server's average).
// The noise is split among train's users: a vendor holding every user
// (or the simulation) knows their number; on the integer path, among the
// clients the server counted in setup.
func newRun(train *ratings.Dataset, cfg Config) (*run, error) {
	n, m, k := train.NumUsers(), train.NumItems(), cfg.Dim
	sh := &shared{
		variant: cfg.Variant, k: k, m: m, n: n,
		delta: float64(train.Scale.Max - train.Scale.Min),
		bound: cfg.Bound, reg: cfg.Reg, scheme: cfg.Noise,
		clip:   cfg.Variant != Basic,
		lambda: float32(cfg.Reg),
		obs:    &observer{seen: -1},
	}
	if cfg.Variant != RSMF {
		sh.b = 2 * sh.delta * cfg.Bound / cfg.Eps
	}
	if cfg.Variant == Basic {
		sh.all = make([]int32, m)
		for j := range sh.all {
			sh.all[j] = int32(j)
		}
	}
	if cfg.Aggregation == protocol.AggMasked {
		mk, err := newMasking(cfg, m, sh.delta)
		if err != nil {
			return nil, err
		}
		if err := mk.checkBits(n); err != nil {
			return nil, err
		}
		sh.mask = mk
	}
	if cfg.Variant != Basic {
		sh.obs.led = newLedger(m, k, sh.mask)
	}
	r := &run{cfg: cfg, train: train, sh: sh}
	byUser := train.ByUser()
	r.cls = make([]*client, n)
	r.clients = make([]protocol.Client, n)
	for u := range n {
		items, vals := byUser.Row(u)
		c := &client{id: u, sh: sh, items: slices.Clone(items), y: slices.Clone(vals), u: make([]float32, k)}
		r.cls[u], r.clients[u] = c, c
	}
	return r, nil
}

// model gathers the clients' user vectors and the server's V (v): a
// prediction is u_i·v_j (the paper has no bias term), and the middle of
// the scale for a user without training ratings or an unknown index.
func (r *run) model(v []float32) *model.Model {
	return model.Gathered(r.train, r.cfg.Dim, v, func(u int) ([]float32, bool) {
		c := r.cls[u]
		return c.u, len(c.items) > 0
	})
}

// report returns the run's figures. The accounting is the clients' own,
// from the positions the broadcasts released (see observer): the same the
// server keeps.
func (r *run) report(mod *model.Model) *Report {
	o := r.sh.obs
	md := r.sh.m * r.sh.k
	rep := &Report{
		NoiseScale: r.sh.b, Positions: md,
		TrainRMSE: eval.Rating(mod, r.train).RMSE,
	}
	for _, c := range r.cls {
		if c.clipped {
			rep.ClippedUsers++
		}
	}
	eps := r.cfg.Eps
	rep.Aggregation, rep.Noise = r.cfg.Aggregation.String(), r.cfg.Noise.String()+"-shares"
	switch {
	case r.cfg.Variant == RSMF:
		rep.Noise = "none"
	case r.sh.mask != nil:
		rep.Noise, rep.NoiseScale, rep.SkellamMu, rep.Delta = "skellam", 0, r.sh.mask.mu, r.sh.mask.delta
	}
	switch {
	case r.cfg.Variant == LDPOP && r.sh.mask != nil:
		l := o.led
		rep.EpsRound, rep.EpsTotal = l.skRound, l.skMax
		rep.EpsTotalUser = r.sh.mask.rowEps(l.sumTotals(), 2*r.sh.mask.a)
		rep.EpsRoundUser = l.skUserRound
	case r.cfg.Variant == LDPOP:
		rep.EpsRound = eps * o.led.roundFactor
		rep.EpsTotal = eps * o.led.maxRow
		rep.EpsTotalUser = 2 * eps * o.led.sumRows
		rep.EpsRoundUser = 2 * eps * o.led.userRound
	case r.cfg.Variant == Basic:
		rep.EpsRound = eps * math.Sqrt(float64(r.cfg.Dim))
		rep.EpsTotal = rep.EpsRound
		rep.EpsTotalUser = math.Inf(1) // existence: the difference attack
		rep.EpsRoundUser = math.Inf(1)
	}
	if o.led != nil {
		rep.Passes = int((o.released + int64(md) - 1) / int64(md))
		for _, ok := range o.led.updated {
			if ok {
				rep.Updated++
			}
		}
	}
	if r.cfg.Variant == Basic && o.t > 0 {
		rep.Updated = md
	}
	return rep
}

// observer is the clients' copy of the server's accounting, kept from
// the broadcasts, which name every released position: the first client to
// see a round's broadcast records it.
type observer struct {
	mu       sync.Mutex
	seen     int     // last round recorded
	led      *ledger // nil for Basic
	released int64   // positions released
	t        int     // training rounds
	sel      []int32
}

// observe records b once.
func (o *observer) observe(b *protocol.Broadcast, k int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b.Round <= o.seen {
		return
	}
	o.seen = b.Round
	if b.Phase != protocol.PhaseTrain {
		return
	}
	if b.Param(paramFit, 0) == 1 {
		if o.led != nil {
			o.led.closeSegment()
		}
		return
	}
	o.t++
	if o.led == nil || b.Items == nil || b.AuxDim < k {
		return
	}
	o.sel = o.sel[:0]
	for q, j := range b.Items {
		for l, on := range b.Aux[q*b.AuxDim : q*b.AuxDim+k] {
			if on != 0 {
				o.sel = append(o.sel, j*int32(k)+int32(l))
			}
		}
	}
	o.led.account(o.sel)
	o.released += int64(len(o.sel))
}

// shared is the public configuration every client knows.
type shared struct {
	variant Variant
	k, m, n int
	delta   float64 // Δ = r_max − r_min
	bound   float64 // B
	reg     float64 // λ of the user fit
	lambda  float32 // λ of the item gradient
	b       float64 // Laplace scale of a position's summed noise (0: none)
	scheme  dp.ShareScheme
	mask    *masking // the integer path, nil on the float paths
	clip    bool     // clip residuals to [−Δ, Δ]
	all     []int32  // 0..m−1, the items of a basic upload
	obs     *observer
}

// client is one user's device. Its fields never leave it except through
// the uploads it builds.
type client struct {
	id      int
	sh      *shared
	items   []int32   // rated items, increasing
	y       []float32 // the ratings
	u       []float32 // u_i, ‖u_i‖ ≤ B
	clipped bool      // the fit met the bound
	eta     []float32 // Basic: the fixed noise shares η^i, m·k
	up      protocol.Upload
	upItems []int32
	vals    []float32
	noise   []float32 // scratch: this round's noise shares
	h       []float32 // scratch: the server's H of this round's positions
	words   []uint32  // the integer path's upload
	fw      fitWork
}

// ID returns the client's index.
func (c *client) ID() int { return c.id }

// Round answers one broadcast.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	k := c.sh.k
	if err := c.check(b); err != nil {
		return nil, err
	}
	c.sh.obs.observe(b, k)
	if b.Phase == protocol.PhaseSetup || b.Param(paramFit, 0) == 1 {
		if b.Items != nil || len(b.V) != c.sh.m*k {
			return nil, fmt.Errorf("%w: a fit round must carry the whole V", protocol.ErrMessage)
		}
		c.clipped = fitUser(c.u, c.items, c.y, b.V, k, c.sh.reg, c.sh.bound, &c.fw)
		if b.Phase != protocol.PhaseSetup {
			return nil, nil
		}
		if b.Words > 0 {
			return c.maskedSetup(b)
		}
		if c.sh.variant == Basic {
			if err := c.drawFixedNoise(b, r); err != nil {
				return nil, err
			}
		}
		// Announce the client, so that the server averages over the
		// clients that take part.
		c.up = protocol.Upload{Client: c.id, Round: b.Round, Scalars: []float64{1}}
		return &c.up, nil
	}
	if b.Phase != protocol.PhaseTrain {
		return nil, nil
	}
	if c.sh.variant == Basic {
		return c.basic(b)
	}
	if b.Words > 0 {
		if c.sh.mask == nil {
			return nil, fmt.Errorf("%w: a masked round, and the clients were not built for secagg=masked", protocol.ErrMessage)
		}
		return c.maskedSampled(b, r)
	}
	return c.sampled(b, r)
}

// check returns an error for a broadcast the client cannot answer: not
// shaped for its catalog, missing what the round reads (the whole V in a
// setup, fit or basic round; the named rows, their V and positions in a
// sampled one), non-finite, or asking for more masked words than the
// client sends (one in setup, none in a fit or basic round, at most one
// per named position and the arrival word in a sampled one).
func (c *client) check(b *protocol.Broadcast) error {
	sh := c.sh
	n := protocol.Need{Dim: sh.k, NumItems: sh.m}
	switch {
	case b.Phase == protocol.PhaseSetup:
		n.V, n.Whole, n.Words = true, true, 1
	case b.Param(paramFit, 0) == 1 || (b.Phase == protocol.PhaseTrain && sh.variant == Basic):
		n.V, n.Whole = true, true
	case b.Phase == protocol.PhaseTrain:
		n.V, n.AuxDim = true, sh.k
		if b.Words == 0 && sh.b > 0 && sh.scheme == dp.MixtureShares {
			n.AuxDim = 2 * sh.k
		}
		if b.Items == nil {
			return fmt.Errorf("%w: sampled round %d names no rows", protocol.ErrMessage, b.Round)
		}
		n.Words = len(b.Items)*sh.k + 1 // at most: the named positions and the arrival word
	}
	return b.Require(n)
}

// drawFixedNoise draws the basic scheme's noise shares once: they are a
// term of the objective, the same in every round.
func (c *client) drawFixedNoise(b *protocol.Broadcast, r *rand.Rand) error {
	sh := c.sh
	c.eta = make([]float32, sh.m*sh.k)
	if sh.scheme == dp.MixtureShares && (b.AuxDim != sh.k || len(b.Aux) != len(c.eta)) {
		return fmt.Errorf("%w: the setup round carries no H", protocol.ErrMessage)
	}
	sh.fillShares(r, b.Aux, c.eta)
	return nil
}

// residual returns r − u·v, clipped to [−Δ, Δ] unless the scheme does not
// clip.
func (c *client) residual(y float32, v []float32) float32 {
	e := y - vec.Dot(c.u, v)
	if c.sh.clip {
		d := float32(c.sh.delta)
		e = min(max(e, -d), d)
	}
	return e
}

// basic uploads the whole gradient of (8) plus the fixed noise (Alg. 1).
func (c *client) basic(b *protocol.Broadcast) (*protocol.Upload, error) {
	sh := c.sh
	k := sh.k
	if b.Items != nil || len(b.V) != sh.m*k || c.eta == nil {
		return nil, fmt.Errorf("%w: basic round without the whole V or before setup", protocol.ErrMessage)
	}
	if c.vals == nil {
		c.vals = make([]float32, sh.m*k)
	}
	lam := float32(b.Param(paramLambda, 0))
	for p, v := range b.V {
		c.vals[p] = lam*v + c.eta[p]
	}
	for n, j := range c.items {
		v := b.V[int(j)*k : int(j)*k+k]
		e := 2 * c.residual(c.y[n], v)
		row := c.vals[int(j)*k : int(j)*k+k]
		for l := range row {
			row[l] -= e * c.u[l]
		}
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: sh.all, Values: c.vals}
	return &c.up, nil
}

// sampled uploads the named positions (Alg. C2): R/k·(gradient element +
// noise share) at each, zeros elsewhere in the named rows.
func (c *client) sampled(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	sh := c.sh
	k := sh.k
	ad := k
	if sh.b > 0 && sh.scheme == dp.MixtureShares {
		ad = 2 * k
	}
	rows := b.Items
	if rows == nil || b.AuxDim != ad || len(b.Aux) != len(rows)*ad {
		return nil, fmt.Errorf("%w: sampled round without positions (AuxDim %d, want %d)", protocol.ErrMessage, b.AuxDim, ad)
	}
	scale := float32(b.Param(paramScale, 0))
	lam := float32(b.Param(paramLambda, 0))
	c.upItems = append(c.upItems[:0], rows...)
	if cap(c.vals) < len(rows)*k {
		c.vals = make([]float32, len(rows)*k)
	}
	vals := c.vals[:len(rows)*k]
	clear(vals)
	c.noise = slices.Grow(c.noise[:0], len(rows)*k)
	if ad > k {
		c.h = slices.Grow(c.h[:0], len(rows)*k)
	}
	for q, j := range rows {
		v := b.Row(q)
		aux := b.Aux[q*ad : (q+1)*ad]
		var e float32
		if n, ok := slices.BinarySearch(c.items, j); ok {
			e = 2 * c.residual(c.y[n], v)
		}
		for l, on := range aux[:k] {
			if on == 0 {
				continue
			}
			vals[q*k+l] = lam*v[l] - e*c.u[l]
			c.noise = append(c.noise, 0)
			if ad > k {
				c.h = append(c.h, aux[k+l])
			}
		}
	}
	if sh.b > 0 {
		sh.fillShares(r, c.h, c.noise)
	}
	// Noise shares in position order, then the scale of C2 line 5.
	x := 0
	for q := range rows {
		for l, on := range b.Aux[q*ad : q*ad+k] {
			if on != 0 {
				vals[q*k+l] = scale * (vals[q*k+l] + c.noise[x])
				x++
			}
		}
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.upItems, Values: vals}
	return &c.up, nil
}

// Round kinds of the server.
const (
	kindSetup = iota
	kindFit
	kindTrain
)

// server holds the public item factors and chooses the positions.
type server struct {
	cfg  Config
	k, m int
	n    int // clients announced in the setup round
	md   int
	v    []float32

	round int // next protocol round
	kind  int // kind of the current round
	t     int // training rounds done

	// Position sampling (LDP-OP, RSMF): the pass's positions in random
	// order; the first used are marked (the paper's M).
	posSrc *rand.ChaCha8 // posRng's source, for snapshots
	posRng *rand.Rand
	perm   []int32
	used   int
	pass   int
	h      []float32 // MixtureShares: the pass's H, md
	sel    []int32   // this round's positions, sorted
	rows   []int32
	rowOf  []int32 // item → index in rows, −1 if not named
	bv     []float32
	aux    []float32
	acc    []float64
	scale  float64
	sumAll []float64 // Basic

	b      protocol.Broadcast
	params map[string]float64

	led *ledger  // the releases (nil for Basic)
	mk  *masking // the integer path, nil on the float paths
	// arrived counts the clients whose words the last masked round summed.
	arrived int

	last      RoundStats
	lastRound int

	// roundEps is the ε of the round aggregated last, alone, with the
	// noise that arrived; roundOK reports that it released a sum.
	roundEps float64
	roundOK  bool
	// short is set once a released masked round's noise fell short of
	// its calibration (dropouts), and basicSum adds up the released
	// rounds' roundEps: then the total is that sum (Spent).
	short    bool
	basicSum float64
}

// ledger is the accounting of releases, in units of ε: per position the
// releases in the current refit segment, per row Σ cnt² and the closed
// segments' Σ ‖c_j‖₂. On the integer path (mk not nil) it also keeps per
// row the current segment's max_l c_l and Σ_l c_l and the closed
// segments' rowTotals, and the Rényi-DP ε of the worst row and round.
type ledger struct {
	k           int
	cnt         []int32
	rowSq       []int64
	rowDone     []float64
	maxRow      float64 // max_j (rowDone_j + sqrt(rowSq_j))
	sumRows     float64 // Σ_j (rowDone_j + sqrt(rowSq_j))
	roundFactor float64 // max over rounds of sqrt(positions of one row)
	// userRound is the max over rounds of Σ_j sqrt(positions of row j):
	// the user-level per-round factor (a user's data enter every row);
	// skUserRound its integer-path ε at δ, from the rows' totals.
	userRound, skUserRound float64
	updated                []bool

	mk      *masking
	rowMax  []int32
	rowSum  []int64
	done    []rowTotals
	skMax   float64 // max_j ε of row j's releases so far, at δ
	skRound float64 // max over rounds of one round's ε, at δ
}

func newLedger(m, k int, mk *masking) *ledger {
	l := &ledger{k: k, cnt: make([]int32, m*k), rowSq: make([]int64, m), rowDone: make([]float64, m), updated: make([]bool, m*k)}
	if mk != nil {
		l.mk, l.rowMax, l.rowSum, l.done = mk, make([]int32, m), make([]int64, m), make([]rowTotals, m)
	}
	return l
}

// current returns row j's totals in the current segment.
func (l *ledger) current(j int) rowTotals {
	mx, sum := float64(l.rowMax[j]), float64(l.rowSum[j])
	return rowTotals{a: mx, x: math.Sqrt(mx * sum), c: sum, n: math.Sqrt(float64(l.rowSq[j]))}
}

// totals returns row j's totals over the run.
func (l *ledger) totals(j int) rowTotals {
	t := l.done[j]
	t.add(l.current(j))
	return t
}

// sumTotals returns the totals summed over every row: a user's data
// enter every row she rated.
func (l *ledger) sumTotals() rowTotals {
	var t rowTotals
	for j := range l.done {
		t.add(l.totals(j))
	}
	return t
}

// NewServer returns the server of cfg for a catalog of numItems items on
// the public rating scale (V⁰'s first coordinate starts at scale.Max/B).
// It draws its own randomness (V⁰, the positions, H) from cfg.Seed and
// learns the number of clients, over which it averages, from their
// announcements in the setup round.
func NewServer(cfg Config, numItems int, scale ratings.Scale) (protocol.Stateful, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if numItems < 1 {
		return nil, fmt.Errorf("%w: %d items", ErrConfig, numItems)
	}
	if !(scale.Max > scale.Min) {
		return nil, fmt.Errorf("%w: rating scale %v has no range", ErrConfig, scale)
	}
	var mk *masking
	if cfg.Aggregation == protocol.AggMasked {
		var err error
		if mk, err = newMasking(cfg, numItems, float64(scale.Max-scale.Min)); err != nil {
			return nil, err
		}
	}
	return newServer(cfg, numItems, float64(scale.Max), mk), nil
}

func newServer(cfg Config, m int, rmax float64, mk *masking) *server {
	k := cfg.Dim
	s := &server{
		cfg: cfg, k: k, m: m, md: m * k,
		v:         make([]float32, m*k),
		params:    map[string]float64{},
		lastRound: -1, mk: mk,
	}
	r := rng.New(cfg.Seed, streamInit)
	for p := range s.v {
		s.v[p] = float32(r.NormFloat64() * cfg.InitScale)
	}
	first := float32(rmax / cfg.Bound)
	for j := range m {
		s.v[j*k] += first
	}
	if cfg.Variant == Basic {
		s.sumAll = make([]float64, s.md)
		return s
	}
	s.posSrc = rand.NewChaCha8(rng.Seed(cfg.Seed, streamPos))
	s.posRng = rand.New(s.posSrc)
	s.rowOf = make([]int32, m)
	for j := range s.rowOf {
		s.rowOf[j] = -1
	}
	s.led = newLedger(m, k, mk)
	return s
}

// Broadcast: round 0 is the setup (the users fit u_i against V⁰), then
// the training rounds, with a fit round before every Refit-th.
func (s *server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.round {
		return nil, fmt.Errorf("ldpop: broadcast of round %d, expected %d", round, s.round)
	}
	if round > 0 && s.mk != nil && s.n <= 0 {
		// A refused setup sum (CheckSum) is folded as no sum: without the
		// client count the clients cannot size their noise shares nor the
		// server bound a training sum, and the setup cannot run again
		// (one masked input per client per round). The run ends here; a
		// restart from the snapshot ends here again.
		return nil, fmt.Errorf("ldpop: no client was counted in the setup round (its sum was refused, or none arrived): the masked run cannot train")
	}
	clear(s.params)
	s.params[paramLambda] = s.cfg.Reg
	s.b = protocol.Broadcast{Round: round, Dim: s.k, NumItems: s.m, Params: s.params}
	switch {
	case round == 0:
		s.kind = kindSetup
		s.b.Phase = protocol.PhaseSetup
		s.b.V = s.v
		if s.mk != nil {
			s.b.Words, s.b.Bits = 1, maskBits
		}
		if s.cfg.Variant == Basic && s.cfg.Noise == dp.MixtureShares {
			// The paper's H, drawn once: Basic's noise is fixed.
			s.h = make([]float32, s.md)
			hr := rng.New(s.cfg.Seed, streamMix)
			for p := range s.h {
				s.h[p] = float32(dp.SampleMixing(hr))
			}
			s.b.Aux, s.b.AuxDim = s.h, s.k
		}
	case s.cfg.Refit > 0 && s.t > 0 && s.t%s.cfg.Refit == 0 && s.kind == kindTrain:
		s.kind = kindFit
		s.b.Phase = protocol.PhaseTrain
		s.b.V = s.v
		s.params[paramFit] = 1
		s.led.closeSegment()
	default:
		s.kind = kindTrain
		s.b.Phase = protocol.PhaseTrain
		if s.cfg.Variant == Basic {
			s.b.V = s.v
			break
		}
		s.choose()
		s.b.Items, s.b.V, s.b.Aux = s.rows, s.bv, s.aux
		s.b.AuxDim = len(s.aux) / len(s.rows)
		s.params[paramScale] = s.scale
		if s.mk != nil {
			s.b.Words, s.b.Bits = len(s.sel)+1, maskBits
			s.params[paramClients] = float64(s.n)
		}
	}
	return &s.b, nil
}

// choose names this round's positions, without replacement within a
// pass, and builds the rows, V rows and masks of the broadcast.
func (s *server) choose() {
	k := s.k
	if s.perm == nil || s.used == s.md {
		if s.perm == nil {
			s.perm = make([]int32, s.md)
		}
		for p := range s.perm {
			s.perm[p] = int32(p)
		}
		s.posRng.Shuffle(len(s.perm), func(a, b int) { s.perm[a], s.perm[b] = s.perm[b], s.perm[a] })
		s.used = 0
		if s.cfg.Variant == LDPOP && s.cfg.Noise == dp.MixtureShares {
			if s.h == nil {
				s.h = make([]float32, s.md)
			}
			hr := rng.New(s.cfg.Seed, streamMix, uint64(s.pass))
			for p := range s.h {
				s.h[p] = float32(dp.SampleMixing(hr))
			}
		}
		s.pass++
	}
	left := s.md - s.used
	take := min(s.cfg.PerRound, left)
	s.scale = float64(left) / float64(take)
	s.sel = append(s.sel[:0], s.perm[s.used:s.used+take]...)
	s.used += take
	slices.Sort(s.sel)
	for _, j := range s.rows {
		s.rowOf[j] = -1
	}
	s.rows = s.rows[:0]
	for _, p := range s.sel {
		j := p / int32(k)
		if len(s.rows) == 0 || s.rows[len(s.rows)-1] != j {
			s.rowOf[j] = int32(len(s.rows))
			s.rows = append(s.rows, j)
		}
	}
	ad := k
	if s.h != nil {
		ad = 2 * k
	}
	s.bv = slices.Grow(s.bv[:0], len(s.rows)*k)[:len(s.rows)*k]
	s.aux = slices.Grow(s.aux[:0], len(s.rows)*ad)[:len(s.rows)*ad]
	clear(s.aux)
	for q, j := range s.rows {
		copy(s.bv[q*k:(q+1)*k], s.v[int(j)*k:int(j)*k+k])
	}
	for _, p := range s.sel {
		q := int(s.rowOf[p/int32(k)])
		l := int(p) % k
		s.aux[q*ad+l] = 1
		if s.h != nil {
			s.aux[q*ad+k+l] = s.h[p]
		}
	}
}

// Aggregate averages the uploads and steps V.
func (s *server) Aggregate(round int, ups []*protocol.Upload) error {
	defer func() { s.round++ }()
	if s.kind == kindSetup {
		for _, u := range ups {
			switch {
			case u == nil:
			case s.mk != nil && len(u.Words) == 1:
				s.n += int(u.Words[0])
			case len(u.Scalars) > 0:
				s.n += int(u.Scalars[0])
			}
		}
		return nil
	}
	if s.kind != kindTrain {
		return nil
	}
	if s.n <= 0 {
		return fmt.Errorf("ldpop: no client announced itself in the setup round")
	}
	lr := s.cfg.rate(s.t)
	inv := 1 / float64(s.n)
	k := s.k
	if s.cfg.Variant == Basic {
		clear(s.sumAll)
		for _, u := range ups {
			if u == nil {
				continue
			}
			for q, j := range u.Items {
				row := u.Values[q*k : (q+1)*k]
				acc := s.sumAll[int(j)*k : int(j)*k+k]
				for l, x := range row {
					acc[l] += float64(x)
				}
			}
		}
		for p, g := range s.sumAll {
			s.v[p] -= float32(lr * g * inv)
		}
		s.noteRound(true)
	} else if s.mk != nil {
		folded, err := s.aggregateMasked(round, ups)
		if err != nil {
			return err
		}
		if folded { // a refused sum (CheckSum) moves nothing
			for x, p := range s.sel {
				s.v[p] -= float32(lr * s.acc[x] * s.scale * inv)
			}
		}
		// Refused or not, the sum was unmasked: its positions count as
		// released, and the round as one of the Rounds the noise was
		// calibrated for.
		s.led.account(s.sel)
		s.noteRound(folded)
	} else {
		s.acc = slices.Grow(s.acc[:0], len(s.rows)*k)[:len(s.rows)*k]
		clear(s.acc)
		for _, u := range ups {
			if u == nil {
				continue
			}
			for q, j := range u.Items {
				qi := s.rowOf[j]
				if qi < 0 {
					return fmt.Errorf("%w: upload of client %d round %d has item %d, not named this round", protocol.ErrMessage, u.Client, round, j)
				}
				row := u.Values[q*k : (q+1)*k]
				acc := s.acc[int(qi)*k : int(qi)*k+k]
				for l, x := range row {
					acc[l] += float64(x)
				}
			}
		}
		for _, p := range s.sel {
			j, l := int(p)/k, int(p)%k
			g := s.acc[int(s.rowOf[j])*k+l] * inv
			s.v[p] -= float32(lr * g)
		}
		s.led.account(s.sel)
		s.noteRound(true)
	}
	s.t++
	s.last = RoundStats{Round: s.t, Rounds: s.cfg.Rounds, Pass: s.pass - 1, LearnRate: lr}
	switch {
	case s.cfg.Variant == LDPOP && s.mk != nil:
		s.last.EpsSpent = s.led.skMax
	case s.cfg.Variant == LDPOP:
		s.last.EpsSpent = s.cfg.Eps * s.led.maxRow
	case s.cfg.Variant == Basic:
		s.last.EpsSpent = s.cfg.Eps * math.Sqrt(float64(k))
	}
	s.lastRound = round
	return nil
}

// noteRound records the ε of the training round just aggregated, alone,
// for RoundSpent and Spent: on the integer path with the noise that
// arrived (NoiseCoverage at the broadcast's ρ), on the float paths the
// configured noise's ε·√(positions of one row), Basic's ε·√k. released
// is false when no sum was folded.
func (s *server) noteRound(released bool) {
	s.roundEps, s.roundOK = 0, false
	if s.cfg.Variant == RSMF || !released {
		return
	}
	switch {
	case s.cfg.Variant == Basic || !s.cfg.Aggregation.Secure():
		// Basic: existence leaks by the difference attack; off: the
		// server reads single uploads. No finite ε holds against it.
		s.roundEps = math.Inf(1)
	case s.mk != nil:
		cov, eps, ok := s.coverage(s.b.Param(protocol.ParamMinShare, 1))
		if !ok {
			return
		}
		s.roundEps, s.short = eps, s.short || cov < 1
	default:
		// A user's ratings enter every row she rated: Σ_j √(positions of
		// row j) this round.
		s.roundEps = 2 * s.cfg.Eps * s.roundTotals().n
	}
	s.roundOK = true
	s.basicSum += s.roundEps
}

// RoundSpent implements protocol.RoundSpent: the user-level ε of the
// training round aggregated last, alone (the report's EpsRound), with the
// noise that arrived; +Inf for Basic and without secure aggregation.
// RSMF spends none.
func (s *server) RoundSpent() (eps float64, ok bool) { return s.roundEps, s.roundOK }

// Spent implements protocol.Spent: the report's user-level EpsTotal for
// the rounds released so far. On the integer path it is the Rényi-DP ε
// at δ of one user's releases over every row, at full noise; once a
// round's noise fell short (dropouts) that composition no longer holds
// and the figure is the released rounds' ε added up, each with the noise
// that arrived (basic composition, an upper bound). On the float path it
// is 2ε·Σ_j ‖c_j‖₂ at δ 0. Basic and runs without secure aggregation
// have no finite figure (+Inf once a round is released). RSMF is not
// private: ok false.
func (s *server) Spent() (eps, delta float64, ok bool) {
	switch {
	case s.cfg.Variant == RSMF:
		return 0, 0, false
	case s.cfg.Variant == Basic || !s.cfg.Aggregation.Secure():
		if s.basicSum == 0 {
			return 0, 0, true
		}
		return math.Inf(1), 0, true
	case s.mk != nil && s.short:
		return s.basicSum, s.mk.delta, true
	case s.mk != nil:
		if s.basicSum == 0 {
			return 0, s.mk.delta, true
		}
		return s.mk.rowEps(s.led.sumTotals(), 2*s.mk.a), s.mk.delta, true
	}
	return 2 * s.cfg.Eps * s.led.sumRows, 0, true
}

// account counts the releases of positions sel, sorted (in units of ε,
// u_i fixed): row j of V released c_jl times at coordinate l costs a
// rating of item j Σ_l c_jl|u_il|/B ≤ ‖c_j‖₂.
func (l *ledger) account(sel []int32) {
	k := int32(l.k)
	run := 0
	var roundSum float64
	var roundTot rowTotals
	defer func() {
		l.userRound = max(l.userRound, roundSum)
		if l.mk != nil {
			l.skUserRound = max(l.skUserRound, l.mk.rowEps(roundTot, 2*l.mk.a))
		}
	}()
	for n, p := range sel {
		j := p / k
		c := int64(l.cnt[p])
		l.cnt[p]++
		l.updated[p] = true
		before := math.Sqrt(float64(l.rowSq[j]))
		l.rowSq[j] += 2*c + 1
		after := math.Sqrt(float64(l.rowSq[j]))
		l.sumRows += after - before
		l.maxRow = max(l.maxRow, l.rowDone[j]+after)
		if n > 0 && sel[n-1]/k == j {
			run++
		} else {
			run = 1
		}
		l.roundFactor = max(l.roundFactor, math.Sqrt(float64(run)))
		if n+1 == len(sel) || sel[n+1]/k != j {
			roundSum += math.Sqrt(float64(run))
			roundTot.add(runTotals(run))
		}
		if l.mk == nil {
			continue
		}
		l.rowMax[j] = max(l.rowMax[j], int32(c+1))
		l.rowSum[j]++
		if n+1 == len(sel) || sel[n+1]/k != j { // the row's last position this round
			l.skMax = max(l.skMax, l.mk.rowEps(l.totals(int(j)), l.mk.a))
			l.skRound = max(l.skRound, l.mk.rowEps(runTotals(run), l.mk.a))
		}
	}
}

// closeSegment ends a refit segment: the users' vectors change, so the
// next releases compose on top of the finished segment's.
func (l *ledger) closeSegment() {
	for j, q := range l.rowSq {
		if q > 0 && l.mk != nil {
			l.done[j].add(l.current(j))
			l.rowMax[j], l.rowSum[j] = 0, 0
		}
		if q > 0 {
			l.rowDone[j] += math.Sqrt(float64(q))
			l.rowSq[j] = 0
		}
	}
	clear(l.cnt)
}

// Done reports whether every training round has been aggregated.
func (s *server) Done() bool { return s.t >= s.cfg.Rounds }

// trained returns the stats of protocol round round if it trained.
func (s *server) trained(round int) (RoundStats, bool) {
	return s.last, round == s.lastRound
}

// Round returns the next round the server will broadcast.
func (s *server) Round() int { return s.round }

// Factors returns the current V and the dimension.
func (s *server) Factors() ([]float32, int) { return s.v, s.k }

// snapshotVersion is the version byte of the server's snapshot.
const snapshotVersion = 1

// snapshot is the state of a server between rounds: everything the next
// Broadcast and Aggregate read that a round changes, the position
// generator's state and the accounting. The rest is configuration or
// rebuilt by Broadcast.
type snapshot struct {
	Dim, NumItems, N, Round, Kind, T int
	V                                []float32
	PosRng                           []byte // the ChaCha8 state, nil for Basic
	Perm                             []int32
	Used, Pass                       int
	H                                []float32
	Cnt                              []int32
	RowSq                            []int64
	RowDone                          []float64
	MaxRow, SumRows, RoundFactor     float64
	Updated                          []bool
	// Short and BasicSum: a round's noise fell short, and the released
	// rounds' ε added up (Spent).
	Short    bool
	BasicSum float64
	// The integer path's accounting (absent on the float paths): per
	// row max_l c_l and Σ_l c_l, the closed segments' totals (four per
	// row), the worst row's and round's ε.
	RowMax         []int32
	RowSum         []int64
	Done           []float64
	SkMax, SkRound float64
}

// MarshalBinary returns the server's state: a version byte, then the gob
// encoding of a snapshot.
func (s *server) MarshalBinary() ([]byte, error) {
	x := snapshot{Dim: s.k, NumItems: s.m, N: s.n, Round: s.round, Kind: s.kind, T: s.t,
		V: s.v, Perm: s.perm, Used: s.used, Pass: s.pass, H: s.h, Short: s.short, BasicSum: s.basicSum}
	if s.posSrc != nil {
		st, err := s.posSrc.MarshalBinary()
		if err != nil {
			return nil, err
		}
		x.PosRng = st
	}
	if l := s.led; l != nil {
		x.Cnt, x.RowSq, x.RowDone, x.Updated = l.cnt, l.rowSq, l.rowDone, l.updated
		x.MaxRow, x.SumRows, x.RoundFactor = l.maxRow, l.sumRows, l.roundFactor
		if l.mk != nil {
			x.RowMax, x.RowSum, x.SkMax, x.SkRound = l.rowMax, l.rowSum, l.skMax, l.skRound
			x.Done = make([]float64, 0, 4*len(l.done))
			for _, t := range l.done {
				x.Done = append(x.Done, t.a, t.x, t.c, t.n)
			}
		}
	}
	return protocol.EncodeSnapshot(snapshotVersion, x)
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration; it fails, leaving s unchanged, on
// corrupt data or another shape.
func (s *server) UnmarshalBinary(data []byte) error {
	var x snapshot
	if err := protocol.DecodeSnapshot(data, snapshotVersion, &x); err != nil {
		return fmt.Errorf("ldpop: server snapshot: %w", err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ldpop: server snapshot: "+format, a...)
	}
	md, m := s.md, s.m
	switch {
	case x.Dim != s.k || x.NumItems != s.m:
		return bad("%d items × %d, the server has %d × %d", x.NumItems, x.Dim, s.m, s.k)
	case len(x.V) != md:
		return bad("%d factors, want %d", len(x.V), md)
	case x.Round < 0 || x.T < 0 || x.T > x.Round || x.N < 0 || x.Kind < kindSetup || x.Kind > kindTrain:
		return bad("round %d, training round %d, %d clients, kind %d", x.Round, x.T, x.N, x.Kind)
	case x.Perm != nil && len(x.Perm) != md, x.Used < 0 || x.Used > md, x.Pass < 0:
		return bad("%d permuted positions, %d used, pass %d, want %d positions", len(x.Perm), x.Used, x.Pass, md)
	case x.H != nil && len(x.H) != md:
		return bad("%d mixing variables, want %d", len(x.H), md)
	case (x.PosRng != nil) != (s.posSrc != nil):
		return bad("position generator state present: %v, the server has one: %v", x.PosRng != nil, s.posSrc != nil)
	}
	for _, p := range x.Perm {
		if p < 0 || int(p) >= md {
			return bad("permuted position %d outside [0, %d)", p, md)
		}
	}
	if s.led != nil && (len(x.Cnt) != md || len(x.Updated) != md || len(x.RowSq) != m || len(x.RowDone) != m) {
		return bad("accounting of %d positions and %d rows, want %d and %d", len(x.Cnt), len(x.RowSq), md, m)
	}
	if s.led != nil && s.led.mk != nil && (len(x.RowMax) != m || len(x.RowSum) != m || len(x.Done) != 4*m) {
		return bad("integer-path accounting of %d, %d and %d values, want %d, %d and %d", len(x.RowMax), len(x.RowSum), len(x.Done), m, m, 4*m)
	}
	if s.posSrc != nil {
		var src rand.ChaCha8
		if err := src.UnmarshalBinary(x.PosRng); err != nil {
			return bad("position generator: %w", err)
		}
		*s.posSrc = src
	}
	copy(s.v, x.V)
	s.n, s.round, s.kind, s.t = x.N, x.Round, x.Kind, x.T
	s.perm, s.used, s.pass, s.h = x.Perm, x.Used, x.Pass, x.H
	s.short, s.basicSum = x.Short, x.BasicSum
	if l := s.led; l != nil {
		copy(l.cnt, x.Cnt)
		copy(l.rowSq, x.RowSq)
		copy(l.rowDone, x.RowDone)
		copy(l.updated, x.Updated)
		l.maxRow, l.sumRows, l.roundFactor = x.MaxRow, x.SumRows, x.RoundFactor
		if l.mk != nil {
			copy(l.rowMax, x.RowMax)
			copy(l.rowSum, x.RowSum)
			for j := range l.done {
				l.done[j] = rowTotals{a: x.Done[4*j], x: x.Done[4*j+1], c: x.Done[4*j+2], n: x.Done[4*j+3]}
			}
			l.skMax, l.skRound = x.SkMax, x.SkRound
		}
	}
	s.lastRound = -1
	return nil
}
