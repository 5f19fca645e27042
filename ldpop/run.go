package ldpop

import (
	"math"
	"slices"
	"sync"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
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
