package audit

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// This file simulates SDMF (privrec/sdcf, SDCF Alg. 1-2) on the protocol
// with a transcript. sdcf.Train does not expose its transcript (it has no
// Config.Transcript), so the audit cannot observe the real clients; this
// is a re-implementation of sdcf's client round from the same privacy
// layer (dp.SolveTwoStageRR, dp.PRRSource, TwoStageRR.PRR,
// dp.TruncationBound) and the same update rules, labelled as such in the
// report. When sdcf passes a transcript writer to protocol.Run, the SDMF
// targets should observe sdcf.Train instead.

// sdmfMode selects what decides the items a client uploads for.
type sdmfMode int

const (
	sdmfPlain sdmfMode = iota // exactly the rated items (SGLD MF)
	sdmfPRR                   // SDMF: permanent B' (PRR), fresh send set from it each round (IRR)
	sdmfFresh                 // the naive control: fresh randomized response on the rated bits every round, same p*, q*
)

// sdmfConfig configures a simulated run.
type sdmfConfig struct {
	mode sdmfMode
	// dim is K; 0 runs the send sets only (uploads carry items, no
	// values), for long existence attacks whose outcome does not depend on
	// the values.
	dim, rounds            int
	lr0, gamma, temp, init float64
	lamShape, lamRate      float64
	epsI, epsP, epsG, z    float64
	restartEvery           int  // clients restart every so many rounds (0: never)
	forgetSecret           bool // a restarted client draws a new PRR secret (the naive control)
	seed                   uint64
	workers                int
}

// defaultSDMF returns sdcf's defaults (K = 50, η_0 = 0.5, γ = 0.6,
// Λ ~ Gamma(1, rate 100), ε_I = ε_g = 1, ε_P = 2ε_I, z = |R|/|U|).
func defaultSDMF() sdmfConfig {
	return sdmfConfig{mode: sdmfPRR, dim: 50, rounds: 100, lr0: 0.5, gamma: 0.6, temp: 1, init: 0.1,
		lamShape: 1, lamRate: 100, epsI: 1, epsG: 1}
}

func (c sdmfConfig) epsPOrDefault() float64 {
	if c.epsP == 0 {
		return 2 * c.epsI
	}
	return c.epsP
}

// sdmfSim is a built simulation: the public values and the clients.
type sdmfSim struct {
	cfg        sdmfConfig
	nItems     int
	lamU, lamV []float32
	v          []float32 // initial item factors
	clients    []*simClient
	byUser     map[int]*simClient
	skipped    int // users for whom no IRR probabilities exist (sdcf would refuse to train)
}

// simClient is one simulated device.
type simClient struct {
	id    int
	sim   *sdmfSim
	items []int32   // rated, sorted
	vals  []float32 // ratings centred at the user's mean
	mean  float32
	u     []float32
	rr    dp.TwoStageRR
	ones  []int32 // B' = 1 (PRR) or the rated items (fresh)
	epoch int     // restarts so far

	err   []float32
	ubar  []float64
	send  []int32
	pairs []simPair
	up    protocol.Upload
}

type simPair struct {
	item int32
	coef float32
}

