package hdpmf

import (
	"errors"
	"fmt"
	"github.com/privrec/privrec/accountant"
	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/internal/vec"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// Random stream labels under Config.Seed, apart from the clients' streams
// rng.New(Seed, clientID, round) that the transport draws.
const (
	streamServerInit uint64 = 0x46454430 + iota // "FED0"
	streamServerMix
	streamClientInit
)

// run is the client half of a training run: the clients and what they
// share (the accountant, the noise calibration). The server is built
// apart, by newServer, from public information only.
type run struct {
	cfg     Config
	train   *ratings.Dataset
	weights *budget.HDPWeights
	acct    *accountant.Accountant
	cls     []*client
	clients []protocol.Client
	noise   float64 // Laplace scale per coordinate
	thresh  float64 // PDPMF's t
	epsEff  float64 // the per-round ε of a weight-1 rating the noise is calibrated for
	mask    *masking
	sh      *shared
}

// newRun builds the client half of a run: the privacy weights, the noise
// calibration and the per-round ε of every user, the accountant and the
// clients.
//
// The calibration reads the training data: DPMF's floor (the smallest
// budget of all ratings) and PDPMF's threshold are statistics of the
// ratings' weights. That is what a vendor holding all its users' data (or
// the simulation) can compute; a deployment of independent devices would
// have to agree on them another way.
func newRun(train *ratings.Dataset, cfg Config) (*run, error) {
	w, err := weightsFor(train, cfg)
	if err != nil {
		return nil, err
	}
	sens := float64(train.Scale.Max - train.Scale.Min)
	if !(sens > 0) {
		return nil, fmt.Errorf("%w: rating scale %v has no range", ErrConfig, train.Scale)
	}
	r := &run{cfg: cfg, train: train, weights: w}
	byUser := train.ByUser()
	perRound, err := r.calibrate(sens, byUser)
	if err != nil {
		return nil, err
	}
	if r.acct, err = newAccountant(perRound, cfg); err != nil {
		return nil, err
	}
	if cfg.Aggregation == protocol.AggMasked {
		if r.mask, err = r.integerPath(sens); err != nil {
			return nil, err
		}
	}
	r.newClients(perRound, byUser)
	return r, nil
}

// integerPath calibrates the Skellam noise and checks that the sums of
// every item's raters fit 32 bits.
func (r *run) integerPath(sens float64) (*masking, error) {
	var m *masking
	if r.cfg.Variant == Plain {
		m = &masking{q: dp.Quantizer{Clip: maskClipFactor * sens, Scale: maskScale, Bits: 32}}
	} else {
		var err error
		if m, err = newMasking(r.cfg, r.epsEff, sens); err != nil {
			return nil, err
		}
	}
	n := max(1, r.train.NumUsers())
	if _, err := m.bits(n, r.train.NumItems()*r.cfg.Dim); err != nil {
		return nil, err
	}
	return m, nil
}

// serverItemWeights returns the public item weights γ the server of cfg
// needs for numItems items (nil but for HDPMF and HDPMF-R): cfg.Weights'
// or those drawn from cfg.Spec and cfg.SpecSeed, which do not depend on
// the users.
func serverItemWeights(cfg Config, numItems int) ([]float64, error) {
	if cfg.Variant != HDPMF && cfg.Variant != HDPMFR {
		return nil, nil
	}
	if cfg.Weights != nil {
		if len(cfg.Weights.Item) != numItems {
			return nil, fmt.Errorf("%w: Weights cover %d items, the catalog %d", ErrConfig, len(cfg.Weights.Item), numItems)
		}
		return cfg.Weights.Item, nil
	}
	return budget.HDPMFItemWeights(numItems, cfg.Spec, cfg.SpecSeed)
}

// weightsFor returns cfg.Weights, checked against train, or the weights
// drawn from cfg.Spec.
func weightsFor(train *ratings.Dataset, cfg Config) (*budget.HDPWeights, error) {
	w := cfg.Weights
	if w == nil {
		return budget.HDPMFSpec(train, cfg.Spec, cfg.SpecSeed)
	}
	if len(w.User) != train.NumUsers() || len(w.Item) != train.NumItems() {
		return nil, fmt.Errorf("%w: Weights cover %d users and %d items, the data %d and %d",
			ErrConfig, len(w.User), len(w.Item), train.NumUsers(), train.NumItems())
	}
	return w, nil
}

// calibrate sets the Laplace scale of the noise (and PDPMF's threshold)
// for rating sensitivity sens, and returns the ε each user's most exposed
// rating spends per round. byUser is the training data by user.
func (r *run) calibrate(sens float64, byUser *ratings.CSR) ([]float64, error) {
	cfg, train, w := r.cfg, r.train, r.weights
	eps := cfg.Eps // the budget of weight 1, also with cfg.Weights
	nu := train.NumUsers()
	perRound := make([]float64, nu) // per user
	switch cfg.Variant {
	case HDPMF, HDPMFR:
		r.noise, r.epsEff = dp.HDPMFNoiseScale(cfg.Dim, sens, eps), eps
		for u := range nu {
			items, _ := byUser.Row(u)
			var g float64
			for _, i := range items {
				g = math.Max(g, w.Item[i])
			}
			perRound[u] = w.User[u] * g * eps
		}
	case DPMF:
		lo := math.Inf(1)
		for k := range train.Values {
			lo = math.Min(lo, w.W(train.Users[k], train.Items[k])*eps)
		}
		r.noise, r.epsEff = dp.HDPMFNoiseScale(cfg.Dim, sens, lo), lo
		for u := range nu {
			perRound[u] = lo
		}
	case PDPMF:
		re := w.RatingWeights(train)
		for k := range re {
			re[k] *= eps
		}
		t, err := budget.Threshold(re, orDefault(cfg.Threshold, "mean"))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		r.thresh = t
		r.noise, r.epsEff = dp.HDPMFNoiseScale(cfg.Dim, sens, t), t
		for u := range nu {
			perRound[u] = t
		}
	case Plain:
		// No noise: nothing is spent because nothing is protected.
	}
	return perRound, nil
}

// newAccountant returns the accountant of the users' spending: each user
// spends perRound[u] a round, up to the cap cfg.EpsTotal scaled to the
// user's own per-round ε (no cap when EpsTotal is 0).
func newAccountant(perRound []float64, cfg Config) (*accountant.Accountant, error) {
	budgets := make([]float64, len(perRound))
	for u := range budgets {
		budgets[u] = math.Inf(1)
		if cfg.EpsTotal > 0 {
			budgets[u] = perRound[u] * cfg.EpsTotal / cfg.Eps
		}
		if !(budgets[u] > 0) {
			budgets[u] = math.Inf(1) // a user with nothing to spend
		}
	}
	return accountant.New(budgets, accountant.Config{Name: "user"})
}

// newClients builds one client per user: its ratings (stretched by W_ij
// for HDPMF), its initial user vector and what all clients share.
func (r *run) newClients(perRound []float64, byUser *ratings.CSR) {
	cfg, w := r.cfg, r.weights
	nu := r.train.NumUsers()
	sh := &shared{
		k: cfg.Dim, m: r.train.NumItems(), variant: cfg.Variant, scheme: cfg.Noise, noise: r.noise,
		reg: float32(cfg.Reg), pseudo: cfg.Pseudo, acct: r.acct, item: w.Item,
		eps: cfg.Eps, thresh: r.thresh, label: cfg.Variant.String() + "/grad-V", mask: r.mask,
		paper: cfg.PaperPredict,
	}
	if cfg.UserClip > 0 && cfg.Variant != Plain {
		sens := float64(r.train.Scale.Max - r.train.Scale.Min)
		sh.clipL2 = cfg.UserClip * sens
		sh.clipL1 = cfg.UserClip * math.Sqrt(float64(cfg.Dim)) * sens
		sh.clipInt = cfg.UserClip * sens * maskScale
	}
	r.sh = sh
	maxLen := 0
	for u := range nu {
		maxLen = max(maxLen, byUser.RowLen(u))
	}
	sh.ones = make([]int32, maxLen)
	for k := range sh.ones {
		sh.ones[k] = 1
	}
	r.cls = make([]*client, nu)
	r.clients = make([]protocol.Client, nu)
	ir := rng.New(cfg.Seed, streamClientInit)
	wbuf := make([]float64, maxLen) // one client's W_ij, for dp.Stretch
	for u := range nu {
		items, vals := byUser.Row(u)
		c := &client{
			id: u, sh: sh, beta: w.User[u], charge: perRound[u],
			items: append([]int32(nil), items...),
			y:     make([]float32, len(vals)),
			raw:   append([]float32(nil), vals...),
			u:     make([]float32, cfg.Dim),
		}
		copy(c.y, vals)
		if cfg.Variant == HDPMF || cfg.Variant == HDPMFR {
			wu := wbuf[:len(items)]
			for k, i := range items {
				wu[k] = w.W(int32(u), i)
			}
			dp.Stretch(vals, wu, c.y)
		}
		// Users start near a common direction, so that the first factor
		// learns the (stretched) item means in the first rounds, as a bias
		// would; the start does not depend on any data.
		for d := range c.u {
			c.u[d] = float32(ir.NormFloat64() * cfg.InitScale)
		}
		c.u[0] += 1
		if cfg.Variant == HDPMF || cfg.Variant == HDPMFR {
			c.u[0] = float32(w.User[u]) + c.u[0] - 1
		}
		project(c.u)
		r.cls[u], r.clients[u] = c, c
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// model gathers the clients' user vectors and the server's V (v). A user
// without training ratings, or an unknown index, gets the middle of the
// scale.
func (r *run) model(v []float32) *model.Model {
	m := model.Gathered(r.train, r.cfg.Dim, v, func(u int) ([]float32, bool) {
		c := r.cls[u]
		return c.u, len(c.items) > 0
	})
	switch {
	case r.cfg.PaperPredict:
		// The paper's rule: u·v/W_ij for HDPMF, u·v for the others.
		if r.cfg.Variant == HDPMF {
			m.UserWeight = toF32(r.weights.User)
			m.ItemWeight = toF32(r.weights.Item)
		}
	case r.cfg.Variant != Plain:
		// Every device folds in against the published table v as in the
		// final round (shrink.go), also one that missed it: u·ṽ plus the
		// user's offset, no weights.
		m.Offset = make([]float32, len(r.cls))
		for u, c := range r.cls {
			if len(c.items) > 0 {
				c.foldIn(v) // on failure: u = 0 and the user's mean
				copy(m.U[u*r.cfg.Dim:(u+1)*r.cfg.Dim], c.u)
			}
			m.Offset[u] = c.off
		}
	}
	return m
}

func toF32(x []float64) []float32 {
	out := make([]float32, len(x))
	for k, v := range x {
		out[k] = float32(v)
	}
	return out
}

func (r *run) report() *Report {
	a := r.acct.Report()
	rep := &Report{
		EpsTotal: a.Basic.MaxEps, AdvEpsTotal: a.Advanced.MaxEps, AdvDelta: a.Advanced.MaxDelta,
		NoiseScale: r.noise, Threshold: r.thresh, Refused: a.Refused, Accountant: a, Kept: 1,
	}
	for _, x := range a.Rounds {
		rep.EpsRound = math.Max(rep.EpsRound, x.MaxEps)
	}
	rep.Aggregation, rep.Noise = r.cfg.Aggregation.String(), "gamma-shares"
	if r.cfg.Noise == dp.MixtureShares {
		rep.Noise = "mixture-shares"
	}
	if m := r.mask; m != nil {
		rep.Noise = "skellam"
		rep.EpsRound, rep.EpsTotal, rep.Delta = m.epsRound, m.epsTotal, m.delta
		rep.NoiseScale = math.Sqrt(2*m.mu) / m.q.Scale
	}
	rep.UserEpsRound, rep.UserEpsTotal, rep.UserDelta = r.userEps()
	if r.cfg.Variant == Plain { // exact gradients: no guarantee at all
		rep.EpsRound, rep.EpsTotal, rep.Noise = math.Inf(1), math.Inf(1), "none"
		rep.UserEpsRound, rep.UserEpsTotal, rep.UserDelta = math.Inf(1), math.Inf(1), 0
	}
	if r.cfg.Variant == PDPMF {
		var kept int
		for _, c := range r.cls {
			kept += len(c.items)
		}
		rep.Kept = float64(kept) / float64(r.train.Len())
	}
	return rep
}

// userEps returns the proven figures: the ε of one user's rating values
// in one round and over the rounds the most active client uploaded in,
// and the δ of the total (see the package documentation, Privacy).
//
// Float paths: a round's release is Laplace with scale b per coordinate
// (r.noise), and one user's values move it by at most 2·clipL1 in L1, so
// a round is ε_r = 2·clipL1/b-DP (= UserClip times the per-round ε of a
// weight-1 rating). n rounds compose to the smaller of n·ε_r (basic, δ =
// 0) and the (ε, δ) of n·ε_r²/2-zCDP (pure ε-DP implies ε²/2-zCDP; Bun
// and Steinke 2016). Integer path: Skellam in Rényi DP at the user
// sensitivities (masking.userEps).
func (r *run) userEps() (round, total, delta float64) {
	sh := r.sh
	sent := 0
	for _, c := range r.cls {
		sent = max(sent, c.sent)
	}
	delta = r.cfg.Delta
	if delta == 0 {
		delta = DefaultDelta
	}
	if m := r.mask; m != nil {
		return m.userEps(1), m.userEps(sent), m.delta
	}
	if sh.clipL1 == 0 || !(r.noise > 0) {
		return math.Inf(1), math.Inf(1), 0
	}
	round = 2 * sh.clipL1 / r.noise
	total = float64(sent) * round
	if z := rdp.ZCDPToDP(float64(sent)*round*round/2, delta); z < total {
		return round, z, delta
	}
	return round, total, 0
}

// shared is the public configuration every client knows.
type shared struct {
	k       int
	m       int // catalog size
	variant Variant
	scheme  dp.ShareScheme
	noise   float64 // Laplace scale per coordinate of an item's summed noise
	reg     float32
	pseudo  float64
	acct    *accountant.Accountant
	item    []float64 // γ_j, public item weights
	eps     float64
	thresh  float64
	label   string
	ones    []int32
	mask    *masking // the integer path, nil on the float paths
	// clipL2 and clipL1 bound the norms of one client's whole noise-free
	// upload on the float paths (Config.UserClip·Δ and ·√K·Δ), clipInt the
	// L2 norm of its quantized words on the integer path; 0: no clip.
	clipL2, clipL1, clipInt float64
	noiseless               bool // Clients.Noiseless: no noise shares (the canary)
	paper                   bool // Config.PaperPredict: the paper's final step and prediction
}

// client is one user's device. Its fields never leave it except through
// the uploads it builds.
type client struct {
	id     int
	sh     *shared
	beta   float64   // β_i, this user's weight
	charge float64   // ε of this user's most exposed rating per round
	items  []int32   // rated (PDPMF: kept) items, increasing
	y      []float32 // ratings, stretched by W_ij for HDPMF
	raw    []float32 // the ratings, unstretched (HDPMF's final fold-in)
	off    float32   // HDPMF: the user's offset from the final fold-in
	u      []float32 // user vector, ‖u‖ ≤ 1
	grad   []float32 // scratch, K
	es     []float32 // scratch: the residual factor of each rated item's row
	sent   int       // training rounds this client uploaded in
	up     protocol.Upload
	// The integer path's buffers.
	words       []uint32
	row         []float32
	ints, noise []int64
	tabs        []*dp.SkellamTable // per item: its Skellam share sampler
	// The roster calibration's buffers (maskedDense): the dense words
	// and the one share sampler, drawn for rtabShares clients.
	dense      []uint32
	rtab       *dp.SkellamTable
	rtabShares int
}

func (c *client) ID() int { return c.id }

// Round answers one broadcast.
func (c *client) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	if err := c.check(b); err != nil {
		return nil, err
	}
	switch b.Phase {
	case protocol.PhaseSetup:
		return c.setup(b, r), nil
	case protocol.PhaseFinal:
		if c.sh.variant != Plain && !c.sh.paper {
			c.foldIn(b.V) // the published table (shrink.go)
		} else {
			c.updateUser(b)
		}
		return nil, nil
	}
	if b.Round >= 2 {
		c.updateUser(b)
	}
	// Under a roster calibration (protocol.ParamRoster) every client adds
	// its noise share to every item, data or not.
	rosterNoise := b.Words > 0 && c.sh.variant != Plain && protocol.Roster(b) > 0
	if len(c.items) == 0 {
		if rosterNoise {
			return c.maskedDense(b, r, false), nil
		}
		return nil, nil
	}
	if c.sh.variant != Plain { // Plain: exact gradients, nothing to spend
		if err := c.sh.acct.Charge(c.id, b.Round, c.charge, 0, c.sh.label); err != nil {
			if errors.Is(err, accountant.ErrBudgetExceeded) {
				if rosterNoise { // noise alone: no data released
					return c.maskedDense(b, r, false), nil
				}
				return nil, nil // out of budget: release nothing
			}
			return nil, err
		}
	}
	if rosterNoise {
		return c.maskedDense(b, r, true), nil
	}
	if b.Words > 0 {
		return c.maskedRound(b, r), nil
	}
	c.sent++
	k := c.sh.k
	vals := c.up.Values[:len(c.items)*k]
	u := c.u
	es := c.residuals(b)
	for n, j := range c.items {
		e := es[n]
		row := vals[n*k : n*k+k]
		switch {
		case c.sh.variant == Plain || c.sh.noiseless:
			clear(row)
		case c.sh.scheme == dp.MixtureShares:
			dp.FillMixShares(r, c.sh.noise, b.Aux[int(j)*k:int(j)*k+k], int(b.Counts[j]), row)
		default:
			dp.FillGammaShares32(r, c.sh.noise, int(b.Counts[j]), row)
		}
		vec.Axpy(row, u, e)
	}
	c.up.Client, c.up.Round, c.up.Items, c.up.Values = c.id, b.Round, c.items, vals
	c.up.Counts = c.sh.ones[:len(c.items)]
	return &c.up, nil
}

// residuals returns the factor e_n = 2(u·v_j − y_n) of each rated item's
// row e_n·u against b's V, scaled down so that the whole noise-free
// upload meets the user clip (Config.UserClip): on the float paths its L2
// norm ‖u‖₂·√Σe² ≤ clipL2 and its L1 norm ‖u‖₁·Σ|e| ≤ clipL1; on the
// integer path (clipInt) its L2 norm in integer units, after the row clip
// and stochastic rounding (each coordinate moves by less than 1), is at
// most clipInt: the float rows are scaled to clipInt − √(K·n) units.
func (c *client) residuals(b *protocol.Broadcast) []float32 {
	k := c.sh.k
	if cap(c.es) < len(c.items) {
		c.es = make([]float32, len(c.items))
	}
	es := c.es[:len(c.items)]
	u := c.u
	var s2, s1 float64
	for n, j := range c.items {
		v := b.V[int(j)*k : int(j)*k+k]
		e := 2 * (vec.Dot(u, v) - c.y[n])
		es[n] = e
		s2 += float64(e) * float64(e)
		s1 += math.Abs(float64(e))
	}
	var n2, n1 float64
	for _, x := range u {
		n2 += float64(x) * float64(x)
		n1 += math.Abs(float64(x))
	}
	l2, l1 := math.Sqrt(s2*n2), s1*n1
	f := 1.0
	switch sh := c.sh; {
	case b.Words > 0 && sh.clipInt > 0:
		room := math.Max(0, sh.clipInt-math.Sqrt(float64(k*len(c.items))))
		if l2*maskScale > room {
			f = room / (l2 * maskScale)
		}
	case b.Words == 0 && sh.clipL2 > 0:
		if l2 > sh.clipL2 {
			f = sh.clipL2 / l2
		}
		if l1*f > sh.clipL1 {
			f = sh.clipL1 / l1
		}
	}
	if f < 1 {
		for n := range es {
			es[n] *= float32(f)
		}
	}
	return es
}

// needUserRate names the parameter of the user step.
var needUserRate = []string{"lr-user"}

// check returns an error for a broadcast the client cannot answer: not
// shaped for its catalog, missing what the phase reads (V and the counts
// of every item, H under MixtureShares, the user step), non-finite, a
// masked round the client was not built for, or a round before setup.
func (c *client) check(b *protocol.Broadcast) error {
	sh := c.sh
	n := protocol.Need{Dim: sh.k, NumItems: sh.m}
	words := 0 // the masked words the phase asks for
	switch b.Phase {
	case protocol.PhaseSetup:
		words = sh.m
	case protocol.PhaseTrain:
		n.V, n.Whole = true, true
		if sh.variant != Plain {
			n.Counts = true
			if sh.scheme == dp.MixtureShares && b.Words == 0 {
				n.AuxDim = sh.k
			}
		}
		if b.Round >= 2 {
			n.Params = needUserRate
		}
		words = sh.m * (sh.k + 1)
	case protocol.PhaseFinal:
		n.V, n.Whole, n.Params = true, true, needUserRate
	}
	if b.Words > 0 {
		n.Words = words
	}
	if err := b.Require(n); err != nil {
		return err
	}
	switch {
	case b.Words > 0 && (b.Phase == protocol.PhaseFinal || b.Words != words):
		return fmt.Errorf("%w: %s round %d asks for %d words, the client sends %d", protocol.ErrMessage, b.Phase, b.Round, b.Words, words)
	case b.Words > 0 && b.Phase == protocol.PhaseTrain && sh.mask == nil:
		return fmt.Errorf("%w: a masked round, and the clients were not built for secagg=masked", protocol.ErrMessage)
	case b.Phase != protocol.PhaseSetup && c.grad == nil:
		return fmt.Errorf("%w: %s round %d before the setup round", protocol.ErrMessage, b.Phase, b.Round)
	}
	return nil
}

// setup samples (PDPMF) and announces the rated items.
func (c *client) setup(b *protocol.Broadcast, r *rand.Rand) *protocol.Upload {
	if c.sh.variant == PDPMF {
		n := 0
		for k, j := range c.items {
			e := c.beta * c.sh.item[j] * c.sh.eps
			if e >= c.sh.thresh || r.Float64() < dp.KeepProb(e, c.sh.thresh) {
				c.items[n], c.y[n], c.raw[n] = j, c.y[k], c.raw[k]
				n++
			}
		}
		c.items, c.y, c.raw = c.items[:n], c.y[:n], c.raw[:n]
	}
	c.grad = make([]float32, c.sh.k)
	c.up.Values = make([]float32, len(c.items)*c.sh.k)
	if len(c.items) == 0 {
		return nil
	}
	if b.Words > 0 {
		return c.maskedSetup(b)
	}
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.items, Counts: c.sh.ones[:len(c.items)], Values: c.up.Values}
	up := c.up
	up.Values = nil
	return &up
}

// updateUser takes one preconditioned gradient step on u against b's V
// (at the previous round's rate) and projects u into the unit ball.
func (c *client) updateUser(b *protocol.Broadcast) {
	if len(c.items) == 0 {
		return
	}
	k := c.sh.k
	g := c.grad
	clear(g)
	u := c.u
	for n, j := range c.items {
		v := b.V[int(j)*k : int(j)*k+k]
		e := 2 * (vec.Dot(u, v) - c.y[n])
		vec.Axpy(g, v, e)
	}
	lr := float32(b.Param("lr-user", 0) / (float64(len(c.items)) + c.sh.pseudo))
	reg2 := 2 * c.sh.reg
	for d := range u {
		u[d] -= lr * (g[d] + reg2*u[d])
	}
	project(u)
}

// project scales u into the unit L2 ball.
func project(u []float32) {
	var s float64
	for _, x := range u {
		s += float64(x) * float64(x)
	}
	if s > 1 {
		f := float32(1 / math.Sqrt(s))
		for d := range u {
			u[d] *= f
		}
	}
}

// server holds the public item factors and counts.
type server struct {
	cfg      serverConfig
	k        int
	numItems int
	v        []float32
	counts   []int32
	sum      []float32
	arrived  []int32
	aux      []float32
	round    int // next protocol round
	b        protocol.Broadcast
	params   map[string]float64
	masked   bool      // the integer path: dense words, sums mod 2^32
	tab      []float32 // the published table, computed once after the last training round
	etaSq    []float64 // per item, Σ η_t² over the rounds that stepped it (shrink.go)
	plain    bool      // the Plain variant: no noise
	// noise is the integer path's public calibration for HDPMF and
	// HDPMF-R (nil otherwise: DPMF and PDPMF calibrate on the clients'
	// data), for NoiseCoverage's ε.
	noise *masking
	// spent composes, in Rényi DP, the released training rounds of the
	// integer path with the noise that arrived in each (Spent).
	spent rdp.Curve
	// chk bounds the masked sums (CheckSum), nil off the integer path.
	chk *sumCheck
	// sumRound and sumInputs are the masked vectors in the summed upload
	// of round sumRound (SetSumInputs); inputs is the number of masked
	// vectors in the last round aggregated, which under a roster
	// calibration (protocol.ParamRoster) is the number of noise shares.
	sumRound, sumInputs, inputs int
}

// serverConfig is the public part of Config the server knows.
type serverConfig struct {
	Dim, Rounds          int
	LearnRate, UserLearn float64
	Reg, Pseudo, Init    float64
	Noise                dp.ShareScheme
	Seed                 uint64
	// Mid is the middle of the public rating scale and ItemWeight the
	// public item weights γ (nil but for HDPMF): v_j starts with first
	// coordinate γ_j·Mid, the other coordinates N(0, Init²).
	Mid        float64
	ItemWeight []float64
	// NoiseVar is the variance per coordinate of an item's summed noise
	// in one round (roundNoiseVar), for the published table's shrinkage.
	NoiseVar float64
}

func (c serverConfig) rate(t int) float64 { return schedule(c.LearnRate, t, c.Rounds) }

func (c serverConfig) userRate(t int) float64 {
	if c.UserLearn == 0 {
		return c.rate(t)
	}
	return schedule(c.UserLearn, t, c.Rounds)
}

// NewServer returns the server of cfg for a catalog of numItems items on
// the public rating scale: it needs only public information (the config,
// the catalog size, the scale's middle and the public item weights γ
// drawn from cfg.Spec), and draws its own randomness (the initial V, the
// mixing variables) from cfg.Seed.
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
	itemW, err := serverItemWeights(cfg, numItems)
	if err != nil {
		return nil, err
	}
	s := newServer(cfg, numItems, float64(scale.Min+scale.Max)/2, itemW)
	sens := float64(scale.Max - scale.Min)
	if s.masked && (cfg.Variant == HDPMF || cfg.Variant == HDPMFR) {
		if s.noise, err = newMasking(cfg, cfg.Eps, sens); err != nil {
			return nil, err
		}
	}
	if (cfg.Variant == HDPMF || cfg.Variant == HDPMFR) && !cfg.PaperPredict {
		s.cfg.NoiseVar = roundNoiseVar(cfg, sens, s.noise)
	}
	if s.masked {
		if s.chk, err = newSumCheck(cfg, s.noise, sens); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newServer(c Config, numItems int, mid float64, itemW []float64) *server {
	cfg := serverConfig{Mid: mid, ItemWeight: itemW,
		Dim: c.Dim, Rounds: c.Rounds, LearnRate: c.LearnRate, UserLearn: c.UserLearnRate,
		Reg: c.Reg, Pseudo: c.Pseudo, Init: c.InitScale, Noise: c.Noise, Seed: c.Seed,
	}
	s := &server{
		cfg: cfg, k: cfg.Dim, numItems: numItems, masked: c.Aggregation == protocol.AggMasked, plain: c.Variant == Plain,
		v:       make([]float32, numItems*cfg.Dim),
		counts:  make([]int32, numItems),
		sum:     make([]float32, numItems*cfg.Dim),
		arrived: make([]int32, numItems),
		etaSq:   make([]float64, numItems),
		params:  map[string]float64{},
	}
	r := rng.New(cfg.Seed, streamServerInit)
	for d := range s.v {
		s.v[d] = float32(r.NormFloat64() * cfg.Init)
	}
	for j := range numItems {
		g := 1.0
		if itemW != nil {
			g = itemW[j]
		}
		s.v[j*s.k] += float32(g * mid)
	}
	if cfg.Noise == dp.MixtureShares {
		s.aux = make([]float32, numItems*cfg.Dim)
	}
	return s
}

// Broadcast: round 0 is setup, rounds 1..T train, round T+1 final.
func (s *server) Broadcast(round int) (*protocol.Broadcast, error) {
	if round != s.round {
		return nil, fmt.Errorf("hdpmf: broadcast of round %d, expected %d", round, s.round)
	}
	T := s.cfg.Rounds
	s.b = protocol.Broadcast{Round: round, Dim: s.k, NumItems: s.numItems, Params: s.params}
	clear(s.params)
	switch {
	case round == 0:
		s.b.Phase = protocol.PhaseSetup
		if s.masked {
			s.b.Words, s.b.Bits = s.numItems, 32
		}
	case round <= T:
		if s.masked && !slices.ContainsFunc(s.counts, func(n int32) bool { return n > 0 }) {
			// A refused setup sum (CheckSum) is folded as no sum: without
			// counts the clients cannot size their noise shares and the
			// server cannot bound a training sum, and the setup cannot
			// run again (its noiseless indicator vectors summed over
			// another set of clients would tell the difference). The run
			// ends here; a restart from the snapshot ends here again.
			return nil, fmt.Errorf("hdpmf: no item was counted in the setup round (its sum was refused, or no client announced one): the masked run cannot train")
		}
		s.b.Phase = protocol.PhaseTrain
		s.b.V, s.b.Counts = s.v, s.counts
		if s.masked {
			s.b.Words, s.b.Bits = s.numItems*(s.k+1), 32
		}
		s.params["lr"] = s.cfg.rate(round - 1)
		s.params["lambda"] = s.cfg.Reg
		if round >= 2 {
			s.params["lr-user"] = s.cfg.userRate(round - 2)
		}
		if s.aux != nil {
			r := rng.New(s.cfg.Seed, streamServerMix, uint64(round))
			for d := range s.aux {
				s.aux[d] = float32(dp.SampleMixing(r))
			}
			s.b.Aux, s.b.AuxDim = s.aux, s.k
		}
	default:
		s.b.Phase = protocol.PhaseFinal
		s.b.V, s.b.Counts = s.table(), s.counts
		s.params["lr-user"] = s.cfg.userRate(T - 1)
	}
	return &s.b, nil
}

// Aggregate sums the uploads per item and steps V.
func (s *server) Aggregate(round int, ups []*protocol.Upload) error {
	defer func() { s.round++ }()
	k := s.k
	if s.masked && s.b.Phase != protocol.PhaseFinal {
		if err := s.aggregateMasked(round, ups); err != nil {
			return err
		}
		if s.b.Phase == protocol.PhaseSetup {
			return nil
		}
		s.account()
		s.step(round)
		return nil
	}
	switch s.b.Phase {
	case protocol.PhaseSetup:
		for _, u := range ups {
			if u == nil {
				continue
			}
			if len(u.Counts) != len(u.Items) {
				return fmt.Errorf("%w: setup upload of client %d has no counts", protocol.ErrMessage, u.Client)
			}
			for n, j := range u.Items {
				s.counts[j] += u.Counts[n]
			}
		}
		return nil
	case protocol.PhaseFinal:
		return nil
	}
	clear(s.sum)
	clear(s.arrived)
	for _, u := range ups {
		if u == nil {
			continue
		}
		if len(u.Values) != len(u.Items)*k {
			return fmt.Errorf("%w: upload of client %d round %d has %d values for %d items", protocol.ErrMessage, u.Client, round, len(u.Values), len(u.Items))
		}
		for n, j := range u.Items {
			s.arrived[j]++
			dst := s.sum[int(j)*k : int(j)*k+k]
			src := u.Values[n*k : n*k+k]
			for d := range dst {
				dst[d] += src[d]
			}
		}
	}
	s.step(round)
	return nil
}

// step moves every item that received an upload along its summed
// gradient.
func (s *server) step(round int) {
	k := s.k
	lr := s.cfg.rate(round - 1)
	reg2 := float32(2 * s.cfg.Reg)
	for j := range s.numItems {
		if s.arrived[j] == 0 {
			continue
		}
		step := float32(lr / (float64(s.counts[j]) + s.cfg.Pseudo))
		s.etaSq[j] += lr * lr
		v := s.v[j*k : j*k+k]
		g := s.sum[j*k : j*k+k]
		for d := range v {
			v[d] -= step * (g[d] + reg2*v[d])
		}
	}
}

// Done reports whether the final round has been aggregated.
func (s *server) Done() bool { return s.round > s.cfg.Rounds+1 }

// Round returns the next round the server will broadcast.
func (s *server) Round() int { return s.round }

// Factors returns the current V and the dimension; from the final round
// on, the published table (for HDPMF the posterior-mean unstretched
// factors, see shrink.go).
func (s *server) Factors() ([]float32, int) {
	if s.Done() {
		return s.table(), s.k
	}
	return s.v, s.k
}

// snapshotVersion is the version byte of the server's snapshot.
const snapshotVersion = 1

// snapshot is the state of a server between rounds: V, the public counts
// and the next round. The rest is rebuilt by Broadcast (the mixing
// variables are drawn per round from the seed) or is configuration.
type snapshot struct {
	Dim, NumItems, Round int
	V                    []float32
	Counts               []int32
	Spent                []float64 // the integer path's composed RDP curve, nil before a release
	EtaSq                []float64 // per item, Σ η_t² of the rounds that stepped it
}

// MarshalBinary returns the server's state: a version byte, then the gob
// encoding of a snapshot.
func (s *server) MarshalBinary() ([]byte, error) {
	return protocol.EncodeSnapshot(snapshotVersion, snapshot{Dim: s.k, NumItems: s.numItems, Round: s.round, V: s.v, Counts: s.counts, Spent: s.spent, EtaSq: s.etaSq})
}

// UnmarshalBinary restores a state from MarshalBinary into s, a server
// built with the same configuration; it fails, leaving s unchanged, on
// corrupt data or another shape.
func (s *server) UnmarshalBinary(data []byte) error {
	var x snapshot
	if err := protocol.DecodeSnapshot(data, snapshotVersion, &x); err != nil {
		return fmt.Errorf("hdpmf: server snapshot: %w", err)
	}
	switch {
	case x.Dim != s.k || x.NumItems != s.numItems:
		return fmt.Errorf("hdpmf: server snapshot of %d items × %d, the server has %d × %d", x.NumItems, x.Dim, s.numItems, s.k)
	case len(x.V) != len(s.v) || len(x.Counts) != len(s.counts):
		return fmt.Errorf("hdpmf: server snapshot: %d factors and %d counts, want %d and %d", len(x.V), len(x.Counts), len(s.v), len(s.counts))
	case x.Round < 0 || x.Round > s.cfg.Rounds+2:
		return fmt.Errorf("hdpmf: server snapshot at round %d, outside 0..%d", x.Round, s.cfg.Rounds+2)
	}
	if x.Spent != nil && len(x.Spent) != len(rdp.Orders) {
		return fmt.Errorf("hdpmf: server snapshot: an RDP curve of %d orders, want %d", len(x.Spent), len(rdp.Orders))
	}
	if x.EtaSq != nil && len(x.EtaSq) != len(s.etaSq) {
		return fmt.Errorf("hdpmf: server snapshot: %d step sums, want %d", len(x.EtaSq), len(s.etaSq))
	}
	copy(s.v, x.V)
	s.tab = nil
	clear(s.etaSq)
	copy(s.etaSq, x.EtaSq)
	copy(s.counts, x.Counts)
	s.round = x.Round
	s.spent = x.Spent
	return nil
}
