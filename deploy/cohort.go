package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
)

// Cohort rounds.
//
// In a cohort run (protocol.Participation.Cohort > 0 in the method's
// configuration) a round does not ask every enrolled client: the server
// first gathers a cohort, the first Cohort clients that offer to take
// part (GetRound with join), and the round then runs with them alone —
// its uploads or its secure-aggregation session, its floor of
// participants and its noise calibration (protocol.ParamRoster is the
// cohort size) are counted on the cohort. Enrolled clients outside it
// are not waited for. A client offers only the rounds its own
// participation limits allow (MaxRounds, MinGap), which it keeps across
// restarts, so a method's user-level ε, composed over at most MaxRounds
// participations, holds whoever the server takes. The final round, which
// releases nothing, takes no cohort: it asks every enrolled client and
// closes once all answered or at its deadline, with those online; a
// client that misses it reads the published model (a device that left
// once spent, ClientConfig.LeaveWhenSpent, has read a release already).

// gathering is a cohort being gathered for a round.
type gathering struct {
	round int
	phase string
	want  int
	taken map[uint32]bool
	full  chan struct{} // closed when want clients are taken
}

// cohortRun reports whether the run takes cohorts.
func (s *Server) cohortRun() bool { return s.part.Cohort > 0 }

// checkCohort refuses, at NewServer, a cohort run the server cannot hold.
func (s *Server) checkCohort() error {
	if err := s.part.Validate(); err != nil {
		return fmt.Errorf("deploy: %s: %w", s.cfg.Method.Name(), err)
	}
	if !s.cohortRun() {
		return nil
	}
	if s.plan.Aggregation == "sum" {
		return fmt.Errorf("deploy: %s: a cohort of %d needs masked aggregation or none: the plain-sum path calibrates the noise by the setup's announcements of every client", s.cfg.Method.Name(), s.part.Cohort)
	}
	if s.plan.Aggregation == "masked" && s.part.Cohort < 2 {
		return fmt.Errorf("deploy: %s: a cohort of %d: secure aggregation needs at least 2 clients (the sum of one vector is that vector)", s.cfg.Method.Name(), s.part.Cohort)
	}
	if s.cfg.MinClients < s.part.Cohort {
		s.cfg.MinClients = s.part.Cohort
	}
	return nil
}

// cohortFloor is the least number of clients a round of the cohort run
// releases with: MinParticipants of the cohort.
func (s *Server) cohortFloor() int {
	return max(1, int(math.Ceil(s.cfg.MinParticipants*float64(s.part.Cohort)-1e-9)))
}

// refreshOrder, in a cohort run, adds the clients enrolled since the
// last round to the upload order (enrolment stays open while a cohort
// run runs: a device that arrives late joins the next cohort with room).
// IDs grow, so the clients already in the order keep their positions.
// The round loop calls it as a round opens; s.mu is held.
func (s *Server) refreshOrder() {
	if !s.cohortRun() || len(s.order) == len(s.enrolled) {
		return
	}
	for id := range s.enrolled {
		if _, ok := s.slots[id]; !ok {
			s.order = append(s.order, id)
		}
	}
	slices.Sort(s.order[len(s.slots):])
	for k := len(s.slots); k < len(s.order); k++ {
		s.slots[s.order[k]] = k
	}
}

// errCohortShort is gatherCohort's answer when a masked training round's
// cohort stayed below its floor for 1+maxWaits deadlines: the devices
// whose limits allow the round are spent or gone, and the round is
// skipped (it releases nothing and costs nothing) rather than waited on
// for ever.
var errCohortShort = errors.New("deploy: the cohort stayed below its floor")

// gatherCohort gathers the cohort of round b: it returns once Cohort
// clients offered to take part, or at a deadline (RoundTimeout, then one
// more at a time) with at least the cohort's floor. A masked training
// round whose cohort is still below its floor after 1+maxWaits
// deadlines returns errCohortShort; other rounds wait on.
func (s *Server) gatherCohort(ctx context.Context, b *protocol.Broadcast) (map[uint32]bool, error) {
	g := &gathering{round: b.Round, phase: b.Phase, want: s.part.Cohort, taken: map[uint32]bool{}, full: make(chan struct{})}
	s.mu.Lock()
	s.refreshOrder()
	s.gather, s.cohort = g, nil
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.gather = nil
		s.notify()
		s.mu.Unlock()
	}()
	floor, waits := s.cohortFloor(), 0
	timer := time.NewTimer(s.cfg.RoundTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-g.full:
		case <-timer.C:
			s.mu.Lock()
			n := len(g.taken)
			s.mu.Unlock()
			if n < max(floor, 2) {
				if waits++; waits > maxWaits && b.Phase == protocol.PhaseTrain && s.plan.Aggregation == "masked" {
					return nil, fmt.Errorf("%w: %d of %d taken after %d deadlines (floor %d)", errCohortShort, n, g.want, waits, floor)
				}
				s.log.Warn("cohort below its floor at the deadline: waiting on", "round", b.Round, "taken", n, "cohort", g.want, "floor", floor)
				timer.Reset(s.cfg.RoundTimeout)
				continue
			}
		}
		break
	}
	s.mu.Lock()
	cohort := maps.Clone(g.taken)
	if s.testCohort != nil {
		s.testCohort(b, cohort)
	}
	s.mu.Unlock()
	s.log.Info("cohort gathered", "round", b.Round, "clients", len(cohort), "cohort", g.want)
	return cohort, nil
}

// join takes client id into the cohort being gathered for the round
// after `after`, when there is room; s.mu is held.
func (s *Server) join(id uint32, after int) {
	g := s.gather
	if g == nil || g.round <= after || g.taken[id] || len(g.taken) >= g.want || s.banned[id] {
		return
	}
	if _, ok := s.enrolled[id]; !ok {
		return
	}
	if _, ok := s.slots[id]; !ok {
		// Enrolled since the gathering began (a device that arrived
		// late): it takes a position now, or its round would refuse it
		// as a stranger.
		s.refreshOrder()
	}
	g.taken[id] = true
	if len(g.taken) == g.want {
		close(g.full)
	}
	s.notify()
}

// gatheringOf is the wire view of the cohort being gathered; s.mu is
// held.
func (s *Server) gatheringOf() *fedv1.Gathering {
	g := s.gather
	return &fedv1.Gathering{Round: int32(g.round), Phase: g.phase, Cohort: int32(g.want), Taken: int32(len(g.taken))}
}

// cohortOrder returns the ids of cohort in upload order.
func cohortOrder(cohort map[uint32]bool) []uint32 {
	return slices.Sorted(maps.Keys(cohort))
}
