package dpease

import (
	"fmt"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/protocol"
)

// The integer path (Config.Aggregation = protocol.AggMasked), dp-als's
// (package maskplan): a setup round counts the clients N, then each of the
// two releases is one dense integer vector per device over all its
// coordinates — the counts over the whole catalog, the Gram over every
// pair of the top M items — summed mod 2^32 by secure aggregation
// (SecAgg+), so the server learns the sum and nothing else.
//
// A device divides each coordinate of its float statistics (the ideal
// path's upload: 1/√n_u per item it has; 1/max(n', c) per pair of its top
// items) by the Gaussian σ of the release (σ_c, σ_g: what the zCDP ledger
// charges), scales by γ_t = G/√(2ρ_t), rounds stochastically, adds its
// share Skellam(μ_t/s) of the release's noise (s = ⌊ρ·N⌋, ρ the
// deployment's protocol.ParamMinShare, N the roster when the broadcast
// carries one; crypto/rand outside the test mode) and an arrival word 1.
// μ_t = (1+η)·Δ2²/(4ρ_t) with η the least slack for which the two Skellam
// Rényi curves (sensitivities Δ2 = G + √d and Δ1 = min(√d·Δ2, Δ2²) in
// integer units: the rounding's inflation) compose to at most the target
// (ε, δ). The server decodes the sum (its noise is the devices') and adds
// nothing; the ledger lists the two releases of the Gaussian plan the
// integer noise stands for, and the Report's Eps is the Skellam
// accounting's.
//
// A release whose shares did not all arrive (devices dropping out) is
// accounted with the noise that did (Spent, Stats["eps_spent"]).

// newMaskPlan calibrates the integer path of cfg (resolved) for n items:
// a public plan, a function of the config and the catalog's size alone,
// known to the server and the devices, of two steps (counts, Gram).
func newMaskPlan(cfg Config, n int) (*maskplan.Plan, error) {
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpease: %w", err)
	}
	m := min(cfg.TopItems, n)
	rc, rg := cfg.FracCounts*rho, (1-cfg.FracCounts)*rho
	p, err := maskplan.New([]maskplan.Step{
		maskplan.NewStep(rc, []int{n}, []float64{rdp.GaussianSigmaFor(rc, 1)}, []float64{1}),
		maskplan.NewStep(rg, []int{pairs(m)}, []float64{rdp.GaussianSigmaFor(rg, GramL2(cfg.Cap))}, []float64{GramL2(cfg.Cap)}),
	}, cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpease: %w", err)
	}
	return p, nil
}

// decode folds the integer path's single summed upload of round (release
// st, or the setup round at st −1) and returns the release's float sums,
// the noise included; nil sums, no error, after the setup round, which
// fails without a count. A round
// without a sum (refused by CheckSum, or nobody sent) releases zeros and
// is accounted as released with no noise arrived.
func (s *Server) decode(round, st int, ups []*protocol.Upload) ([]float64, error) {
	want := 1
	if st >= 0 {
		want = s.mask.Steps[st].D + 1
	}
	var words []uint32
	for _, u := range ups {
		if u == nil {
			continue
		}
		if words != nil || len(u.Words) != want || u.Values != nil {
			return nil, fmt.Errorf("%w: dpease round %d: want one summed upload of %d words (secagg=masked)", protocol.ErrMessage, round, want)
		}
		words = u.Words
	}
	if st < 0 {
		if words == nil {
			// Refused by CheckSum, or nobody answered: the devices' shares
			// would be drawn for one client each, noise the solve's ridge
			// is not set for. Stop rather than release.
			return nil, fmt.Errorf("dpease: setup round %d folded no client count (its sum was refused or empty): the noise shares cannot be calibrated", round)
		}
		s.st.Clients = int(words[0])
		s.st.Round = round + 1
		return nil, nil
	}
	ms := &s.mask.Steps[st]
	out := make([]float64, ms.D)
	rel := round - s.offset()
	s.st.ArrA[rel], s.st.ArrS[rel] = 0, 0
	if words != nil {
		s.st.ArrA[rel] = ms.Decode(words, out)
		s.st.ArrS[rel] = maskplan.Shares(&s.b)
	} // else the round was skipped: no sum, nothing released, no ε (ArrS 0)
	return out, nil
}

