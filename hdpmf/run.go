package hdpmf

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/accountant"
	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/budget"
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
