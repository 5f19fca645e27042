package ldpop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

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

// NewServer returns the server of cfg for the public catalog (its size
// and rating scale are read: V⁰'s first coordinate starts at
// scale.Max/B). It draws its own randomness (V⁰, the positions, H) from
// seed, which takes cfg.Seed's place (a run gives the clients the same),
// and learns the number of clients, over which it averages, from their
// announcements in the setup round.
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

// Rounds returns the number of rounds the server of cfg broadcasts: the
// setup round 0, the cfg.Rounds training rounds, and with Refit > 0 a
// fit round before every training round t > 0 with t a multiple of Refit
// (Broadcast, Done). A client refuses a round numbered past it.
func Rounds(cfg Config) (int, error) {
	if cfg.Rounds < 1 || cfg.Refit < 0 {
		return 0, fmt.Errorf("ldpop: Rounds = %d, Refit = %d: want Rounds >= 1 and Refit >= 0", cfg.Rounds, cfg.Refit)
	}
	n := 1 + cfg.Rounds
	if cfg.Refit > 0 {
		n += (cfg.Rounds - 1) / cfg.Refit
	}
	return n, nil
}