func newSDMFSim(d *ratings.Dataset, cfg sdmfConfig) (*sdmfSim, error) {
	nI := d.NumItems()
	s := &sdmfSim{cfg: cfg, nItems: nI, byUser: map[int]*simClient{}}
	if cfg.dim > 0 {
		r := rng.New(cfg.seed, streamSim, 0)
		s.lamU, s.lamV = make([]float32, cfg.dim), make([]float32, cfg.dim)
		for k := range cfg.dim {
			s.lamU[k] = float32(dp.SampleGamma(r, cfg.lamShape, 1/cfg.lamRate))
			s.lamV[k] = float32(dp.SampleGamma(r, cfg.lamShape, 1/cfg.lamRate))
		}
		s.v = make([]float32, nI*cfg.dim)
		for k := range s.v {
			s.v[k] = float32(r.NormFloat64() * cfg.init)
		}
	}
	byUser := d.ByUser()
	users := 0
	for u := range d.NumUsers() {
		if byUser.RowLen(u) > 0 {
			users++
		}
	}
	z := cfg.z
	if z == 0 {
		z = float64(d.Len()) / float64(users)
	}
	for u := range d.NumUsers() {
		idx, val := byUser.Row(u)
		h := len(idx)
		if h == 0 {
			continue
		}
		c := &simClient{id: u, sim: s, items: make([]int32, h), vals: make([]float32, h)}
		ord := make([]int, h)
		for k := range ord {
			ord[k] = k
		}
		slices.SortFunc(ord, func(a, b int) int { return int(idx[a]) - int(idx[b]) })
		for _, v := range val {
			c.mean += v
		}
		c.mean /= float32(h)
		for k, o := range ord {
			c.items[k], c.vals[k] = idx[o], val[o]-c.mean
		}
		if cfg.dim > 0 {
			r := rng.New(cfg.seed, streamSim, 1, uint64(u))
			c.u = make([]float32, cfg.dim)
			for k := range c.u {
				c.u[k] = float32(r.NormFloat64() * cfg.init)
			}
			c.err, c.ubar = make([]float32, h), make([]float64, cfg.dim)
		}
		if cfg.mode != sdmfPlain {
			rr, err := dp.SolveTwoStageRR(cfg.epsPOrDefault(), cfg.epsI, h, nI, z)
			if err != nil {
				s.skipped++
				continue
			}
			c.rr = rr
			c.drawPRR()
		}
		s.clients = append(s.clients, c)
		s.byUser[u] = c
	}
	if len(s.clients) == 0 {
		return nil, fmt.Errorf("audit: no user of %d admits SDMF's randomized response at ε_I = %g, z = %g", users, cfg.epsI, z)
	}
	return s, nil
}

// drawPRR sets the client's permanent vector B' as sdcf does: from the
// user's secret through dp.PRRSource, a pure function of (secret, item,
// rated), so a restarted client that kept its secret rebuilds the same B'.
// The naive control (forgetSecret) redraws B' from fresh randomness after a
// restart, as a client that does not persist its PRR state would. In fresh
// mode, ones is the rated set itself.
func (c *simClient) drawPRR() {
	cfg := c.sim.cfg
	if cfg.mode == sdmfFresh {
		c.ones = c.items
		return
	}
	c.ones = c.ones[:0]
	if cfg.forgetSecret && c.epoch > 0 {
		r := rng.New(cfg.seed, streamSecret, uint64(c.id), uint64(c.epoch))
		f := c.rr.F
		for j := range int32(c.sim.nItems) {
			_, rated := slices.BinarySearch(c.items, j)
			u := r.Float64()
			if u < f/2 || (u >= f && rated) {
				c.ones = append(c.ones, j)
			}
		}
		return
	}
	var secret [32]byte
	sr := rng.New(cfg.seed, streamSecret, uint64(c.id))
	for k := range secret {
		secret[k] = byte(sr.Uint32())
	}
	src := dp.NewPRRSource(secret[:])
	for j := range int32(c.sim.nItems) {
		_, rated := slices.BinarySearch(c.items, j)
		if c.rr.PRR(src, j, rated) {
			c.ones = append(c.ones, j)
		}
	}
}

// sendProbs returns the probabilities with which an item of ones and any
// other item is sent in a round.
func (c *simClient) sendProbs() (q, p float64) {
	if c.sim.cfg.mode == sdmfFresh {
		ps, qs := c.rr.SendProbs()
		return qs, ps
	}
	return c.rr.Q, c.rr.P
}

func (c *simClient) ID() int { return c.id }

