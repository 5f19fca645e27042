package deploy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
)

// GetRound returns the open round at once when it is later than after or
// the caller saw round after from another incarnation of the server, and
// otherwise waits, up to Poll, for the next change.
func (s *Server) GetRound(ctx context.Context, req *connect.Request[fedv1.GetRoundRequest]) (*connect.Response[fedv1.GetRoundResponse], error) {
	id, err := s.authenticate(req.Header())
	if err != nil {
		s.met.reject("auth")
		return nil, err
	}
	after, boot, session := int(req.Msg.GetAfter()), req.Msg.GetBoot(), req.Msg.GetSession()
	joined := false
	wait := time.NewTimer(s.cfg.Poll)
	defer wait.Stop()
	for {
		s.mu.Lock()
		resp := &fedv1.GetRoundResponse{State: s.state, Boot: s.boot, EpsTotal: s.epsTotal, Delta: s.delta,
			Enrolled: int32(s.usersLocked()), MinClients: int32(s.cfg.MinClients)}
		ready := s.state == fedv1.RunState_RUN_STATE_DONE
		if s.gather != nil && s.gather.round > after {
			// A cohort being gathered: a client that offers to take part
			// waits, once taken, for the round to open; the others hear
			// of it at once.
			// (A join is answered at once: a process joining many
			// clients must not hold one call per client.)
			if req.Msg.GetJoin() {
				s.join(id, after)
			}
			joined = s.gather.taken[id]
			resp.Gathering, resp.InCohort = s.gatheringOf(), joined
			ready = !joined || req.Msg.GetJoin()
		}
		if s.open && (s.round > after || boot != s.boot || (s.sa != nil && session != "" && s.sa.session != session)) {
			resp.Broadcast, ready = s.wire, true
			resp.Gathering = nil
			resp.InCohort = s.cohort == nil || s.cohort[id]
			if s.sa != nil {
				resp.Secagg = s.sa.plan
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if ready {
			return connect.NewResponse(resp), nil
		}
		select {
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-wait.C:
			return connect.NewResponse(resp), nil
		case <-ch:
		}
	}
}

// admitted is the open round as a client's message for it found it.
type admitted struct {
	pos   int // the client's position in the upload order
	round int
	b     *protocol.Broadcast
	sa    *saRound // the round's secure aggregation (masked rounds)
}

// admit checks, under one lock, that round r is the open one (and, with
// masked, that it runs secure aggregation) and that client id takes part:
// a closed round is late, one not open yet is early (not an error of the
// client's: the round opens later, or again after a restart once the
// server has reloaded its clients; retry), and a stranger is refused.
func (s *Server) admit(id uint32, r int, masked bool) (admitted, error) {
	s.mu.Lock()
	at := admitted{round: s.round, b: s.bc, sa: s.sa}
	open, closed := s.open, s.closed
	pos, member := s.slots[id]
	outside := s.cohort != nil && !s.cohort[id]
	s.mu.Unlock()
	at.pos = pos
	switch {
	case r <= closed:
		return at, s.rejectErr(connect.CodeFailedPrecondition, "late", "round %d is closed", r)
	case r > at.round || !open || (masked && at.sa == nil):
		return at, s.rejectErr(connect.CodeUnavailable, "early", "round %d is not open yet", r)
	case !member:
		return at, s.rejectErr(connect.CodePermissionDenied, "not-member", "client %d is not part of this run", id)
	case outside:
		return at, s.rejectErr(connect.CodePermissionDenied, "not-in-cohort", "client %d is not in the cohort of round %d", id, r)
	}
	return at, nil
}

// rejectErr counts a refused upload by reason and returns its error.
func (s *Server) rejectErr(code connect.Code, reason, format string, a ...any) error {
	s.met.reject(reason)
	s.mu.Lock()
	if s.rejected != nil {
		s.rejected[reason]++
	}
	s.mu.Unlock()
	return connect.NewError(code, fmt.Errorf("upload refused (%s): %s", reason, fmt.Sprintf(format, a...)))
}

// Upload checks one client's answer to the open round and keeps it for
// the round's aggregation. A refused upload changes nothing.
func (s *Server) Upload(ctx context.Context, req *connect.Request[fedv1.UploadRequest]) (*connect.Response[fedv1.UploadResponse], error) {
	id, err := s.authenticate(req.Header())
	if err != nil {
		s.met.reject("auth")
		return nil, err
	}
	msg := req.Msg
	if msg.GetMeta().GetSeeded() && !s.plan.TestMode {
		return nil, s.rejectErr(connect.CodePermissionDenied, "seeded", "drawn from seeded streams, and this server is not in test mode")
	}
	if msg.GetMasked() != nil {
		return nil, s.rejectErr(connect.CodeUnimplemented, "masked", "this server does not run secure aggregation")
	}
	at, err := s.admit(id, int(msg.GetRound()), false)
	if err != nil {
		return nil, err
	}
	k, round, b := at.pos, at.round, at.b
	u := fromWireUpload(int(id), msg)
	if reason, err := s.check(b, u); err != nil {
		return nil, s.rejectErr(connect.CodeInvalidArgument, reason, "%v", err)
	}
	s.mu.Lock()
	w := s.weightOf(id)
	s.mu.Unlock()
	if u != nil && w > 1 {
		// A plain upload is one user's: read or summed, it would count
		// once for the party's w users.
		return nil, s.rejectErr(connect.CodeInvalidArgument, "party", "client %d answers for %d users as one party, which sends masked sums only, not a plain upload", id, w)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.round != round {
		s.met.reject("late")
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("upload refused (late): round %d closed", round))
	}
	if s.answered[k] {
		s.met.reject("duplicate")
		s.rejected["duplicate"]++
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("upload refused (duplicate): client %d already answered round %d", id, round))
	}
	s.ups[k], s.answered[k] = u, true
	s.nAnswer += w
	if s.nAnswer == s.expect {
		close(s.all)
	}
	s.met.accept()
	return connect.NewResponse(&fedv1.UploadResponse{}), nil
}

// check validates u (nil: an empty answer) against broadcast b and the
// server's bounds, returning the reason of a refusal.
func (s *Server) check(b *protocol.Broadcast, u *protocol.Upload) (string, error) {
	if u == nil {
		return "", nil
	}
	if err := u.Validate(b); err != nil {
		return "shape", err
	}
	if b.Phase == protocol.PhaseSetup && u.Values != nil {
		return "shape", fmt.Errorf("values in a setup round")
	}
	if b.Phase == protocol.PhaseFinal {
		return "shape", fmt.Errorf("an upload in the final round")
	}
	if i, dup := duplicate(u.Items); dup {
		return "shape", fmt.Errorf("item %d named twice", i)
	}
	for k, c := range u.Counts {
		if c < 0 || c > 1 {
			return "range", fmt.Errorf("count %d of item %d: one client counts 0 or 1 per item", c, u.Items[k])
		}
	}
	lim := s.cfg.MaxAbs
	for k, v := range u.Values {
		if a := math.Abs(float64(v)); !(a <= lim) { // also NaN
			if math.IsNaN(a) || math.IsInf(a, 0) {
				return "non-finite", fmt.Errorf("value %d is %v", k, v)
			}
			return "range", fmt.Errorf("value %d = %g outside ±%g", k, v, lim)
		}
	}
	for k, v := range u.Scalars {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "non-finite", fmt.Errorf("scalar %d is %v", k, v)
		}
	}
	return "", nil
}

// duplicate returns an item named twice in items. Clients send their
// items in increasing order; others are checked on a sorted copy.
func duplicate(items []int32) (int32, bool) {
	sorted := true
	for k := 1; k < len(items); k++ {
		if items[k] <= items[k-1] {
			sorted = false
			break
		}
	}
	if sorted {
		return 0, false
	}
	c := slices.Clone(items)
	slices.Sort(c)
	for k := 1; k < len(c); k++ {
		if c[k] == c[k-1] {
			return c[k], true
		}
	}
	return 0, false
}

// GetModel returns the final model once the run is done; with interim,
// the latest interim release (continual release) before that.
func (s *Server) GetModel(ctx context.Context, req *connect.Request[fedv1.GetModelRequest]) (*connect.Response[fedv1.GetModelResponse], error) {
	if _, err := s.authenticate(req.Header()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	m := s.model
	if m == nil && req.Msg.GetInterim() {
		m = s.interim
	}
	s.mu.Unlock()
	if m == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the run is not done"))
	}
	return connect.NewResponse(&fedv1.GetModelResponse{Model: m}), nil
}
