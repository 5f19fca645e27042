package secagg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Errors of Session.Add: the message's step is closed, not open yet, or
// the client sent it already. None of them changes the session.
var (
	ErrLate      = errors.New("secagg: step closed")
	ErrEarly     = errors.New("secagg: step not open yet")
	ErrDuplicate = errors.New("secagg: message already sent")
	// ErrNoReply is returned (wrapped) by Session.Reply for a client that
	// the closed step left out: it dropped out, or was excluded.
	ErrNoReply = errors.New("secagg: no reply for this client")
)

// An Aggregator sums the masked inputs of a session apart from the
// Server that runs its other steps (package shard sums them on NATS
// JetStream); the Server still takes the unmasking shares.
type Aggregator interface {
	// AddMaskedInput takes one client's masked input. It may block (an
	// upload); the session has taken the client's place in the step
	// first, so a second message of the same client is a duplicate.
	AddMaskedInput(ctx context.Context, m *MaskedInput) error
	// CloseInput closes the masked-input step and returns the unmasking
	// requests (Server.FinishMaskedInput).
	CloseInput(ctx context.Context) ([]*UnmaskRequest, error)
	// Sum returns the unmasked sum once the Server holds the shares
	// (Server.Result).
	Sum(ctx context.Context) ([]uint32, error)
}

// Session is the server's side of a session over any transport, for
// clients that each send a Message and wait for their Reply: Add takes a
// client's message of the open step; the driver closes the step (Await
// then Close) and opens the next (Release); Reply, called by the
// client's side of the transport, waits for the step to be released and
// returns that client's answer. It owns the step order, the one message
// per client and step, and the deadlines; the caller owns identities,
// the wire and what it records between Close and Release. All methods
// are safe for concurrent use.
type Session struct {
	p   Params
	srv *Server
	agg Aggregator // nil: srv sums the masked inputs

	mu      sync.Mutex
	step    Step // the open step, NumSteps when done
	expect  int  // clients expected in the open step
	got     int
	seen    map[uint32]bool // positions that sent in the open step
	full    chan struct{}   // closed when got == expect
	done    [NumSteps]chan struct{}
	replies [NumSteps]map[uint32]Reply
	inputs  []uint32 // positions whose masked input was taken
	uploads sync.WaitGroup
	sum     []uint32
	err     error
}

// NewSession returns a session of srv's round, expecting every one of
// its N clients in the first step. agg, when not nil, sums the masked
// inputs in srv's place (srv must be the server agg unmasks with).
func NewSession(srv *Server, agg Aggregator) *Session {
	s := &Session{p: srv.p, srv: srv, agg: agg, step: First(srv.p.Active), expect: srv.p.N,
		seen: map[uint32]bool{}, full: make(chan struct{})}
	for i := range s.done {
		s.done[i] = make(chan struct{})
	}
	return s
}

// Open returns the step open to clients' messages, NumSteps once the
// last has closed.
func (s *Session) Open() Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// Inputs returns how many masked inputs the session has taken.
func (s *Session) Inputs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inputs)
}

// refusal says, with s.mu held, why position me may not send its
// message of step now; nil when it may.
func (s *Session) refusal(me uint32, step Step) error {
	switch {
	case s.step > step:
		return fmt.Errorf("%w: step %d of the round is closed", ErrLate, step)
	case s.step != step:
		return fmt.Errorf("%w: step %d is not open yet", ErrEarly, step)
	case s.seen[me]:
		return fmt.Errorf("%w: position %d already sent step %d", ErrDuplicate, me, step)
	}
	return nil
}

// taken counts position me's message, with s.mu held.
func (s *Session) taken(me uint32, step Step) {
	s.seen[me] = true
	s.got++
	if step == StepMasked {
		s.inputs = append(s.inputs, me)
	}
	if s.got == s.expect {
		close(s.full)
	}
}