// Round is sdcf's client round (Alg. 1): errors against the broadcast V,
// the Langevin user step, the send set and the item gradients.
func (c *simClient) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	cfg := c.sim.cfg
	if cfg.restartEvery > 0 && b.Round > 0 && b.Round%cfg.restartEvery == 0 && cfg.mode == sdmfPRR {
		c.epoch = b.Round / cfg.restartEvery
		c.drawPRR() // the restarted app rebuilds B' from its (kept or new) secret
	}
	if cfg.mode != sdmfPlain {
		q, p := c.sendProbs()
		c.send = sendSet(r, c.send[:0], c.ones, c.sim.nItems, q, p)
	}
	if cfg.dim == 0 { // shape only
		items := c.send
		if cfg.mode == sdmfPlain {
			items = c.items
		}
		c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: items}
		return &c.up, nil
	}
	eta := b.Param("eta", 0)
	K, h, u := cfg.dim, len(c.items), c.u
	clear(c.ubar)
	for k, j := range c.items {
		v := b.Row(int(j))
		e := vec.Dot(u, v) - c.vals[k]
		c.err[k] = e
		for d := range K {
			c.ubar[d] += float64(e * v[d])
		}
	}
	sdU := math.Sqrt(cfg.temp * eta / float64(h))
	for d := range K {
		c.ubar[d] = eta*(c.ubar[d]/float64(h)+float64(c.sim.lamU[d]*u[d])) - sdU*r.NormFloat64()
	}
	c.pairs = c.pairs[:0]
	if cfg.mode == sdmfPlain {
		for k, j := range c.items {
			c.pairs = append(c.pairs, simPair{j, c.err[k]})
		}
	} else {
		mu, sigma := meanStd(c.err)
		sigma = math.Max(sigma, 1e-3)
		alpha := math.Inf(1)
		if cfg.epsG > 0 {
			a, err := dp.TruncationBound(cfg.epsG, mu, sigma)
			if err != nil {
				return nil, err
			}
			alpha = a
		}
		for _, j := range c.send {
			coef := float32(truncNormal(r, mu, sigma, alpha))
			if k, ok := slices.BinarySearch(c.items, j); ok {
				coef = c.err[k]
			}
			c.pairs = append(c.pairs, simPair{j, coef})
		}
	}
	sd := math.Sqrt(cfg.temp * eta)
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.up.Items[:0], Values: c.up.Values[:0]}
	for _, pr := range c.pairs { // items are distinct and sorted
		v := b.Row(int(pr.item))
		c.up.Items = append(c.up.Items, pr.item)
		for d := range K {
			g := eta*float64(pr.coef*u[d]+c.sim.lamV[d]*v[d]) - sd*r.NormFloat64()
			c.up.Values = append(c.up.Values, float32(g))
		}
	}
	for d := range K {
		u[d] -= float32(c.ubar[d])
	}
	return &c.up, nil
}

// sendSet appends to dst, sorted, each item of ones with probability q and
// each other item of [0, n) with probability p, by geometric skips.
func sendSet(r *rand.Rand, dst, ones []int32, n int, q, p float64) []int32 {
	for pos := skip(r, q, -1); pos < len(ones); pos = skip(r, q, pos) {
		dst = append(dst, ones[pos])
	}
	ptr := 0
	for pos := skip(r, p, -1); pos < n-len(ones); pos = skip(r, p, pos) {
		for ptr < len(ones) && int(ones[ptr]) <= pos+ptr {
			ptr++
		}
		dst = append(dst, int32(pos+ptr))
	}
	slices.Sort(dst)
	return dst
}

// skip returns the next index after pos chosen by Bernoulli(p) trials.
func skip(r *rand.Rand, p float64, pos int) int {
	switch {
	case p >= 1:
		return pos + 1
	case p <= 0:
		return math.MaxInt
	}
	g := math.Floor(math.Log(1-r.Float64()) / math.Log1p(-p))
	if g > float64(math.MaxInt32) {
		return math.MaxInt
	}
	return pos + 1 + int(g)
}