// CheckSum implements protocol.SumChecker on the integer path: it checks
// the unmasked sum of the round the server last broadcast, of inputs
// devices' masked vectors, against what honest devices can produce, and
// returns an error wrapping protocol.ErrOutOfBounds at the first word out
// of bounds. It changes nothing.
//
// Setup: one word, each device adding 1, so at most inputs. A release:
// maskplan.Step.Check — the arrival word at most inputs, and every
// coordinate and the L2 norm of the sum within the honest devices' largest
// contribution (a device's counts have L2 norm 1, its Gram triangle
// √((1+1/c)/2)) plus the Skellam noise's tail, so an honest round is
// refused with probability at most protocol.SumTail (2^−40).
//
// Unverifiable (protocol's bounds note): a device whose excess keeps the
// sum within these bounds, omits its noise share, or sends an arrival word
// of 0 or 2.
func (s *Server) CheckSum(round int, sum *protocol.Upload, inputs int) error {
	if s.mask == nil {
		return nil
	}
	if round != s.st.Round || round != s.b.Round {
		return fmt.Errorf("%w: dpease: check of round %d, the server broadcast round %d", protocol.ErrMessage, round, s.b.Round)
	}
	if round < 1 {
		return maskplan.CheckSetup(round, sum.Words, inputs)
	}
	return s.mask.Check(s.stage(round), round, sum.Words, inputs, maskplan.Shares(&s.b))
}

// released returns the number of releases aggregated so far (over
// cohorts, one per round).
func (s *Server) released() int { return max(0, min(2*s.cfg.cohortRounds(), s.st.Round-s.offset())) }

// cohortSpent is Spent on the integer path over cohorts: a device answers
// at most one counts round and one Gram round, so at every order the
// costliest counts round's Rényi curve (with the noise that arrived) plus
// the costliest Gram round's bounds every user's.
func (s *Server) cohortSpent() float64 {
	t, n := s.cfg.cohortRounds(), s.released()
	if n == 0 {
		return 0
	}
	env := rdp.Compose()
	for stage := range 2 {
		worst := rdp.Compose()
		for rel := stage * t; rel < min(n, (stage+1)*t); rel++ {
			if s.st.ArrS[rel] == 0 {
				continue // skipped: released nothing
			}
			c := s.mask.Steps[stage].Curve(s.st.ArrA[rel], s.st.ArrS[rel])
			for i := range worst {
				worst[i] = max(worst[i], c[i])
			}
		}
		env = rdp.Compose(env, worst)
	}
	eps, _ := rdp.ToDP(env, s.cfg.Delta)
	return eps
}

// Spent implements protocol.Spent: the ε at Delta of the releases so far,
// for one user added or removed: the zCDP composition of the Gaussian
// releases on the ideal path; on the integer path the Rényi composition
// of the Skellam releases with the noise that arrived (A/s of each
// release's calibrated noise, A the arrival word, s the clients each share
// was drawn for).
func (s *Server) Spent() (eps, delta float64, ok bool) {
	if s.mask == nil {
		if s.led.Rho() == 0 {
			return 0, s.cfg.Delta, true
		}
		return s.led.Epsilon(s.cfg.Delta), s.cfg.Delta, true
	}
	if s.cfg.cohortRounds() > 1 {
		return s.cohortSpent(), s.cfg.Delta, true
	}
	return s.mask.Spent(s.st.ArrA, s.st.ArrS, s.released()), s.cfg.Delta, true
}

// RoundSpent implements protocol.RoundSpent: the ε at Delta of the release
// aggregated last, alone (with the noise that arrived on the integer
// path); false after the setup round or before any release.
func (s *Server) RoundSpent() (eps float64, ok bool) {
	rel := s.st.Round - 1 - s.offset()
	if rel < 0 || rel >= 2*s.cfg.cohortRounds() {
		return 0, false
	}
	if s.mask == nil {
		rs := s.led.Releases()
		return rdp.ZCDPToDP(rs[len(rs)-1].Rho, s.cfg.Delta), true
	}
	return s.mask.StepSpent(s.stage(s.st.Round-1), s.st.ArrA[rel], s.st.ArrS[rel])
}

// NoiseCoverage implements protocol.NoiseCoverage on the integer path: for
// the release aggregated last, the fraction of its calibrated Skellam
// noise that arrived (A/s, capped at 1) and its ε alone with that noise
// (RoundSpent). The arrival word is a word of the masked sum: CheckSum
// bounds it by the inputs, and a device sending 2 (or 0) moves the figure
// by one share.
func (s *Server) NoiseCoverage(rho float64) (coverage, eps float64, ok bool) {
	rel := s.st.Round - 1 - s.offset()
	if s.mask == nil || rel < 0 || rel >= 2*s.cfg.cohortRounds() {
		return 0, 0, false
	}
	return s.mask.Coverage(s.stage(s.st.Round-1), s.st.ArrA[rel], s.st.ArrS[rel])
}
