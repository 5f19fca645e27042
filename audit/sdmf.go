package audit

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/fm"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/sdcf"
)

// This file holds what the SDMF targets share: observing sdcf.Train
// through its transcript (sdcf.Config.Transcript), reading the public
// parameters from the transcript header, the attacker's model of each
// user's randomized response, and the send-set simulation of the average
// attack's naive controls (fresh per-round RR, a PRR redrawn at every
// restart), which are not sdcf and so cannot be observed in it.

// sdcfRun returns a producer for observe: sdcf.Train on d with cfg,
// writing its transcript (what the server receives) to the writer.
func sdcfRun(ctx context.Context, d *ratings.Dataset, cfg sdcf.Config) func(w io.Writer) error {
	return func(w io.Writer) error {
		c := cfg
		c.Transcript = w
		_, _, err := sdcf.Train(ctx, d, c, nil)
		return err
	}
}

// sdfmTarget is SD-FM's row name: sdcf's clients under package fm's
// server over an FM with item features (fm.TrainSD).
const sdfmTarget = fm.MethodName

// sdcfProducer returns the producer of target's run on d with cfg:
// fm.TrainSD with item features for sd-fm (on d's item attributes, or
// synthetic ones when d has none: they are public, and the existence
// attacks do not read them), sdcf.Train otherwise.
func sdcfProducer(ctx context.Context, target string, d *ratings.Dataset, cfg sdcf.Config) func(w io.Writer) error {
	if target != sdfmTarget {
		return sdcfRun(ctx, d, cfg)
	}
	return func(w io.Writer) error {
		def := fm.DefaultSDConfig()
		c := fm.SDConfig{Config: cfg, Features: fm.Items, YearBucket: def.YearBucket, AttrStep: def.AttrStep}
		c.Transcript = w
		_, _, err := fm.TrainSD(ctx, withItemSide(d), c, nil)
		return err
	}
}

// runName names target's run in a Setting.
func runName(target string) string {
	if target == sdfmTarget {
		return "fm.TrainSD (SD-FM: sdcf's clients, item features)"
	}
	return "sdcf.Train"
}

// withItemSide returns d, or a copy of it with synthetic item attributes
// (two of six genres and a decade per item, from the item index) when d
// has no side files.
func withItemSide(d *ratings.Dataset) *ratings.Dataset {
	if d.Side != nil {
		return d
	}
	s := &ratings.Side{Genres: []string{"a", "b", "c", "d", "e", "f"}, Items: map[string]ratings.ItemSide{}}
	for j, id := range d.ItemIDs {
		s.Items[id] = ratings.ItemSide{Genres: []int16{int16(j % 6), int16((j/6 + j%6 + 1) % 6)}, Year: 1950 + (j*7)%60}
	}
	c := *d
	c.Side = ratings.StaticSide(s)
	return &c
}

// sdmfShapeConfig returns SDMF's defaults for an attack on the send sets
// only: K = 2 (the smallest with the item-offset coordinate), since which
// items a client sends does not depend on the values, and the uploads stay
// small over hundreds of rounds.
func sdmfShapeConfig(e *env, rounds int) sdcf.Config {
	cfg := sdcfConfig(true)
	cfg.Dim, cfg.Rounds, cfg.Seed, cfg.Workers = 2, rounds, e.cfg.Seed, e.cfg.Workers
	return cfg
}

// metaFloat reads a number from a transcript header's Meta.
func metaFloat(h protocol.TranscriptHeader, key string) (float64, error) {
	x, err := strconv.ParseFloat(h.Meta[key], 64)
	if err != nil {
		return 0, fmt.Errorf("transcript header of %q: %q: %w", h.Method, key, err)
	}
	return x, nil
}

// metaList reads a comma-separated list of numbers from a transcript
// header's Meta.
func metaList(h protocol.TranscriptHeader, key string) ([]float32, error) {
	var out []float32
	for _, f := range strings.Split(h.Meta[key], ",") {
		x, err := strconv.ParseFloat(f, 32)
		if err != nil {
			return nil, fmt.Errorf("transcript header of %q: %q: %w", h.Method, key, err)
		}
		out = append(out, float32(x))
	}
	return out, nil
}

// sdcfPublic is what an sdcf transcript header makes public that the
// attacks need: the prior precisions and whether u[0] is the fixed item
// offset.
type sdcfPublic struct {
	lamU, lamV []float32
	itemBias   bool
}