// truncNormal draws from N(mu, sigma²) restricted to [−alpha, alpha].
func truncNormal(r *rand.Rand, mu, sigma, alpha float64) float64 {
	if math.IsInf(alpha, 1) {
		return mu + sigma*r.NormFloat64()
	}
	lo := 0.5 * math.Erfc(-(-alpha-mu)/(sigma*math.Sqrt2))
	hi := 0.5 * math.Erfc(-(alpha-mu)/(sigma*math.Sqrt2))
	x := mu + sigma*math.Sqrt2*math.Erfinv(2*(lo+(hi-lo)*r.Float64())-1)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		x = mu
	}
	return math.Max(-alpha, math.Min(alpha, x))
}

func meanStd(x []float32) (mu, sd float64) {
	for _, v := range x {
		mu += float64(v)
	}
	mu /= float64(len(x))
	for _, v := range x {
		d := float64(v) - mu
		sd += d * d
	}
	return mu, math.Sqrt(sd / float64(len(x)))
}

// simServer is sdcf's server (Alg. 2): each v_j moves by the mean of the
// gradients received for it.
type simServer struct {
	cfg   sdmfConfig
	n     int
	v, bv []float32
	sum   []float64
	cnt   []int32
	round int
	b     protocol.Broadcast
}

func (s *simServer) Broadcast(round int) (*protocol.Broadcast, error) {
	s.b = protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, Dim: s.cfg.dim, NumItems: s.n,
		Params: map[string]float64{"eta": s.cfg.lr0 / math.Pow(float64(round+1), s.cfg.gamma)}}
	if s.cfg.dim > 0 {
		copy(s.bv, s.v)
		s.b.V = s.bv
	}
	return &s.b, nil
}

func (s *simServer) Aggregate(round int, ups []*protocol.Upload) error {
	s.round = round + 1
	K := s.cfg.dim
	if K == 0 {
		return nil
	}
	for _, up := range ups {
		if up == nil {
			continue
		}
		for k, j := range up.Items {
			s.cnt[j]++
			row, g := s.sum[int(j)*K:(int(j)+1)*K], up.Values[k*K:(k+1)*K]
			for d := range K {
				row[d] += float64(g[d])
			}
		}
	}
	for j, n := range s.cnt {
		if n == 0 {
			continue
		}
		row, sum := s.v[j*K:(j+1)*K], s.sum[j*K:(j+1)*K]
		for d := range K {
			row[d] -= float32(sum[d] / float64(n))
			sum[d] = 0
		}
		s.cnt[j] = 0
	}
	return nil
}

func (s *simServer) Done() bool { return s.round >= s.cfg.rounds }

// run runs the simulation and writes its transcript to w.
func (s *sdmfSim) run(ctx context.Context, w io.Writer) error {
	cfg := s.cfg
	srv := &simServer{cfg: cfg, n: s.nItems, v: slices.Clone(s.v), bv: make([]float32, len(s.v)),
		sum: make([]float64, len(s.v)), cnt: make([]int32, s.nItems)}
	pcs := make([]protocol.Client, len(s.clients))
	for k, c := range s.clients {
		pcs[k] = c
	}
	mode := map[sdmfMode]string{sdmfPlain: "sgld-mf", sdmfPRR: "sdmf", sdmfFresh: "fresh-rr"}[cfg.mode]
	return protocol.Run(ctx, srv, pcs, protocol.RunOptions{
		Workers: cfg.workers, Seed: cfg.seed, Transcript: w,
		Header: protocol.TranscriptHeader{Method: mode + " (audit simulation)", Meta: map[string]string{
			"dim": strconv.Itoa(cfg.dim), "rounds": strconv.Itoa(cfg.rounds),
			"eps_i": fmt.Sprint(cfg.epsI), "eps_p": fmt.Sprint(cfg.epsPOrDefault()), "eps_g": fmt.Sprint(cfg.epsG),
			"restart_every": strconv.Itoa(cfg.restartEvery),
		}},
	})
}
