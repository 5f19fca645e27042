package hdpmf

import (
	"fmt"
	"slices"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

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
	// shares is the public claim PartialSharesEps computes a round's ε
	// from, on the plain-sum path; nil for Plain.
	shares *sharesClaim
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

// NewServer returns the server of cfg for the public catalog: it needs
// only public information (the config, the catalog's size, its scale's
// middle and the public item weights γ drawn from cfg.Spec), and draws
// its own randomness (the initial V, the mixing variables) from seed,
// which takes cfg.Seed's place (the clients' streams are cfg.Seed's: a
// run gives both the same).
func NewServer(cfg Config, catalog *ratings.Dataset, seed uint64) (protocol.Stateful, error) {
	cfg.Seed = seed
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	numItems, scale := catalog.NumItems(), catalog.Scale
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
	if cfg.Variant != Plain {
		s.shares = &sharesClaim{clip: cfg.UserClip, eps: cfg.Eps, dim: cfg.Dim, secure: cfg.Aggregation.Secure()}
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

// Rounds returns the number of rounds the server of cfg broadcasts: the
// setup round 0, the cfg.Rounds training rounds 1..T and the final round
// T+1 (Broadcast, Done). A client refuses a round numbered past it.
func Rounds(cfg Config) (int, error) {
	if cfg.Rounds < 1 {
		return 0, fmt.Errorf("%w: Rounds = %d must be ≥ 1", ErrConfig, cfg.Rounds)
	}
	return cfg.Rounds + 2, nil
}