// readSDCFPublic reads sdcfPublic from an sdcf transcript header.
func readSDCFPublic(h protocol.TranscriptHeader) (sdcfPublic, error) {
	var p sdcfPublic
	var err error
	if p.lamU, err = metaList(h, "lambda_u"); err != nil {
		return p, err
	}
	if p.lamV, err = metaList(h, "lambda_v"); err != nil {
		return p, err
	}
	p.itemBias = h.Meta["item_bias"] == "true"
	return p, nil
}

// sdmfRR returns every user's two-stage randomized-response parameters as
// the clients of the transcript's run computed them: dp.SolveTwoStageRR
// from ε_P, ε_I and z, public in the header, and the user's number of
// ratings h, which only its device knows: the audit gives it to the
// attacker, which only helps it.
func sdmfRR(d *ratings.Dataset, h protocol.TranscriptHeader) (map[int]dp.TwoStageRR, error) {
	var p [3]float64
	for k, key := range []string{"eps_p", "eps_i", "z"} {
		x, err := metaFloat(h, key)
		if err != nil {
			return nil, err
		}
		p[k] = x
	}
	return twoStageRR(d, p[0], p[1], p[2])
}

// sdmfExistence returns the attacker's existence model of the SDMF run
// whose transcript header is h (see sdmfRR), with client epochs of
// epochLen rounds (0: one).
func sdmfExistence(d *ratings.Dataset, h protocol.TranscriptHeader, seed uint64, epochLen int) (*existence, error) {
	rr, err := sdmfRR(d, h)
	if err != nil {
		return nil, err
	}
	return newExistence(d, seed, epochLen, func(u int) (existenceModel, bool) {
		p, ok := rr[u]
		return prrModel(p), ok
	}), nil
}

// prrModel is the attacker's model of a client that sends from a
// permanent B' with p's parameters.
func prrModel(p dp.TwoStageRR) existenceModel { return existenceModel{f: p.F, p: p.P, q: p.Q} }

// twoStageRR returns every rating user's two-stage randomized-response
// parameters at ε_P, ε_I and z (dp.SolveTwoStageRR with the user's h).
func twoStageRR(d *ratings.Dataset, epsP, epsI, z float64) (map[int]dp.TwoStageRR, error) {
	byUser := d.ByUser()
	out := map[int]dp.TwoStageRR{}
	for u := range d.NumUsers() {
		n := byUser.RowLen(u)
		if n == 0 {
			continue
		}
		rr, err := dp.SolveTwoStageRR(epsP, epsI, n, d.NumItems(), z)
		if err != nil {
			return nil, fmt.Errorf("user %d (%d ratings): %w", u, n, err)
		}
		out[u] = rr
	}
	return out, nil
}

// ratingsPerUser returns z = |R|/|U| over the users with ratings, as sdcf
// sets it by default.
func ratingsPerUser(d *ratings.Dataset) float64 {
	byUser := d.ByUser()
	users := 0
	for u := range d.NumUsers() {
		if byUser.RowLen(u) > 0 {
			users++
		}
	}
	return float64(d.Len()) / float64(max(users, 1))
}

// deviceMeans returns each user's mean rating as its device computes it
// (in float32; 0 for a user without ratings): sdcf centres ratings on it,
// and the audit gives it to the attacker.
func deviceMeans(d *ratings.Dataset) []float64 {
	byUser := d.ByUser()
	means := make([]float64, d.NumUsers())
	for u := range means {
		_, vals := byUser.Row(u)
		var m float32
		for _, v := range vals {
			m += v
		}
		means[u] = float64(m / float32(max(len(vals), 1)))
	}
	return means
}

// rrMode selects the naive send-set mechanism a control simulates.
type rrMode int

const (
	// rrFresh is SDMF without its permanent stage: each round, fresh
	// randomized response on the rated bits with SDMF's per-round p*, q*.
	rrFresh rrMode = iota
	// rrRedrawn is a client that does not persist its PRR state: it
	// redraws B' from fresh randomness at every restart.
	rrRedrawn
)

// sendSim simulates the send sets of a naive control at SDMF's parameters
// (dp.SolveTwoStageRR with sdcf's ε_P, ε_I and z = |R|/|U|). Uploads name
// items and carry no values: the average attack reads only which items
// are sent.
type sendSim struct {
	mode         rrMode
	rounds       int
	restartEvery int // rrRedrawn: rounds between restarts
	epsI, epsP   float64
	seed         uint64
	workers      int
	nItems       int
	clients      []*simClient
	byUser       map[int]*simClient
}