// Add takes m, its sender's message of the open step. The step check,
// the hand-over to the server and the count happen under one lock, so
// that a message is either in the step (and in the sum) or refused,
// never half. It returns ErrLate, ErrEarly or ErrDuplicate (wrapped) for
// a message the step refuses, the Server's error for one it does not
// accept, and with an Aggregator its error for a masked input: the
// client's place is then taken all the same, and it is out of the
// round, as a dropout (letting it send again could leave part of its
// first vector stored under the digest of its second).
func (s *Session) Add(ctx context.Context, m Message) error {
	me, step := m.Sender(), m.Step()
	if mi, ok := m.(*MaskedInput); ok && s.agg != nil {
		s.mu.Lock()
		if err := s.refusal(me, step); err != nil {
			s.mu.Unlock()
			return err
		}
		s.seen[me] = true
		s.uploads.Add(1)
		s.mu.Unlock()
		err := s.agg.AddMaskedInput(ctx, mi)
		s.mu.Lock()
		if err == nil {
			s.taken(me, step)
		}
		s.mu.Unlock()
		s.uploads.Done()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refusal(me, step); err != nil {
		return err
	}
	var err error
	switch m := m.(type) {
	case *KeyCommit:
		err = s.srv.AddCommit(m)
	case *AdvertiseKeys:
		err = s.srv.AddKeys(m)
	case *ShareKeys:
		err = s.srv.AddShares(m)
	case *ShareCheck:
		err = s.srv.AddCheck(m)
	case *MaskedInput:
		err = s.srv.AddMaskedInput(m)
	case *SurvivorSig:
		err = s.srv.AddConsistency(m)
	case *UnmaskResponse:
		err = s.srv.AddUnmask(m)
	default:
		err = fmt.Errorf("%w: a %T", ErrMessage, m)
	}
	if err == nil || errors.Is(err, ErrCheat) || errors.Is(err, ErrIdentity) {
		// A message refused as proof of a lie, or as a certificate or
		// signature that does not verify, ends its sender's part: the
		// step waits for it no longer.
		s.taken(me, step)
	}
	return err
}

// Await waits until every client expected in the open step has sent,
// or, at a deadline (every timeout), enough have for the protocol to go
// on: Params.MinClients masked inputs, or in the last step the shares
// that unmask the sum (Server.Ready). Short of that it waits up to
// waits more deadlines; the server refuses to go on at Close if still
// too few. log, when not nil, hears of a step closed at its deadline.
func (s *Session) Await(ctx context.Context, timeout time.Duration, waits int, log *slog.Logger) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for w := 0; ; w++ {
		s.mu.Lock()
		full, got, want, step := s.full, s.got, s.expect, s.step
		s.mu.Unlock()
		if got >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-full:
			return nil
		case <-timer.C:
		}
		s.mu.Lock()
		got = s.got
		s.mu.Unlock()
		enough := got >= s.p.MinClients
		if step == StepReveal {
			enough = s.srv.Ready()
		}
		if enough || w >= waits {
			if log != nil {
				log.Warn("secure aggregation step closed at its deadline", "step", int(step), "sent", got, "expected", want, "floor", s.p.MinClients)
			}
			return nil
		}
		if log != nil {
			log.Warn("secure aggregation step below the round's floor at its deadline: waiting on", "step", int(step), "sent", got, "floor", s.p.MinClients)
		}
		timer.Reset(timeout)
	}
}

