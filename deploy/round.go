package deploy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
)

// Run waits for enrolment, then runs the method's rounds until it is done,
// committing the state at every round boundary, and publishes the final
// model. It returns ctx's error when ctx ends first: the open round is
// abandoned and a restart resumes from the last committed one.
func (s *Server) Run(ctx context.Context) error {
	if m := s.Model(); m != nil {
		s.log.Info("run already done", "rounds", s.round)
		if s.cfg.OnPublish != nil {
			return s.cfg.OnPublish(m)
		}
		return nil
	}
	if err := s.waitEnrolment(ctx); err != nil {
		return err
	}
	if s.srv.Round() > 0 {
		// A restarted server resumes: its latest interim release again.
		if err := s.release(s.srv.Round() - 1); err != nil {
			return err
		}
	}
	var tr protocol.Transport = (*transport)(s)
	if s.plan.Aggregation == "sum" {
		tr = protocol.NewSecureSum(tr)
	}
	start := time.Now()
	opt := protocol.RunOptions{StartRound: s.srv.Round(), OnRound: func(info protocol.RoundInfo) error {
		return s.fold(info, time.Since(start))
	}}
	if err := protocol.RunTransport(ctx, s.srv, tr, opt); err != nil {
		s.mu.Lock()
		s.open = false
		s.notify()
		s.mu.Unlock()
		return err
	}
	return s.publish()
}

