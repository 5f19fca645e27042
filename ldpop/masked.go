package ldpop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
)

// The integer path (Config.Aggregation = protocol.AggMasked): secure
// aggregation for real sums integers mod 2^32, so a round's upload is a
// dense integer vector over the round's named positions (every user
// uploads every position, rated or not, as on the float path), and the
// noise is the distributed Skellam mechanism (Agarwal, Kairouz and Liu,
// NeurIPS 2021) instead of Laplace shares: each of the n clients adds
// Skellam(μ/n) to every position, so the sum carries Skellam(μ) exactly.
//
// What a client quantizes is the data-dependent part of its gradient
// element, g = −2·y_ij·e_ij·u_il with e clipped to [−Δ, Δ]: |g| ≤ 2ΔB.
// The public term λ·v_jl that C2 has every user add is added by the
// server, n times (the announced clients), which leaves the sum as it
// was. g is clipped to [−2ΔB, 2ΔB] (a guard: it already lies there),
// scaled by maskScale units per float unit and rounded stochastically
// (unbiased); the server divides the unmasked sum by maskScale and then
// applies C2's unbiasing scale R/k to gradient and noise together, as
// the float path does.
//
// Sensitivity, in integer units, with a = 2ΔB·maskScale: a rating (i, j)
// changes user i's value at position (j, l) by at most 2Δ|u_il|·maskScale
// plus 2 for the rounding. Over the releases of row j — c_l times
// position (j, l) within a refit segment, u_i fixed — the L2 sensitivity
// is at most a·√(max_l c_l) + 2·√(Σ_l c_l) (Minkowski, ‖u_i‖ ≤ B) and the
// L1 sensitivity a·‖c‖₂ + 2·Σ_l c_l (Cauchy–Schwarz); segments add their
// squared L2 and their L1. One position: a + 2 in both; a whole pass over
// the row: L2 = a + 2√d, L1 = a√d + 2d. Rényi DP composes the releases of
// a row additively in the squared L2 term and subadditively in the L1
// term, so the row's total is bounded by one Skellam release with the
// summed sensitivities (rdp.SkellamEpsilon), and the run's ε is the
// largest over rows: the L2 geometry makes a whole pass over a row cost
// what the Laplace path's per-coordinate noise spends on √d positions.
//
// Calibration: μ is the least Poisson mean for which the run's passes
// over V — each a full-row release of every row — compose to ε·√d per
// pass at δ (Config.Delta): the total the Laplace path reports for a
// full pass, so the two compare at equal total ε. It is public: every
// party computes it from the configuration and the rating range.
const (
	maskScale = 64 // integer units per float unit
	maskBits  = 32 // the modulus exponent of the sums
)

// masking is the integer path's public setup.
type masking struct {
	clip  float64 // 2ΔB, the bound of a value, float units
	a     float64 // 2ΔB·maskScale: the user vector's part of a row's sensitivity
	mu    float64 // Poisson mean of a position's summed Skellam noise (0: RSMF)
	delta float64
	// tables holds the Skellam(μ/n) samplers of the share counts in use.
	tables dp.SkellamTables
}

// DefaultDelta is δ of the integer path's (ε, δ) guarantee when
// Config.Delta is 0.
const DefaultDelta = 1e-6

// newMasking calibrates the integer path of cfg for a catalog of m items
// and ratings of range rng (Δ).
func newMasking(cfg Config, m int, rng float64) (*masking, error) {
	delta := cfg.Delta
	if delta == 0 {
		delta = DefaultDelta
	}
	clip := 2 * rng * cfg.Bound
	mk := &masking{clip: clip, a: clip * maskScale, delta: delta}
	if cfg.Variant == RSMF {
		return mk, nil
	}
	k := float64(cfg.Dim)
	l2 := mk.a + 2*math.Sqrt(k)
	l1 := math.Min(mk.a*math.Sqrt(k)+2*k, l2*l2)
	passes := cfg.passes(m)
	mu, err := rdp.SkellamMuFor(cfg.Eps*math.Sqrt(k)*float64(passes), delta, passes, l1, l2)
	if err != nil {
		return nil, fmt.Errorf("%w: Skellam calibration: %w", ErrConfig, err)
	}
	mk.mu = mu
	return mk, nil
}

