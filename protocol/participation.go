package protocol

import "fmt"

// Participation is how often one client takes part in a run, as the
// method's configuration fixes it (Method.Participation). It is part of
// the plan a client accepts (the configuration is in PlanDigest), and a
// deployment's clients enforce MaxRounds and MinGap themselves, with
// their memory across restarts, so that a method's user-level ε, which
// composes at most MaxRounds participations, holds whichever clients the
// server asks in each round.
//
// The zero value is a roster run: every enrolled client is asked in every
// round, and a client answers each round of the plan once.
type Participation struct {
	// Cohort is the number of clients a training round takes out of the
	// enrolled population; 0 means every enrolled client.
	Cohort int
	// MaxRounds is the most training rounds (rounds with a masked or
	// plain contribution of the client's data; setup rounds not counted)
	// one client answers in a run; 0 means every round of the plan.
	MaxRounds int
	// MinGap is the least difference between the numbers of two training
	// rounds one client answers; 0 and 1 mean none.
	MinGap int
}

// Validate reports a participation that no run can honour.
func (p Participation) Validate() error {
	switch {
	case p.Cohort < 0:
		return fmt.Errorf("cohort %d: want 0 (every client) or a positive size", p.Cohort)
	case p.MaxRounds < 0:
		return fmt.Errorf("max rounds per client %d: want 0 (every round) or a positive count", p.MaxRounds)
	case p.MinGap < 0:
		return fmt.Errorf("min gap %d: want 0 (none) or a positive number of rounds", p.MinGap)
	}
	return nil
}

// Limited reports whether p limits how often one client answers
// (MaxRounds or MinGap), beyond each round of the plan once.
func (p Participation) Limited() bool { return p.MaxRounds > 0 || p.MinGap > 1 }

// Allows reports whether a client that answered the training rounds in
// answered (ascending) may answer training round r under p.
func (p Participation) Allows(answered []int, r int) bool {
	if p.MaxRounds > 0 && len(answered) >= p.MaxRounds {
		return false
	}
	if n := len(answered); n > 0 {
		last := answered[n-1]
		if r <= last || (p.MinGap > 1 && r-last < p.MinGap) {
			return false
		}
	}
	return true
}

// Done reports whether a client of a cohort run that answered the
// training rounds in answered (ascending) is done with the run as the
// server's progress shows it, now being the round gathered or open: p
// lets it answer none of the rounds from now to last (the plan's last
// round that may train), and the last round it answered is over. A
// client that answered no training round is never done before the run
// ends (it reads the final model, as every client does); a client that
// is done may leave with the newest release.
func (p Participation) Done(answered []int, now, last int) bool {
	n := len(answered)
	if p.Cohort <= 0 || n == 0 || now <= answered[n-1] {
		return false
	}
	for r := max(now, 1); r <= last; r++ {
		if p.Allows(answered, r) {
			return false
		}
	}
	return true
}