// waitEnrolment returns once enough clients enrolled and enrolment was
// quiet for a while, and closes enrolment.
func (s *Server) waitEnrolment(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		started := s.state == fedv1.RunState_RUN_STATE_RUNNING
		ready := s.usersLocked() >= s.cfg.MinClients && time.Since(s.lastEnr) >= s.cfg.EnrollQuiet
		if ready && !started {
			s.plan.Started = true
			if err := s.st.putPlan(s.plan); err != nil {
				s.mu.Unlock()
				return err
			}
			if err := s.setRoster(); err != nil {
				s.mu.Unlock()
				return err
			}
			s.state = fedv1.RunState_RUN_STATE_RUNNING
			started = true
			s.log.Info("enrolment closed; run starts", "clients", s.usersLocked(), "identities", len(s.enrolled), "parties", s.partiesLocked())
			s.warnParties()
		}
		if started {
			s.order = slices.Sorted(maps.Keys(s.enrolled))
			s.slots = make(map[uint32]int, len(s.order))
			for k, id := range s.order {
				s.slots[id] = k
			}
			s.notify()
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// setRoster tells a method server whose budget split depends on the
// public roster (protocol.RosterSetter) the enrolled count (in users: a
// party counts its users), once enrolment has closed.
func (s *Server) setRoster() error {
	if rs, ok := s.srv.(protocol.RosterSetter); ok {
		return rs.SetRoster(s.usersLocked())
	}
	return nil
}

// publish builds the final model from the server's V and the public
// catalog, stores it and announces the end of the run.
func (s *Server) publish() error {
	raw, err := s.build(true)
	if err != nil {
		return fmt.Errorf("deploy: final model: %w", err)
	}
	if err := s.st.publish(raw); err != nil {
		return err
	}
	s.mu.Lock()
	s.model, s.interim = raw, nil
	s.state = fedv1.RunState_RUN_STATE_DONE
	s.notify()
	s.mu.Unlock()
	s.log.Info("run done; model published", "bytes", len(raw))
	if s.cfg.OnPublish != nil {
		return s.cfg.OnPublish(raw)
	}
	return nil
}

// release publishes an interim model after round (continual release):
// the model the server's state holds now, read by the users covered so
// far. It publishes nothing while the method has no factors yet (dp-ease
// before its first Gram) or no user is covered. The release is
// post-processing of aggregates the server already received, so it costs
// no ε; it is not stored, since a restarted server rebuilds it from its
// snapshot (resume).
func (s *Server) release(round int) error {
	s.mu.Lock()
	n := s.coveredUsers
	s.mu.Unlock()
	if n == 0 {
		return nil
	}
	raw, err := s.build(false)
	if err != nil {
		return fmt.Errorf("deploy: release after round %d: %w", round, err)
	}
	if raw == nil { // no factors yet
		return nil
	}
	s.mu.Lock()
	s.interim = raw
	s.mu.Unlock()
	s.log.Info("model released", "round", round, "users", n, "bytes", len(raw))
	if s.cfg.OnRelease != nil {
		return s.cfg.OnRelease(round, raw)
	}
	return nil
}

// build returns the model file of the server's V, the public catalog,
// the privacy spent so far and, for an interim model, the release it is
// (after the last folded round, read by the users covered so far); an
// interim model of a server without factors yet is nil.
func (s *Server) build(final bool) ([]byte, error) {
	v, dim := s.srv.Factors()
	if v == nil && !final {
		return nil, nil
	}
	s.mu.Lock()
	var rel *model.Release // the final model carries none (model.Model.Release)
	if !final {
		rel = &model.Release{Round: s.srv.Round() - 1, Users: s.coveredUsers}
	}
	s.mu.Unlock()
	m := &model.Model{
		Dim: dim, NumItems: len(s.plan.ItemIDs), V: slices.Clone(v),
		Default: (s.plan.Scale.Min + s.plan.Scale.Max) / 2, Scale: s.plan.Scale, Ranking: s.cfg.Method.Ranks(),
		ItemIDs: s.plan.ItemIDs, ItemTitles: s.plan.Titles,
		Method: s.cfg.Method.Name(), Config: s.cfg.Method.JSON(s.cfg.Config), Privacy: s.spent(),
		Release: rel,
	}
	if ind, ok := s.srv.(protocol.Indicating); ok && len(ind.UserItems())+1 == dim {
		m.UserItems = slices.Clone(ind.UserItems())
	}
	if bs, ok := s.srv.(protocol.Biased); ok {
		// The released mean and item biases, mapped from the scale the
		// server trained on to the catalog's as Fit maps its model.
		if mean, bi, ok := bs.Biases(); ok && len(bi) == m.NumItems {
			m.Mean, m.Default, m.BI = mean, mean, slices.Clone(bi)
			m.Affine(s.cfg.Method.Affine(s.plan.Scale))
		}
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// transport is the Server seen as a protocol.Transport.
type transport Server

func (t *transport) NumClients() int { return len(t.order) }

// SumInputs returns the number of masked vectors in the last masked
// round's sum (protocol.SumInputs), which bounds its arrivals.
func (t *transport) SumInputs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(0, t.maskedInputs)
}

func (t *transport) Close() error { return nil }

// Exchange opens round b, waits until every enrolled client answered or
// the deadline passed with enough answers, and returns the uploads in
// client order.
func (t *transport) Exchange(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	s := (*Server)(t)
	if s.plan.Aggregation == "masked" && b.Words > 0 {
		return s.exchangeMasked(ctx, b)
	}
	var cohort map[uint32]bool
	if s.cohortRun() && b.Phase != protocol.PhaseFinal {
		var err error
		if cohort, err = s.gatherCohort(ctx, b); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.sa, s.maskedInputs, s.skipped = nil, -1, ""
	s.mu.Unlock()
	w := toWireBroadcast(b)
	w.V, w.Aux = slices.Clone(w.V), slices.Clone(w.Aux) // the method may change them after the round
	s.mu.Lock()
	s.refreshOrder()
	n := s.usersLocked() // the floor counts users; uploads are by position
	s.round, s.bc, s.wire, s.open = b.Round, b, w, true
	s.ups = make([]*protocol.Upload, len(s.order))
	s.answered = make([]bool, len(s.order))
	s.nAnswer = 0
	s.rejected = map[string]int{}
	// The round closes when every client it asks answered: every
	// enrolled client, or the cohort. (The final round, which releases
	// nothing, asks every client, and closes at its deadline with those
	// online: the others read the published model.)
	s.cohort, s.expect = cohort, n
	floor := s.cfg.MinParticipants * float64(n)
	if cohort != nil {
		s.expect, floor = len(cohort), float64(s.cohortFloor())
	}
	all := make(chan struct{})
	s.all = all
	s.notify()
	s.mu.Unlock()
	s.met.roundOpened(b.Round)

	timer := time.NewTimer(s.cfg.RoundTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-all:
		case <-timer.C:
			s.mu.Lock()
			got := s.nAnswer
			s.mu.Unlock()
			// The final round releases nothing (uploads are refused in
			// it), so it needs no floor.
			if b.Phase != protocol.PhaseFinal && float64(got) < floor {
				s.log.Warn("round below its minimum at the deadline: not released, waiting on",
					"round", b.Round, "answered", got, "asked", s.expect, "min_fraction", s.cfg.MinParticipants)
				timer.Reset(s.cfg.RoundTimeout)
				continue
			}
		}
		break
	}
	s.mu.Lock()
	s.open, s.closed = false, b.Round
	ups := s.ups
	s.mu.Unlock()
	return ups, nil
}