// passes returns the passes over the m·d positions of V that c's rounds
// begin (at least one: a run too short to finish a pass is calibrated as
// if it did).
func (c Config) passes(m int) int {
	md := m * c.Dim
	perPass := (md + c.PerRound - 1) / c.PerRound // rounds; the last takes what is left
	return (c.Rounds + perPass - 1) / perPass
}

// checkBits fails unless sums over n clients fit the modulus.
func (m *masking) checkBits(n int) error {
	if n < 1 {
		return nil
	}
	b, err := dp.ModulusBits(n, m.clip, maskScale, m.mu, 1e-12)
	if err != nil {
		return fmt.Errorf("%w: %d clients: %w", ErrConfig, n, err)
	}
	if b > maskBits {
		return fmt.Errorf("%w: sums over %d clients need %d bits, above %d", ErrConfig, n, b, maskBits)
	}
	return nil
}

// rowEps returns the ε at δ of the releases of one row whose accounting
// totals are t, for a user-vector part a of the sensitivity.
func (m *masking) rowEps(t rowTotals, a float64) float64 { return m.rowEpsAt(m.mu, t, a) }

// rowEpsAt is rowEps with Skellam(mu) noise.
func (m *masking) rowEpsAt(mu float64, t rowTotals, a float64) float64 {
	l2sq := t.l2sq(a)
	if l2sq == 0 || mu == 0 {
		return 0
	}
	return rdp.SkellamEpsilon(mu, 1, math.Min(t.l1(a), l2sq), math.Sqrt(l2sq), m.delta)
}

// run returns the totals of r positions of one row released once.
func runTotals(r int) rowTotals {
	x := float64(r)
	return rowTotals{a: 1, x: math.Sqrt(x), c: x, n: math.Sqrt(x)}
}

// rowTotals sums a row's releases over the refit segments: Σ max_l c_l,
// Σ √(max_l c_l · Σ_l c_l), Σ Σ_l c_l and Σ ‖c‖₂.
type rowTotals struct{ a, x, c, n float64 }

func (t rowTotals) l2sq(a float64) float64 { return a*a*t.a + 4*a*t.x + 4*t.c }
func (t rowTotals) l1(a float64) float64   { return a*t.n + 2*t.c }

func (t *rowTotals) add(o rowTotals) { t.a += o.a; t.x += o.x; t.c += o.c; t.n += o.n }

// shareBase returns the number of clients a noise share is drawn for
// ⌊ρ·shareBase⌋ of: the roster of a roster calibration
// (protocol.ParamRoster, which a deployment's clients check against the
// roster they pin), else n, the clients counted at setup.
func shareBase(b *protocol.Broadcast, n int) int {
	if r := protocol.Roster(b); r > 0 {
		return r
	}
	return n
}

// maskedSetup announces the client: one word, 1.
func (c *client) maskedSetup(b *protocol.Broadcast) (*protocol.Upload, error) {
	if b.Words != 1 {
		return nil, fmt.Errorf("%w: masked setup round asks for %d words, want 1", protocol.ErrMessage, b.Words)
	}
	c.words = append(c.words[:0], 1)
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Words: c.words}
	return &c.up, nil
}

// maskedSampled builds the client's words for the named positions, in
// position order: its quantized gradient element plus a Skellam share;
// then one arrival word, 1, so that the sum counts the clients whose
// noise shares arrived. It writes the words mod 2^32 directly (maskBits
// is 32), so a client holds one word per position and nothing else: on
// ML-1M a pass is 37,061 words.
func (c *client) maskedSampled(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	sh := c.sh
	k := sh.k
	rows := b.Items
	if rows == nil || b.AuxDim != k || len(b.Aux) != len(rows)*k {
		return nil, fmt.Errorf("%w: masked round without positions (AuxDim %d, want %d)", protocol.ErrMessage, b.AuxDim, k)
	}
	var tab *dp.SkellamTable
	var share float64 // Skellam mean of this client's share, 0: no noise
	if sh.mask.mu > 0 {
		share = sh.mask.mu / float64(protocol.NoiseShares(b, int(b.Param(paramClients, float64(sh.n)))))
		tab = sh.mask.tables.Get(share)
	}
	c.words = slices.Grow(c.words[:0], b.Words)
	clip := sh.mask.clip
	for q, j := range rows {
		var e float32
		if n, ok := slices.BinarySearch(c.items, j); ok {
			e = 2 * c.residual(c.y[n], b.Row(q))
		}
		for l, on := range b.Aux[q*k : (q+1)*k] {
			if on == 0 {
				continue
			}
			g := -float64(e) * float64(c.u[l])
			if g > clip { // comparisons: math.Max and Min cost a fifth of this loop
				g = clip
			} else if g < -clip {
				g = -clip
			}
			x := dp.StochasticRound(r, g*maskScale)
			switch {
			case tab != nil:
				x += tab.Sample(r)
			case share > 0:
				x += dp.SampleSkellam(r, share)
			}
			c.words = append(c.words, uint32(x)) // mod 2^32, two's complement
		}
	}
	if len(c.words)+1 != b.Words {
		return nil, fmt.Errorf("%w: masked round names %d positions, asks for %d words", protocol.ErrMessage, len(c.words), b.Words)
	}
	c.words = append(c.words, 1)
	c.up = protocol.Upload{Client: c.id, Round: b.Round, Words: c.words}
	return &c.up, nil
}

