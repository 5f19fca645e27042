package dpals

import (
	"fmt"
	"math/rand/v2"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/protocol"
)

// The integer path (Config.Aggregation = protocol.AggMasked): every
// release — the global mean and count, the bias rounds, the warm start,
// the factor rounds — is one dense integer vector per user over all the
// release's coordinates, summed mod 2^32 by secure aggregation (SecAgg+),
// with the noise added by the clients as shares of distributed Skellam
// noise, as HDPMF's integer path. The quantization and calibration are
// package maskplan's (shared with dp-ease): each release's blocks are
// normalized by the Gaussian σ its ledger entry charges, scaled by γ_t =
// G/√(2ρ_t), rounded stochastically, and get Skellam(μ_t) in total, η
// the least slack for which the Skellam curves of all releases compose to
// the target (ε, δ). Each client adds Skellam(μ_t/s) with s = ⌊ρ·N⌋ (N
// the clients counted in the setup round or the roster, ρ the
// deployment's protocol.ParamMinShare, 1 in process): any s arriving
// shares carry the calibrated noise. Each upload ends with an arrival word
// 1, so the server knows how many shares arrived, and Spent accounts the
// noise that did.

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

// newMaskPlan calibrates the integer path of cfg for ni items: a public
// plan, a function of the config and the catalog's size alone, known to
// the server and the clients, with one step per round of the schedule
// (zero for the setup and final rounds).
func newMaskPlan(cfg Config, ni int) (*maskplan.Plan, error) {
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpals: %w", err)
	}
	steps, factors := schedule(cfg, rho)
	k := 0
	if factors {
		k = cfg.Dim
	}
	ms := make([]maskplan.Step, len(steps))
	for i, st := range steps {
		var led rdp.Ledger
		sig := noiseSigmas(cfg, st, &led, nil)
		if sig == nil {
			continue
		}
		sizes, sigmas := blocks(cfg, st, sig, ni, k)
		// The step's releases are its blocks, in order: their
		// sensitivities bound each user's block.
		rel := led.Releases()
		if len(rel) != len(sizes) {
			return nil, fmt.Errorf("dpals: step %d has %d releases and %d blocks", i, len(rel), len(sizes))
		}
		var deltas []float64
		for b, r := range rel {
			if r.Sigma != sigmas[b] {
				return nil, fmt.Errorf("dpals: step %d block %d: σ %g, its release's %g", i, b, sigmas[b], r.Sigma)
			}
			deltas = append(deltas, r.L2)
		}
		ms[i] = maskplan.NewStep(st.rho, sizes, sigmas, deltas)
	}
	if cfg.limited() {
		return limitedMaskPlan(ms, cfg)
	}
	p, err := maskplan.New(ms, cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpals: %w", err)
	}
	return p, nil
}

// limitedMaskPlan calibrates the integer path of a run under
// participation limits as maskplan.Calibrate does, but charges one user,
// instead of every release composed, the envelope of the allowed sets of
// releases the user may answer (envelope).
func limitedMaskPlan(ms []maskplan.Step, cfg Config) (*maskplan.Plan, error) {
	p := cfg.Participation()
	plan := &maskplan.Plan{Steps: ms, Delta: cfg.Delta}
	var err error
	plan.Eta, plan.Eps, plan.EpsReplace, err = maskplan.CalibrateBy(ms, cfg.Eps, cfg.Delta,
		func(cs []rdp.Curve) rdp.Curve { return envelope(cs, p) })
	if err != nil {
		return nil, fmt.Errorf("dpals: %w", err)
	}
	return plan, nil
}

// maskSpent returns the integer path's ε at Delta of the first n rounds
// with the noise that arrived: every release composed in a roster run,
// the envelope of the allowed sets under limits.
func (s *server) maskSpent(n int) float64 {
	if !s.cfg.limited() {
		return s.mask.Spent(s.arrA, s.arrS, n)
	}
	cs := make([]rdp.Curve, n)
	for i := range n {
		if st := &s.mask.Steps[i]; st.Rho > 0 && s.arrS[i] > 0 {
			cs[i] = st.Curve(s.arrA[i], s.arrS[i])
		}
	}
	if n == 0 {
		return 0
	}
	eps, _ := rdp.ToDP(envelope(cs, s.cfg.Participation()), s.cfg.Delta)
	return eps
}

// encode writes the client's integer upload of step ms from its float
// statistics x: normalized, scaled, rounded stochastically, plus its
// Skellam share, mod 2^32, and the arrival word (maskplan.Step.Encode).
func (c *client) encode(b *protocol.Broadcast, ms *maskplan.Step, x []float64, r *rand.Rand) []uint32 {
	if len(c.noise) < ms.D {
		c.noise = make([]int64, ms.D)
	}
	return ms.Encode(x, r, maskplan.Shares(b), c.noise, c.obs.noiseless)
}

// Spent implements protocol.Spent on the integer path: the ε at Delta of
// the releases so far with the noise that arrived (μ_t·A_t/s of the
// Skellam shares, A_t the arrival count), by Rényi accounting; under
// participation limits, of the envelope of the sets of those releases
// one user may have answered (maskSpent).
//
// On the Gaussian path it is the zCDP composition of the releases so far
// (the ledger the Result lists), converted at Delta; under participation
// limits, of the costliest set of those rounds one user may have answered
// (userRho).
func (s *server) Spent() (eps, delta float64, ok bool) {
	if s.mask == nil {
		rho := spentRho(s.cfg, s.steps[:min(s.round, len(s.steps))], &s.led)
		if rho == 0 {
			return 0, s.cfg.Delta, true
		}
		return rdp.ZCDPToDP(rho, s.cfg.Delta), s.cfg.Delta, true
	}
	return s.maskSpent(min(s.round, len(s.arrA))), s.cfg.Delta, true
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
	return s.mask.StepSpent(i, s.arrA[i], s.arrS[i])
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
// A release's round: maskplan.Step.Check, which bounds the arrival word by
// inputs and every coordinate and block of the sum by the honest clients'
// largest contribution plus the Skellam noise's tail (an honest round is
// refused with probability at most protocol.SumTail = 2^−40).
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
	if s.steps[round].kind == kindSetup {
		return maskplan.CheckSetup(round, sum.Words, inputs)
	}
	return s.mask.Check(round, round, sum.Words, inputs, maskplan.Shares(&s.b))
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
	if s.mask == nil || i < 0 || i >= len(s.steps) {
		return 0, 0, false
	}
	return s.mask.Coverage(i, s.arrA[i], s.arrS[i])
}
