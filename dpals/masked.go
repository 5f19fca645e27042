package dpals

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
)

// The integer path (Config.Aggregation = protocol.AggMasked): every
// release — the global mean and count, the bias rounds, the warm start,
// the factor rounds — is one dense integer vector per user over all the
// release's coordinates, summed mod 2^32 by secure aggregation (SecAgg+),
// with the noise added by the clients as shares of distributed Skellam
// noise (Agarwal, Kairouz and Liu, NeurIPS 2021), as HDPMF's integer path.
//
// Quantization: each coordinate e of a user's float statistics x_u (the
// Gaussian path's upload) is divided by the Gaussian σ of its block (the
// counts', the sums', the Gramians' ... σ the ledger would charge), so the
// normalized vector has L2 sensitivity √(2ρ_t) for the release's zCDP
// share ρ_t, then scaled by γ_t = G/√(2ρ_t) (G = maskG integer units) and
// rounded stochastically (unbiased). A user moves the integer sum by at
// most Δ2 = G + √d in L2 (the rounding adds at most 1 per coordinate, d
// the release's coordinates) and Δ1 = min(√d·Δ2, Δ2²) in L1.
//
// Calibration: release t gets Skellam(μ_t) in total per coordinate, μ_t =
// (1+η)·Δ2²/(4ρ_t), so that its Rényi curve's Gaussian term is the
// ledger's αρ_t/(1+η); η is the least value for which the Skellam curves
// of all releases (with their divergence excess) compose to the target
// (ε, δ) by rdp.ToDP. Each client adds Skellam(μ_t/s) with s = ⌊ρ·N⌋ (N
// the clients counted in the setup round, ρ the deployment's
// protocol.ParamMinShare, 1 in process): any s arriving shares carry the
// calibrated noise. Each upload ends with an arrival word 1, so the server
// knows how many shares arrived, and Spent accounts the noise that did.
const maskG = 1 << 15

// Broadcast parameter of the integer path.
const paramClients = "clients" // N, the clients counted at setup

// maskStep is one release's integer-path calibration.
type maskStep struct {
	d      int       // coordinates (without the arrival word)
	sigmas []float64 // per-coordinate block σ, by block
	deltas []float64 // a user's L2 bound in each block (its release's sensitivity)
	sizes  []int     // block sizes
	gamma  float64   // integer units per normalized unit
	l1, l2 float64   // sensitivities in integer units
	rho    float64   // the release's zCDP share of the plan
	mu     float64   // Poisson mean of the summed Skellam noise per coordinate
}

// maskPlan is the integer path's public calibration: a function of the
// config and the catalog's size alone, known to the server and clients.
type maskPlan struct {
	ni    int
	steps []maskStep // parallel to the schedule (zero for setup and final)
	eta   float64
	eps   float64 // total ε at Delta, every share arriving
	epsR  float64 // the same for replace-one neighbours
}

// blocks returns the block sizes of step st's upload for ni items and k
// factor dimensions, and their σ from sig (noiseSigmas).
func blocks(cfg Config, st step, sig []float64, ni, k int) (sizes []int, sigmas []float64) {
	k1 := k + 1
	nt := k1 * (k1 + 1) / 2
	switch st.kind {
	case kindMean:
		return []int{2}, []float64{sig[0]}
	case kindBias:
		return []int{ni, ni}, []float64{sig[0], sig[1]}
	case kindInit:
		m := min(cfg.InitItems, ni)
		return []int{m * (m + 1) / 2}, []float64{sig[0]}
	case kindFactor:
		if cfg.SharedGram {
			return []int{nt, ni, ni * k1}, []float64{sig[0], sig[1], sig[2]}
		}
		return []int{ni * nt, ni * k1}, []float64{sig[0], sig[2]}
	}
	return nil, nil
}