// aggregateMasked decodes the unmasked sum of a training round into the
// float sums of the named positions (in position order), adding the
// public term n·λ·v_p the clients left out, and counts the arrivals. It
// reports whether there was a sum (none when CheckSum refused it).
func (s *server) aggregateMasked(round int, ups []*protocol.Upload) (folded bool, err error) {
	s.acc = append(s.acc[:0], make([]float64, len(s.sel))...)
	s.arrived = 0
	q := dp.Quantizer{Clip: 1, Scale: maskScale, Bits: maskBits}
	ints := make([]int64, len(s.sel)+1)
	for _, u := range ups {
		if u == nil {
			continue
		}
		if len(u.Words) != len(s.sel)+1 || u.Items != nil {
			return false, fmt.Errorf("%w: masked sum of round %d has %d words, want %d", protocol.ErrMessage, round, len(u.Words), len(s.sel)+1)
		}
		folded = true
		q.Unwrap(u.Words, ints)
		for x, v := range ints[:len(s.sel)] {
			s.acc[x] += float64(v) / maskScale
		}
		s.arrived += int(u.Words[len(s.sel)])
	}
	lam := s.cfg.Reg * float64(s.n)
	for x, p := range s.sel {
		s.acc[x] += lam * float64(s.v[p])
	}
	return folded, nil
}

// CheckSum implements protocol.SumChecker on the integer path: it checks
// the unmasked sum of the round the server last broadcast, of inputs
// clients' masked vectors, against what honest clients can produce, and
// returns an error wrapping protocol.ErrOutOfBounds at the first word out
// of bounds. It changes nothing.
//
// Setup round: the one word counts the clients, each adding 1, so it is
// at most inputs.
//
// Training round: the last word counts the arrivals a, one per honest
// client in the sum: a ≤ inputs and a ≤ n, the clients counted at setup
// (the only ones that may train; a deployment must keep the others out).
// Each of the a clients adds to every named position its quantized
// gradient element, |q| ≤ C = ⌈2ΔB·scale⌉ (clamped to ±2ΔB before
// scaling, so stochastic rounding stays inside C), plus a Skellam share
// drawn for s = max(1, ⌊ρ·n⌋) clients, Skellam(μ/s), ρ the broadcast's
// ParamMinShare (1 when absent). The a shares sum to S ~ Skellam(m), m =
// a·μ/s, so every honest position has
//
//	|x| ≤ a·C + t − 1,
//
// t the least integer with 2·exp(2m(√(1+z²) − 1) − t·asinh z) ≤ p, z =
// t/(2m): the Chernoff bound on P(|S| ≥ t) from E[e^{λS}] = exp(2m(cosh λ
// − 1)) at λ = asinh z (dp.SkellamTail), at p = protocol.SumTail over the
// round's positions, so that by a union bound an honest round is refused
// with probability at most 2^−40. RSMF draws no noise: t − 1 = 0.
//
// ρ is read from the round's broadcast: a deployment that sets
// ParamMinShare only in the copy it sends the clients must set it in the
// server's broadcast too, or honest sums of rounds with ρ < 1 may be
// refused.
func (s *server) CheckSum(round int, sum *protocol.Upload, inputs int) error {
	if s.mk == nil || s.b.Words <= 0 {
		return nil
	}
	if round != s.b.Round {
		return fmt.Errorf("%w: check of round %d, the server broadcast round %d", protocol.ErrMessage, round, s.b.Round)
	}
	w := sum.Words
	switch s.kind {
	case kindSetup:
		if len(w) != 1 {
			return fmt.Errorf("%w: masked setup sum has %d words, want 1", protocol.ErrMessage, len(w))
		}
		if int64(w[0]) > int64(inputs) {
			return fmt.Errorf("%w: round %d (setup) word 0: %d clients announced, above the %d inputs", protocol.ErrOutOfBounds, round, w[0], inputs)
		}
		return nil
	case kindTrain:
	default:
		return nil
	}
	if len(w) != len(s.sel)+1 || sum.Items != nil {
		return fmt.Errorf("%w: masked sum of round %d has %d words, want %d", protocol.ErrMessage, round, len(w), len(s.sel)+1)
	}
	a, n := int64(w[len(s.sel)]), int64(s.n)
	if a > int64(inputs) || a > n {
		return fmt.Errorf("%w: round %d word %d: arrivals %d above min(%d inputs, %d announced)", protocol.ErrOutOfBounds, round, len(s.sel), a, inputs, n)
	}
	shares := int64(protocol.NoiseShares(&s.b, s.n))
	per := int64(math.Ceil(s.mk.a))
	t := dp.SkellamTailBound(float64(a)*s.mk.mu/float64(shares), protocol.SumTail/float64(max(1, len(s.sel))))
	bound := a*per + t - 1
	q := dp.Quantizer{Clip: 1, Scale: maskScale, Bits: maskBits}
	ints := make([]int64, len(s.sel))
	q.Unwrap(w[:len(s.sel)], ints)
	for x, v := range ints {
		if v > bound || v < -bound {
			p := int(s.sel[x])
			return fmt.Errorf("%w: round %d word %d, item %d (position %d): value %d beyond ±%d (%d arrivals × %d + noise tail %d)", protocol.ErrOutOfBounds, round, x, p/s.k, p, v, bound, a, per, t-1)
		}
	}
	return nil
}