// simClient is one simulated device of a control.
type simClient struct {
	id    int
	sim   *sendSim
	items []int32 // rated, sorted
	rr    dp.TwoStageRR
	ones  []int32 // B' (rrRedrawn) or the rated items (rrFresh)
	epoch int     // restarts so far
	send  []int32
	up    protocol.Upload
}

func newSendSim(d *ratings.Dataset, mode rrMode, rounds, restartEvery int, epsI, epsP float64, seed uint64, workers int) (*sendSim, error) {
	nI := d.NumItems()
	s := &sendSim{mode: mode, rounds: rounds, restartEvery: restartEvery, epsI: epsI, epsP: epsP, seed: seed, workers: workers,
		nItems: nI, byUser: map[int]*simClient{}}
	rrs, err := twoStageRR(d, epsP, epsI, ratingsPerUser(d))
	if err != nil {
		return nil, err
	}
	byUser := d.ByUser()
	for u := range d.NumUsers() {
		idx, _ := byUser.Row(u)
		if len(idx) == 0 {
			continue
		}
		c := &simClient{id: u, sim: s, items: slices.Sorted(slices.Values(idx)), rr: rrs[u]}
		c.drawB()
		s.clients = append(s.clients, c)
		s.byUser[u] = c
	}
	if len(s.clients) == 0 {
		return nil, fmt.Errorf("%w: the data set has no ratings", ErrUsage)
	}
	return s, nil
}

// drawB sets ones: the rated items (fresh RR), or a B' drawn by eq. (9)
// from fresh randomness for the client's current epoch (a client that
// forgets its PRR state at a restart).
func (c *simClient) drawB() {
	if c.sim.mode == rrFresh {
		c.ones = c.items
		return
	}
	c.ones = c.ones[:0]
	r := rng.New(c.sim.seed, streamSecret, uint64(c.id), uint64(c.epoch))
	f := c.rr.F
	for j := range int32(c.sim.nItems) {
		_, rated := slices.BinarySearch(c.items, j)
		if u := r.Float64(); u < f/2 || (u >= f && rated) {
			c.ones = append(c.ones, j)
		}
	}
}

// model returns the attacker's model of the client's send decisions.
func (c *simClient) model() existenceModel {
	if c.sim.mode == rrFresh {
		ps, qs := c.rr.SendProbs()
		return existenceModel{p: ps, q: qs}
	}
	return prrModel(c.rr)
}

func (c *simClient) ID() int { return c.id }

// Round sends each item of ones with probability q and any other with
// probability p (per-round q*, p* in fresh mode), redrawing B' first at a
// restart.
func (c *simClient) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	s := c.sim
	q, p := c.rr.Q, c.rr.P
	if s.mode == rrFresh {
		p, q = c.rr.SendProbs()
	} else if s.restartEvery > 0 && b.Round > 0 && b.Round%s.restartEvery == 0 {
		c.epoch = b.Round / s.restartEvery
		c.drawB()
	}
	c.send = dp.SampleSendSet(r, c.send[:0], c.ones, s.nItems, q, p)
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Items: c.send}
	return &c.up, nil
}

// simServer only counts rounds: the controls' uploads carry no values.
type simServer struct {
	n, rounds, round int
}

func (s *simServer) Broadcast(round int) (*protocol.Broadcast, error) {
	return &protocol.Broadcast{Round: round, Phase: protocol.PhaseTrain, NumItems: s.n}, nil
}

func (s *simServer) Aggregate(round int, _ []*protocol.Upload) error {
	s.round = round + 1
	return nil
}

func (s *simServer) Done() bool { return s.round >= s.rounds }

// run runs the simulation and writes its transcript to w.
func (s *sendSim) run(ctx context.Context, w io.Writer) error {
	pcs := make([]protocol.Client, len(s.clients))
	for k, c := range s.clients {
		pcs[k] = c
	}
	mode := map[rrMode]string{rrFresh: "fresh-rr", rrRedrawn: "prr-redrawn"}[s.mode]
	return protocol.Run(ctx, &simServer{n: s.nItems, rounds: s.rounds}, pcs, protocol.RunOptions{
		Workers: s.workers, Seed: s.seed, Transcript: w,
		Header: protocol.TranscriptHeader{Method: mode + " (audit simulation)", Meta: map[string]string{
			"rounds": strconv.Itoa(s.rounds), "eps_i": fmt.Sprint(s.epsI), "eps_p": fmt.Sprint(s.epsP),
			"restart_every": strconv.Itoa(s.restartEvery),
		}},
	})
}