// Close closes the open step: later messages of it are refused as late,
// and the server computes every client's reply, which Release then
// hands out. It returns the step closed. An error of the server (too
// few clients, a failed unmasking) ends the session: the caller should
// Abort it. With an Aggregator, Close waits for the masked inputs being
// uploaded, and every admitted input counts, whatever its sender heard.
// ctx bounds the Aggregator's work.
func (s *Session) Close(ctx context.Context) (Step, error) {
	s.mu.Lock()
	st := s.step
	if st >= NumSteps || s.err != nil {
		s.mu.Unlock()
		return st, fmt.Errorf("%w: Close of a session that is over", ErrState)
	}
	s.step = st + 1 // refuse late messages of this step from now on
	s.mu.Unlock()
	var out map[uint32]Reply
	var err error
	switch st {
	case StepCommit:
		var set [32]byte
		if set, err = s.srv.FinishCommit(); err == nil {
			out = make(map[uint32]Reply)
			s.mu.Lock()
			for me := range s.seen {
				out[me] = &CommitSet{To: me, Hash: set} // every committed client reveals
			}
			s.mu.Unlock()
		}
	case StepKeys:
		var kb []*KeysBroadcast
		kb, err = s.srv.FinishKeys()
		out = byRecipient(kb)
	case StepShares:
		var sd []*SharesDelivery
		sd, err = s.srv.FinishShares()
		out = byRecipient(sd)
	case StepCheck:
		var ex []*SharesDelivery
		if ex, err = s.srv.FinishCheck(); err == nil {
			out = make(map[uint32]Reply, len(ex))
			for _, d := range ex {
				out[d.To] = &Exclusion{To: d.To, Excluded: d.Excluded}
			}
		}
	case StepMasked:
		var ur []*UnmaskRequest
		if s.agg != nil {
			s.uploads.Wait() // the step is closed: no upload starts
			if ur, err = s.agg.CloseInput(ctx); err == nil {
				s.mu.Lock()
				s.inputs = s.srv.Survivors() // admitted, whatever their callers heard
				s.mu.Unlock()
			}
		} else {
			ur, err = s.srv.FinishMaskedInput()
		}
		out = byRecipient(ur)
	case StepConsistency:
		var ur []*UnmaskRequest
		ur, err = s.srv.FinishConsistency()
		out = byRecipient(ur)
	case StepReveal:
		var sum []uint32
		if s.agg != nil {
			sum, err = s.agg.Sum(ctx)
		} else {
			sum, err = s.srv.Result()
		}
		if err == nil {
			out = make(map[uint32]Reply, len(s.seen))
			s.mu.Lock()
			for me := range s.seen {
				out[me] = &Done{To: me}
			}
			s.sum = sum
			s.mu.Unlock()
		}
	}
	if err != nil {
		return st, err
	}
	s.mu.Lock()
	s.replies[st] = out
	s.mu.Unlock()
	return st, nil
}

func byRecipient[R Reply](rs []R) map[uint32]Reply {
	out := make(map[uint32]Reply, len(rs))
	for _, r := range rs {
		out[r.Recipient()] = r
	}
	return out
}

// Release hands out the replies of the step Close closed and opens the
// next step, expecting the clients that got a reply. The next step opens
// before any client hears its reply, so none finds it not open yet.
func (s *Session) Release() {
	s.mu.Lock()
	st := s.step - 1
	if st < 0 || s.replies[st] == nil || s.err != nil {
		s.mu.Unlock()
		return
	}
	s.expect, s.got, s.seen, s.full = len(s.replies[st]), 0, map[uint32]bool{}, make(chan struct{})
	s.step = st.Next(s.p.Active)
	s.mu.Unlock()
	closeOnce(s.done[st])
}

// closeOnce closes ch unless it is closed (Release and Abort may both
// close a step's channel).
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Reply waits until step has been released and returns position me's
// reply to its message of it: ErrNoReply (wrapped) when the step left it
// out, the session's error when it was aborted, ctx's when ctx ends
// first.
func (s *Session) Reply(ctx context.Context, step Step, me uint32) (Reply, error) {
	if step < 0 || step >= NumSteps {
		return nil, fmt.Errorf("%w: step %d", ErrState, step)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done[step]:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	r, ok := s.replies[step][me]
	if !ok {
		return nil, fmt.Errorf("%w: position %d is not in the %s step's answers", ErrNoReply, me, step)
	}
	return r, nil
}

// Abort ends the session with nothing released: every client waiting
// for a reply, and every later Reply, gets err. An aborted session stays
// aborted (the first error is kept).
func (s *Session) Abort(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	for _, d := range s.done {
		closeOnce(d)
	}
}

// Err returns the error the session was aborted with, nil if it was
// not.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Result returns the unmasked sum once the last step has closed.
func (s *Session) Result() ([]uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sum == nil {
		return nil, fmt.Errorf("%w: no sum before the last step closed", ErrState)
	}
	return s.sum, nil
}