// NoiseCoverage implements protocol.NoiseCoverage: every client drew its
// Skellam share for ⌊rho·n⌋ of the n announced clients, so the last
// round's noise is Skellam(coverage·μ) with coverage = arrived/⌊rho·n⌋,
// capped at 1; ε is that of the round alone for the proven unit, all of
// one user's ratings (every row the round released, at twice the
// per-rating sensitivity: see the package documentation). ok is false
// after a round that folded no arrival (a sum CheckSum refused, or none).
//
// What the figure assumes: arrived is the sum of the clients' arrival
// words, so it counts noise shares only if every client in the sum is
// honest, sending 1 and adding its share to every position (the
// assumption distributed noise rests on anyway: a client can always send
// its 1 and withhold its share). CheckSum refuses a sum whose arrivals
// exceed the number of inputs or the n announced clients, so inflated
// arrival words cannot make the figure exceed inputs/⌊rho·n⌋: the reading
// a lying client can force is at most the one the server would give by
// counting the masked vectors in the sum, and the honest reading of half
// the shares missing stays one half.
func (s *server) NoiseCoverage(rho float64) (coverage, eps float64, ok bool) {
	if s.lastRound != s.round-1 {
		return 0, 0, false
	}
	return s.coverage(rho)
}

// coverage is NoiseCoverage of the training round aggregated (or being
// aggregated) last.
func (s *server) coverage(rho float64) (coverage, eps float64, ok bool) {
	if s.mk == nil || s.mk.mu == 0 || s.kind != kindTrain || s.arrived == 0 {
		return 0, 0, false
	}
	if !(rho > 0 && rho <= 1) {
		rho = 1
	}
	need := max(1, math.Floor(rho*float64(shareBase(&s.b, s.n))))
	coverage = math.Min(1, float64(s.arrived)/need)
	return coverage, s.mk.rowEpsAt(coverage*s.mk.mu, s.roundTotals(), 2*s.mk.a), true
}

// roundTotals returns the totals of this round's releases summed over
// its rows: one user's ratings enter every row she rated.
func (s *server) roundTotals() rowTotals {
	var t rowTotals
	run := 0
	k := int32(s.k)
	for n, p := range s.sel {
		if n > 0 && s.sel[n-1]/k == p/k {
			run++
		} else {
			run = 1
		}
		if n+1 == len(s.sel) || s.sel[n+1]/k != p/k {
			t.add(runTotals(run))
		}
	}
	return t
}