// newMaskPlan calibrates the integer path of cfg for ni items.
func newMaskPlan(cfg Config, ni int) (*maskPlan, error) {
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpals: %w", err)
	}
	steps, factors := schedule(cfg, rho)
	k := 0
	if factors {
		k = cfg.Dim
	}
	p := &maskPlan{ni: ni, steps: make([]maskStep, len(steps))}
	for i, st := range steps {
		var led rdp.Ledger
		sig := noiseSigmas(cfg, st, &led, nil)
		if sig == nil {
			continue
		}
		ms := &p.steps[i]
		ms.sizes, ms.sigmas = blocks(cfg, st, sig, ni, k)
		// The step's releases are its blocks, in order: their
		// sensitivities bound each user's block.
		rel := led.Releases()
		if len(rel) != len(ms.sizes) {
			return nil, fmt.Errorf("dpals: step %d has %d releases and %d blocks", i, len(rel), len(ms.sizes))
		}
		for b, r := range rel {
			if r.Sigma != ms.sigmas[b] {
				return nil, fmt.Errorf("dpals: step %d block %d: σ %g, its release's %g", i, b, ms.sigmas[b], r.Sigma)
			}
			ms.deltas = append(ms.deltas, r.L2)
		}
		for _, n := range ms.sizes {
			ms.d += n
		}
		ms.rho = st.rho
		ms.gamma = maskG / math.Sqrt(2*st.rho)
		ms.l2 = maskG + math.Sqrt(float64(ms.d))
		ms.l1 = math.Min(math.Sqrt(float64(ms.d))*ms.l2, ms.l2*ms.l2)
	}
	curve := func(eta float64, scale float64) rdp.Curve {
		var cs []rdp.Curve
		for _, ms := range p.steps {
			if ms.rho > 0 {
				mu := (1 + eta) * ms.l2 * ms.l2 / (4 * ms.rho)
				cs = append(cs, rdp.SkellamCurve(mu, scale*ms.l1, scale*ms.l2))
			}
		}
		return rdp.Compose(cs...)
	}
	ok := func(eta float64) bool {
		e, _ := rdp.ToDP(curve(eta, 1), cfg.Delta)
		return e <= cfg.Eps
	}
	lo, hi := -0.5, 1.0
	for !ok(hi) {
		lo, hi = hi, 2*hi+1
		if hi > 1e6 {
			return nil, fmt.Errorf("dpals: the integer path cannot reach ε = %g", cfg.Eps)
		}
	}
	if ok(lo) {
		hi = lo
	}
	for hi-lo > 1e-9 {
		m := (lo + hi) / 2
		if ok(m) {
			hi = m
		} else {
			lo = m
		}
	}
	p.eta = hi
	for i := range p.steps {
		if ms := &p.steps[i]; ms.rho > 0 {
			ms.mu = (1 + hi) * ms.l2 * ms.l2 / (4 * ms.rho)
		}
	}
	p.eps, _ = rdp.ToDP(curve(hi, 1), cfg.Delta)
	p.epsR, _ = rdp.ToDP(curve(hi, 2), cfg.Delta)
	return p, nil
}

// shares returns the number of clients each client's noise share is drawn
// for: ⌊ρ·N⌋, at least 1, N the roster of a roster calibration
// (protocol.ParamRoster, which a deployment's clients check against the
// roster they pin) or else the clients counted at setup.
func shares(b *protocol.Broadcast) int {
	return protocol.NoiseShares(b, int(b.Param(paramClients, 1)))
}

// encode writes the client's integer upload of step ms from its float
// statistics x: normalized, scaled, rounded stochastically, plus its
// Skellam share, mod 2^32, and the arrival word.
func (c *client) encode(b *protocol.Broadcast, ms *maskStep, x []float64, r *rand.Rand) []uint32 {
	w := make([]uint32, ms.d+1)
	if len(c.noise) < ms.d {
		c.noise = make([]int64, ms.d)
	}
	noise := c.noise[:ms.d]
	if c.obs.noiseless {
		clear(noise)
	} else {
		dp.FillSkellamShare(r, ms.mu, shares(b), noise)
	}
	e := 0
	for bl, n := range ms.sizes {
		f := ms.gamma / ms.sigmas[bl]
		for range n {
			v := x[e] * f
			q := math.Floor(v)
			if r.Float64() < v-q {
				q++
			}
			w[e] = uint32(int64(q) + noise[e])
			e++
		}
	}
	w[ms.d] = 1
	return w
}

