package deploy

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
)

// fold commits the round just aggregated: the server's snapshot, the
// ledger entry and the ids of the folded uploads, in one transaction.
func (s *Server) fold(info protocol.RoundInfo, _ time.Duration) error {
	snap, err := s.srv.MarshalBinary()
	if err != nil {
		return fmt.Errorf("deploy: snapshot after round %d: %w", info.Round, err)
	}
	s.mu.Lock()
	var folded []uint32
	for k, ok := range s.answered {
		if ok {
			folded = append(folded, s.order[k])
		}
	}
	e := LedgerEntry{
		Round: info.Round, Phase: info.Phase, Enrolled: s.usersLocked(), Participants: s.nAnswer,
		Rejected: maps.Clone(s.rejected), Seconds: info.Elapsed.Seconds(), Time: time.Now().UTC(),
	}
	e.Parties = s.partiesLocked()
	if s.cohortRun() {
		e.Cohort = len(s.cohort)
	}
	for _, u := range s.ups {
		if u != nil {
			e.Uploads++
		}
	}
	if s.maskedInputs >= 0 { // a masked round: the masked vectors in the released sum
		e.Uploads, e.Skipped = s.maskedInputs, s.skipped
		if info.Phase == protocol.PhaseSetup && e.Skipped == "" {
			s.members = map[uint32]bool{}
			for _, id := range folded {
				s.members[id] = true
			}
		}
	}
	if info.Rejected != nil {
		// A client lied about its vector, so the arrival words that
		// bound the noise in the sum cannot be trusted: no finite ε.
		e.Refused, e.Eps = info.Rejected.Error(), -1
	}
	var shares []int32
	switch s.plan.Aggregation {
	case "sum":
		switch info.Phase {
		case protocol.PhaseSetup:
			shares = announced(s.ups, len(s.plan.ItemIDs))
			s.shares = shares
		case protocol.PhaseTrain:
			e.Coverage = coverage(s.ups, s.shares)
			if ps, ok := s.srv.(protocol.PartialShares); ok {
				// The method's ε at the shares that arrived (HDPMF:
				// its clip times a rating's loss at this coverage).
				if eps, ok := ps.PartialSharesEps(e.Coverage); ok {
					e.Eps = eps
				}
			}
		}
	case "masked":
		if e.Skipped == "" && e.Refused == "" {
			e.Coverage, e.Eps = s.maskedCoverage(info.Phase)
		}
	}
	s.account(&e)
	if covers(e) {
		for _, id := range folded {
			s.cover(id)
		}
	}
	e.Users = s.coveredUsers
	s.mu.Unlock()
	if e.Refused != "" {
		s.log.Error("unmasked sum out of bounds: refused, nothing released", "round", e.Round, "err", e.Refused)
		s.met.refuseSum()
	}
	if e.Coverage > 0 && e.Coverage < 1 {
		s.log.Warn("dropouts weakened the noise of this round", "round", e.Round, "noise_coverage", e.Coverage, "eps", e.Eps)
	}
	e.CPUSeconds, e.RSSBytes, e.PeakRSSBytes = processUsage()
	if err := s.st.commit(e, snap, folded, shares); err != nil {
		return fmt.Errorf("deploy: commit round %d: %w", info.Round, err)
	}
	s.met.roundDone(e)
	s.log.Info("round folded", "round", e.Round, "phase", e.Phase, "participants", e.Participants,
		"enrolled", e.Enrolled, "uploads", e.Uploads, "users", e.Users, "seconds", e.Seconds)
	if covers(e) && !s.srv.Done() {
		return s.release(e.Round)
	}
	return nil
}

// covers reports whether round e released an aggregate of the users'
// data: a training round neither skipped nor refused.
func covers(e LedgerEntry) bool {
	return e.Phase == protocol.PhaseTrain && e.Skipped == "" && e.Refused == ""
}

// cover adds client id to the clients a released training round read,
// and its users to their count, once. s.mu is held (or the server is
// not serving yet).
func (s *Server) cover(id uint32) {
	if !s.covered[id] {
		s.covered[id] = true
		s.coveredUsers += s.weightOf(id)
	}
}

