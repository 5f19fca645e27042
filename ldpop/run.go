package ldpop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

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
)

// run is one training run. Only Train reaches into both the server and the
// clients, to build them and to gather the model at the end, as an
// evaluation harness would.
type run struct {
	cfg     Config
	train   *ratings.Dataset
	sh      *shared
	srv     *server
	cls     []*client
	clients []protocol.Client
}

func newRun(train *ratings.Dataset, cfg Config) *run {
	n, m, k := train.NumUsers(), train.NumItems(), cfg.Dim
	sh := &shared{
		variant: cfg.Variant, k: k, m: m, n: n,
		delta: float64(train.Scale.Max - train.Scale.Min),
		bound: cfg.Bound, reg: cfg.Reg, scheme: cfg.Noise,
		clip:   cfg.Variant != Basic,
		lambda: float32(cfg.Reg),
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
	r := &run{cfg: cfg, train: train, sh: sh}
	byUser := train.ByUser()
	r.cls = make([]*client, n)
	r.clients = make([]protocol.Client, n)
	for u := range n {
		items, vals := byUser.Row(u)
		c := &client{id: u, sh: sh, items: slices.Clone(items), y: slices.Clone(vals), u: make([]float32, k)}
		r.cls[u], r.clients[u] = c, c
	}
	r.srv = newServer(cfg, m, n, float64(train.Scale.Max))
	return r
}

// model gathers the clients' user vectors and the server's V: a
// prediction is u_i·v_j (the paper has no bias term), and the middle of
// the scale for a user without training ratings or an unknown index.
func (r *run) model() *model.Model {
	return model.Gathered(r.train, r.cfg.Dim, r.srv.v, func(u int) ([]float32, bool) {
		c := r.cls[u]
		return c.u, len(c.items) > 0
	})
}

func (r *run) report(mod *model.Model) *Report {
	s := r.srv
	rep := &Report{
		NoiseScale: r.sh.b, Passes: s.pass, Positions: s.md,
		TrainRMSE: eval.Rating(mod, r.train).RMSE,
	}
	for _, c := range r.cls {
		if c.clipped {
			rep.ClippedUsers++
		}
	}
	eps := r.cfg.Eps
	switch r.cfg.Variant {
	case LDPOP:
		rep.EpsRound = eps * s.roundFactor
		rep.EpsTotal = eps * s.maxRow
		rep.EpsTotalUser = 2 * eps * s.sumRows
	case Basic:
		rep.EpsRound = eps * math.Sqrt(float64(r.cfg.Dim))
		rep.EpsTotal = rep.EpsRound
		rep.EpsTotalUser = math.Inf(1) // existence: the difference attack
	}
	for _, ok := range s.updated {
		if ok {
			rep.Updated++
		}
	}
	if r.cfg.Variant == Basic && s.t > 0 {
		rep.Updated = s.md
	}
	return rep
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
	clip    bool    // clip residuals to [−Δ, Δ]
	all     []int32 // 0..m−1, the items of a basic upload
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
	fw      fitWork
}

// ID returns the client's index.
func (c *client) ID() int { return c.id }

// Round answers one broadcast.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	k := c.sh.k
	if b.Dim != k || b.NumItems != c.sh.m {
		return nil, fmt.Errorf("%w: broadcast of %d items × %d, the client expects %d × %d", protocol.ErrMessage, b.NumItems, b.Dim, c.sh.m, k)
	}
	if b.Phase == protocol.PhaseSetup || b.Param(paramFit, 0) == 1 {
		if b.Items != nil || len(b.V) != c.sh.m*k {
			return nil, fmt.Errorf("%w: a fit round must carry the whole V", protocol.ErrMessage)
		}
		c.clipped = fitUser(c.u, c.items, c.y, b.V, k, c.sh.reg, c.sh.bound, &c.fw)
		if b.Phase == protocol.PhaseSetup && c.sh.variant == Basic {
			if err := c.drawFixedNoise(b, r); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	if b.Phase != protocol.PhaseTrain {
		return nil, nil
	}
	if c.sh.variant == Basic {
		return c.basic(b)
	}
	return c.sampled(b, r)
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
	cfg     Config
	k, m, n int
	md      int
	v       []float32

	round int // next protocol round
	kind  int // kind of the current round
	t     int // training rounds done

	// Position sampling (LDP-OP, RSMF): the pass's positions in random
	// order; the first used are marked (the paper's M).
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

	// Accounting, in units of ε: per position the releases in the current
	// refit segment, per row Σ cnt² and the closed segments' Σ ‖c_j‖₂.
	cnt         []int32
	rowSq       []int64
	rowDone     []float64
	maxRow      float64 // max_j (rowDone_j + sqrt(rowSq_j))
	sumRows     float64 // Σ_j (rowDone_j + sqrt(rowSq_j))
	roundFactor float64 // max over rounds of sqrt(positions of one row)
	updated     []bool

	last      RoundStats
	lastRound int
}

func newServer(cfg Config, m, n int, rmax float64) *server {
	k := cfg.Dim
	s := &server{
		cfg: cfg, k: k, m: m, n: n, md: m * k,
		v:         make([]float32, m*k),
		params:    map[string]float64{},
		lastRound: -1,
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
	s.posRng = rng.New(cfg.Seed, streamPos)
	s.rowOf = make([]int32, m)
	for j := range s.rowOf {
		s.rowOf[j] = -1
	}
	s.cnt = make([]int32, s.md)
	s.rowSq = make([]int64, m)
	s.rowDone = make([]float64, m)
	s.updated = make([]bool, s.md)
	return s
}

// Broadcast: round 0 is the setup (the users fit u_i against V⁰), then
// the training rounds, with a fit round before every Refit-th.
func (s *server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.round {
		return nil, fmt.Errorf("ldpop: broadcast of round %d, expected %d", round, s.round)
	}
	clear(s.params)
	s.params[paramLambda] = s.cfg.Reg
	s.b = protocol.Broadcast{Round: round, Dim: s.k, NumItems: s.m, Params: s.params}
	switch {
	case round == 0:
		s.kind = kindSetup
		s.b.Phase = protocol.PhaseSetup
		s.b.V = s.v
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
		s.closeSegment()
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
	if s.kind != kindTrain {
		return nil
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
			s.updated[p] = true
		}
		s.account()
	}
	s.t++
	s.last = RoundStats{Round: s.t, Rounds: s.cfg.Rounds, Pass: s.pass - 1, LearnRate: lr}
	switch s.cfg.Variant {
	case LDPOP:
		s.last.EpsSpent = s.cfg.Eps * s.maxRow
	case Basic:
		s.last.EpsSpent = s.cfg.Eps * math.Sqrt(float64(k))
	}
	s.lastRound = round
	return nil
}

// account counts this round's releases (in units of ε, u_i fixed): row j
// of V released c_jl times at coordinate l costs a rating of item j
// Σ_l c_jl|u_il|/B ≤ ‖c_j‖₂.
func (s *server) account() {
	k := int32(s.k)
	run := 0
	for n, p := range s.sel {
		j := p / k
		c := int64(s.cnt[p])
		s.cnt[p]++
		before := math.Sqrt(float64(s.rowSq[j]))
		s.rowSq[j] += 2*c + 1
		after := math.Sqrt(float64(s.rowSq[j]))
		s.sumRows += after - before
		s.maxRow = max(s.maxRow, s.rowDone[j]+after)
		if n > 0 && s.sel[n-1]/k == j {
			run++
		} else {
			run = 1
		}
		s.roundFactor = max(s.roundFactor, math.Sqrt(float64(run)))
	}
}

// closeSegment ends a refit segment: the users' vectors change, so the
// next releases compose on top of the finished segment's.
func (s *server) closeSegment() {
	if s.rowSq == nil {
		return
	}
	for j, q := range s.rowSq {
		if q > 0 {
			s.rowDone[j] += math.Sqrt(float64(q))
			s.rowSq[j] = 0
		}
	}
	clear(s.cnt)
}

// Done reports whether every training round has been aggregated.
func (s *server) Done() bool { return s.t >= s.cfg.Rounds }

// trained returns the stats of protocol round round if it trained.
func (s *server) trained(round int) (RoundStats, bool) {
	return s.last, round == s.lastRound
}