// decode turns the summed words of step ms into float sums (the noise
// included) and returns the arrivals.
func (ms *maskStep) decode(words []uint32, out []float64) int {
	e := 0
	for bl, n := range ms.sizes {
		f := ms.sigmas[bl] / ms.gamma
		for range n {
			out[e] = float64(int32(words[e])) * f
			e++
		}
	}
	return int(words[ms.d])
}

// Spent implements protocol.Spent on the integer path: the ε at Delta of
// the releases so far with the noise that arrived (μ_t·A_t/s of the
// Skellam shares, A_t the arrival count), by Rényi accounting.
//
// On the Gaussian path it is the zCDP composition of the releases so far
// (the ledger the Result lists), converted at Delta.
func (s *server) Spent() (eps, delta float64, ok bool) {
	if s.mask == nil {
		if s.led.Rho() == 0 {
			return 0, s.cfg.Delta, true
		}
		return s.led.Epsilon(s.cfg.Delta), s.cfg.Delta, true
	}
	var cs []rdp.Curve
	for i, a := range s.arrA[:min(s.round, len(s.arrA))] {
		ms := s.mask.steps[i]
		if ms.rho == 0 {
			continue
		}
		cs = append(cs, rdp.SkellamCurve(ms.mu*float64(a)/float64(max(s.arrS[i], 1)), ms.l1, ms.l2))
	}
	if len(cs) == 0 {
		return 0, s.cfg.Delta, true // nothing released yet
	}
	eps, _ = rdp.ToDP(rdp.Compose(cs...), s.cfg.Delta)
	return eps, s.cfg.Delta, true
}

// RoundSpent implements protocol.RoundSpent: the ε at Delta of the round
// aggregated last, alone: its zCDP share ρ_t on the Gaussian path, its
// Skellam noise as it arrived on the integer path.
func (s *server) RoundSpent() (eps float64, ok bool) {
	i := s.round - 1
	if i < 0 || i >= len(s.steps) || s.steps[i].rho == 0 {
		return 0, false
	}
	if s.mask == nil {
		return rdp.ZCDPToDP(s.steps[i].rho, s.cfg.Delta), true
	}
	ms := s.mask.steps[i]
	if ms.rho == 0 || s.arrA[i] == 0 {
		return 0, false
	}
	c := rdp.SkellamCurve(ms.mu*float64(s.arrA[i])/float64(max(s.arrS[i], 1)), ms.l1, ms.l2)
	eps, _ = rdp.ToDP(c, s.cfg.Delta)
	return eps, true
}