// account fills e's privacy figures, so that every private round carries
// its ε and every entry the run's total so far: the round's ε alone from
// the method when it reports one (protocol.RoundSpent) and nothing set it
// from the noise that arrived; the total from the method's own accountant
// (protocol.Spent), or else the rounds' ε added up (basic composition, an
// upper bound). The total is -1 from the first round without a finite
// bound on. s.mu is held.
func (s *Server) account(e *LedgerEntry) {
	released := e.Skipped == "" && e.Refused == ""
	if rs, ok := s.srv.(protocol.RoundSpent); ok && released && e.Eps == 0 {
		if eps, ok := rs.RoundSpent(); ok {
			e.Eps = eps
			if math.IsInf(eps, 1) || math.IsNaN(eps) {
				e.Eps = -1
			}
		}
	}
	sp, ok := s.srv.(protocol.Spent)
	var eps, delta float64
	if ok {
		eps, delta, ok = sp.Spent()
	}
	switch {
	case ok:
		e.EpsTotal, e.Delta = eps, delta
	case e.Eps != 0 || s.epsTotal != 0:
		e.EpsTotal, e.Delta = s.epsTotal+max(e.Eps, 0), s.delta
	}
	if e.Refused != "" || e.Eps < 0 || s.unbounded || math.IsInf(e.EpsTotal, 1) || math.IsNaN(e.EpsTotal) {
		e.EpsTotal, s.unbounded = -1, true
	}
	s.epsTotal, s.delta, s.epsRound = e.EpsTotal, e.Delta, max(s.epsRound, e.Eps)
}

// maskedCoverage asks the method server, if it counts the noise shares
// of its masked rounds (protocol.NoiseCoverage: HDPMF's family, LDP-OP),
// for a training round's noise coverage and ε; each client drew its share
// for a fraction ρ = MinParticipants of its peers. ε is -1 when none
// arrived. s.mu is held.
func (s *Server) maskedCoverage(phase string) (cov, eps float64) {
	nc, ok := s.srv.(protocol.NoiseCoverage)
	if !ok || phase != protocol.PhaseTrain {
		return 0, 0
	}
	if cov, eps, ok = nc.NoiseCoverage(min(1, s.cfg.MinParticipants)); !ok {
		return 0, 0
	}
	if math.IsInf(eps, 1) || math.IsNaN(eps) {
		eps = -1
	}
	return cov, eps
}

// announced returns the shares of each item's noise: the clients that
// named it in the setup round, or, when no setup upload names items, one
// entry with the number of clients that answered setup.
func announced(ups []*protocol.Upload, numItems int) []int32 {
	n := make([]int32, numItems)
	var clients int32
	named := false
	for _, u := range ups {
		if u == nil {
			continue
		}
		clients++
		for _, j := range u.Items {
			n[j]++
			named = true
		}
	}
	if !named {
		return []int32{clients}
	}
	return n
}

// coverage returns the smallest fraction of an item's noise shares that
// arrived, over the items some upload named (1 when shares is unknown).
func coverage(ups []*protocol.Upload, shares []int32) float64 {
	if len(shares) == 0 {
		return 1
	}
	cov := 1.0
	if len(shares) == 1 { // one pool of shares: the clients that answered
		var got int32
		for _, u := range ups {
			if u != nil {
				got++
			}
		}
		if got > 0 && shares[0] > 0 {
			cov = math.Min(1, float64(got)/float64(shares[0]))
		}
		return cov
	}
	arrived := make([]int32, len(shares))
	for _, u := range ups {
		if u == nil {
			continue
		}
		for _, j := range u.Items {
			arrived[j]++
		}
	}
	for j, a := range arrived {
		if a > 0 && shares[j] > 0 {
			cov = math.Min(cov, float64(a)/float64(shares[j]))
		}
	}
	return cov
}

// spent is the method's claim with what the run spent by the ledger: the
// largest round's ε, the total at δ (-1, said in the note, when
// unbounded) and the aggregation that ran.
func (s *Server) spent() model.Privacy {
	p := s.cfg.Method.Claim(s.cfg.Config)
	s.mu.Lock()
	p.EpsRound, p.EpsTotal, p.Delta = s.epsRound, s.epsTotal, s.delta
	s.mu.Unlock()
	note := "ε as the server's ledger accounted the released rounds"
	if p.EpsTotal < 0 {
		note = "ε unbounded (-1): a round's sum was refused, or its arriving noise bounded nothing; see the ledger"
	}
	if p.Note != "" {
		note = p.Note + "; " + note
	}
	p.Note = note
	return p
}