// CheckSum implements protocol.SumChecker on the integer path: it checks
// the unmasked sum of the round the server last broadcast, of inputs
// clients' masked vectors, against what honest clients can produce, and
// returns an error wrapping protocol.ErrOutOfBounds at the first word out
// of bounds (naming the round, word, block and bound). It changes
// nothing.
//
// Setup round: one word, each client adding 1, so it is at most inputs.
//
// A release's round: the arrival word a (each honest upload adds 1) must
// be at most inputs. In block b of the release, a user's statistics have
// L2 norm at most Δ_b (the sensitivity the ledger charges), so after the
// scaling by f_b = γ/σ_b each coordinate is within ±⌈Δ_b·f_b⌉ (stochastic
// rounding goes to a neighbouring integer) and the block within
// Δ_b·f_b + √n_b in L2 (n_b coordinates; rounding moves each by less
// than 1). The a Skellam shares, each Skellam(μ/s) with s the share count
// of the broadcast, sum to S ~ Skellam(a·μ/s), so every honest coordinate
// has
//
//	|x_e| ≤ a·⌈Δ_b·f_b⌉ + t − 1,
//
// t the least integer with P(|S| ≥ t) ≤ protocol.SumTail/d
// (dp.SkellamTailBound; d the release's coordinates, so that by a union
// bound an honest round is refused with probability at most 2^−40), and,
// on the same event, the block's L2 norm is at most
// a·(Δ_b·f_b + √n_b) + √n_b·(t − 1).
//
// What stays unverifiable is what protocol's bounds note says: a client
// whose excess keeps the sum within these bounds (at most one honest
// client's contribution per coordinate above the others', plus the tail),
// that omits its noise share, or that sets its arrival word to 0 or 2.
func (s *server) CheckSum(round int, sum *protocol.Upload, inputs int) error {
	if s.mask == nil || round >= len(s.steps) || s.steps[round].kind == kindFinal {
		return nil
	}
	if round != s.round || round != s.b.Round {
		return fmt.Errorf("%w: dpals: check of round %d, the server broadcast round %d", protocol.ErrMessage, round, s.b.Round)
	}
	w := sum.Words
	if s.steps[round].kind == kindSetup {
		if len(w) != 1 {
			return fmt.Errorf("%w: dpals: masked setup sum has %d words, want 1", protocol.ErrMessage, len(w))
		}
		if int64(w[0]) > int64(inputs) {
			return fmt.Errorf("%w: round %d (setup) word 0: count %d above the %d inputs", protocol.ErrOutOfBounds, round, w[0], inputs)
		}
		return nil
	}
	ms := &s.mask.steps[round]
	if ms.rho == 0 {
		return nil
	}
	if len(w) != ms.d+1 {
		return fmt.Errorf("%w: dpals: masked sum of round %d has %d words, want %d", protocol.ErrMessage, round, len(w), ms.d+1)
	}
	a := int64(w[ms.d])
	if a > int64(inputs) {
		return fmt.Errorf("%w: round %d word %d: arrivals %d above the %d inputs", protocol.ErrOutOfBounds, round, ms.d, a, inputs)
	}
	t := dp.SkellamTailBound(float64(a)*ms.mu/float64(shares(&s.b)), protocol.SumTail/float64(ms.d))
	e := 0
	for bl, n := range ms.sizes {
		f := ms.gamma / ms.sigmas[bl]
		per := int64(math.Ceil(ms.deltas[bl] * f))
		bound := a*per + t - 1
		var sq float64
		for range n {
			x := int64(int32(w[e]))
			if x > bound || x < -bound {
				return fmt.Errorf("%w: round %d word %d (block %d): value %d beyond ±%d (%d arrivals × %d + noise tail %d)",
					protocol.ErrOutOfBounds, round, e, bl, x, bound, a, per, t-1)
			}
			sq += float64(x) * float64(x)
			e++
		}
		rn := math.Sqrt(float64(n))
		if l2, b2 := math.Sqrt(sq), float64(a)*(ms.deltas[bl]*f*(1+1e-9)+rn)+rn*float64(t-1); l2 > b2 {
			return fmt.Errorf("%w: round %d words %d-%d (block %d): L2 norm %.0f beyond %.0f (%d arrivals × %.0f + √%d × noise tail %d)",
				protocol.ErrOutOfBounds, round, e-n, e-1, bl, l2, b2, a, ms.deltas[bl]*f+rn, n, t-1)
		}
	}
	return nil
}

// NoiseCoverage implements protocol.NoiseCoverage on the integer path:
// for the round aggregated last, the fraction of its calibrated Skellam
// noise that arrived (A/s, the arrival word A over the s clients each
// share was drawn for, capped at 1) and that round's ε alone with the
// noise that arrived (RoundSpent). The server's share count s comes from
// the broadcast's ParamMinShare, which a deployment sets from rho; ok is
// false for a round without noise or that folded no sum. The arrival word
// is a word of the masked sum: CheckSum bounds it by the inputs, and a
// client sending 2 (or 0) moves the figure by one share.
func (s *server) NoiseCoverage(rho float64) (coverage, eps float64, ok bool) {
	i := s.round - 1
	if s.mask == nil || i < 0 || i >= len(s.steps) || s.mask.steps[i].rho == 0 || s.arrA[i] == 0 {
		return 0, 0, false
	}
	eps, ok = s.RoundSpent()
	return math.Min(1, float64(s.arrA[i])/float64(max(s.arrS[i], 1))), eps, ok
}
