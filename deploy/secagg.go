package deploy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/shard"
)

// streamGraph labels the public seeds of the rounds' neighbour graphs.
const streamGraph = 0x47524150 // "GRAP"

// Collusion is the fraction of clients a server may collude with that the
// neighbour graph and threshold of masked rounds are provisioned for.
const Collusion = 0.1

// The steps of a masked round, as the server runs them.
const (
	stepCommit  = iota // KeyCommit: the active protocol's commitments
	stepKeys           // AdvertiseKeys (in the active protocol, the reveals)
	stepShares         // ShareKeys
	stepCheck          // ShareCheck: neighbours whose shares failed
	stepMasked         // MaskedInput
	stepConsist        // SurvivorSig: the active protocol's consistency round
	stepReveal         // UnmaskResponse
	numSteps
)

// Policy of masked rounds.
const (
	// maxWaits bounds how many extra deadlines a step waits, below the
	// round's floor of participants, before the session gives up.
	maxWaits = 3
	// maxSessions bounds the sessions of one round that fail before any
	// masked vector was taken (each is retried under fresh keys).
	maxSessions = 5
	// banReports is how many distinct clients must report a client's
	// shares in one round for the server to ban it: one report only
	// excludes it from that round, since one lying client could
	// otherwise ban its honest neighbours.
	banReports = 2
)

// errSetupLost is returned by Run when the setup round's masked vectors
// were taken and its sum was lost (a crash between the masked step and
// the release, or too few clients): the setup sum cannot be recomputed
// without aggregating the same vectors again, which the clients refuse.
var errSetupLost = errors.New("deploy: the setup round's secure aggregation failed after masked vectors were sent; the run cannot continue without re-aggregating them — start a new run with a new --state")

// saRound is the server's state of one secure-aggregation session of a
// round: five steps (keys, shares, share check, masked vectors, revealed
// shares), each closing when every client expected in it has sent, or at
// the deadline.
type saRound struct {
	p       secagg.Params
	srv     *secagg.Server
	plan    *fedv1.SecAggPlan
	session string
	slot    map[uint32]uint32 // client id → position in the session
	floor   int               // masked vectors the round needs to be released
	step    int               // the open step, numSteps when done
	expect  int               // clients expected in the open step
	got     int
	seen    map[uint32]bool // positions that sent in the open step
	full    chan struct{}   // closed when got == expect
	done    [numSteps]chan struct{}
	keys    map[uint32]*secagg.KeysBroadcast
	shares  map[uint32]*secagg.SharesDelivery
	checked map[uint32]*secagg.SharesDelivery // the check's answers: Excluded
	unmask  map[uint32]*secagg.UnmaskRequest
	signed  map[uint32]*secagg.UnmaskRequest // active: after the consistency round
	// committed is the active protocol's opened commitment set on the
	// wire, and commitSet the hash of the commitments (both the same for
	// every client).
	committed, commitSet []byte
	inputs               []uint32 // positions whose masked vector was taken
	err                  error
	// co is the session's coordinator when the aggregation is sharded
	// (Sharded), shardRound its shard round, uploads the masked vectors
	// being published.
	co         *shard.Coordinator
	shardRound uint64
	uploads    sync.WaitGroup
}

// exchangeMasked runs round b through SecAgg+ with the enrolled clients
// that are not banned and returns the unmasked sum as one upload, or no
// upload when the round is skipped. One masked input per client per
// round, ever: a session that fails before any masked vector was taken is
// retried under fresh keys; once the masked step has opened (recorded
// durably first), the round is either released from that session or
// skipped for good, across restarts too. s.mu is not held.
func (s *Server) exchangeMasked(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	defer func() {
		s.mu.Lock()
		s.open, s.closed = false, b.Round
		s.mu.Unlock()
	}()
	s.calibrate(b)
	rec, err := s.st.masked(b.Round)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		s.mu.Lock()
		s.sa, s.skipped = nil, ""
		s.mu.Unlock()
		if rec.Sum != nil {
			// The session finished before the restart: release its sum.
			s.log.Info("masked round finished before a restart; releasing its stored sum", "round", b.Round, "inputs", rec.Inputs)
			s.mu.Lock()
			s.round, s.nAnswer, s.maskedInputs = b.Round, rec.Inputs, rec.Inputs
			s.ups, s.rejected = nil, map[string]int{}
			s.answered = make([]bool, len(s.order))
			for _, id := range rec.Survivors {
				if k, ok := s.slots[id]; ok {
					s.answered[k] = true
				}
			}
			s.mu.Unlock()
			return []*protocol.Upload{{Client: -1, Round: b.Round, Words: rec.Sum}}, nil
		}
		return s.skipMasked(b, "its masked vectors were taken in a session that a restart interrupted")
	}
	for attempt := 0; ; attempt++ {
		up, retry, err := s.maskedSession(ctx, b, attempt)
		switch {
		case err != nil:
			return nil, err
		case up != nil:
			return up, nil
		case !retry:
			return s.skipMasked(b, "secure aggregation failed after masked vectors were sent")
		case attempt+1 >= maxSessions:
			return s.skipMasked(b, fmt.Sprintf("%d sessions failed", maxSessions))
		}
	}
}

// calibrate sets, on the method's own broadcast b (its sum bounds and
// noise coverage read them, and the clients get them), the quantities
// the clients' noise shares are drawn for. ParamMinShare provisions for
// dropouts: each client draws its share as if only this fraction of its
// peers took part, so that any such fraction of shares still sums to the
// calibrated noise. Under the active protocol, ParamRoster makes the
// clients calibrate by a roster they pin rather than by counts they
// cannot check: every client adds a share drawn for ⌊ρ·R⌋ clients to
// every noised coordinate. R is the enrolled clients, which the clients
// check against the certified roster (Session.checkBroadcast).
func (s *Server) calibrate(b *protocol.Broadcast) {
	if s.cfg.MinParticipants >= 1 && !s.cfg.ActiveSecAgg {
		return
	}
	if b.Params == nil {
		b.Params = map[string]float64{}
	}
	if s.cfg.MinParticipants < 1 {
		b.Params[protocol.ParamMinShare] = s.cfg.MinParticipants
	}
	if s.cfg.ActiveSecAgg {
		s.mu.Lock()
		enrolled := len(s.order)
		s.mu.Unlock()
		b.Params[protocol.ParamRoster] = float64(enrolled)
	}
}

// skipMasked ends round b with nothing released: the method folds an
// empty round. A setup round cannot be skipped (errSetupLost).
func (s *Server) skipMasked(b *protocol.Broadcast, why string) ([]*protocol.Upload, error) {
	if b.Phase == protocol.PhaseSetup {
		return nil, errSetupLost
	}
	s.log.Warn("masked round skipped: nothing released", "round", b.Round, "why", why)
	s.mu.Lock()
	s.skipped = why
	s.nAnswer, s.maskedInputs = 0, 0
	s.ups, s.answered = nil, nil
	if s.rejected == nil {
		s.rejected = map[string]int{}
	}
	s.mu.Unlock()
	s.met.skip()
	return []*protocol.Upload{}, nil
}

// maskedSession runs one session of round b. It returns the sum, or nil
// and whether the round may be retried (no masked vector was taken).
func (s *Server) maskedSession(ctx context.Context, b *protocol.Broadcast, attempt int) ([]*protocol.Upload, bool, error) {
	s.mu.Lock()
	var roster []uint32
	for _, id := range s.order {
		if !s.banned[id] && (s.members == nil || s.members[id] || b.Phase == protocol.PhaseSetup) {
			roster = append(roster, id)
		}
	}
	enrolled := len(s.order)
	s.mu.Unlock()
	n := len(roster)
	floor := max(1, int(math.Ceil(s.cfg.MinParticipants*float64(enrolled)-1e-9)))
	if n < 2 {
		return nil, false, fmt.Errorf("deploy: round %d: %s not banned of %d enrolled; secure aggregation needs at least 2 (the sum of one vector is that vector): start the run with --min-clients of 2 or more",
			b.Round, clientsWord(n), enrolled)
	}
	if n < floor {
		return nil, false, fmt.Errorf("deploy: round %d: %d clients not banned of %d enrolled, below the floor of %d (--min-participants %g); secure aggregation cannot release anything",
			b.Round, n, enrolled, floor, s.cfg.MinParticipants)
	}
	choose := secagg.ChooseParams
	if s.cfg.ActiveSecAgg {
		choose = secagg.ChooseParamsActive
	}
	k, t, err := choose(n, secagg.ProvisionedDropout(s.cfg.MinParticipants), Collusion)
	if err != nil {
		return nil, false, fmt.Errorf("deploy: secure aggregation parameters for %d clients: %w", n, err)
	}
	session := fmt.Sprintf("%s.%d", s.boot, attempt)
	// The graph's public seed is fresh for every session (a session's
	// keys are fresh too).
	seed := rng.Seed(s.plan.Seed, streamGraph, uint64(b.Round))
	seed = sha256.Sum256(append(seed[:], session...))
	p := secagg.Params{N: n, K: k, T: t, Bits: b.Bits, Len: b.Words, Seed: seed, MinClients: floor, Active: s.cfg.ActiveSecAgg}
	var (
		srv        *secagg.Server
		co         *shard.Coordinator
		shardRound uint64
		released   bool
	)
	if s.cfg.Sharded != nil {
		if co, shardRound, err = s.openShard(ctx, p); err != nil {
			return nil, false, fmt.Errorf("deploy: round %d: sharded aggregation: %w", b.Round, err)
		}
		srv = co.Server()
		// A session that ends without a sum is aborted, so the
		// aggregators go on to the next shard round.
		defer func() {
			if !released {
				actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_ = co.Abort(actx, fmt.Errorf("session %s of round %d ended without a sum", session, b.Round))
				_ = co.Purge(actx) // the pieces published, if any
				cancel()
			}
		}()
	} else if srv, err = secagg.NewServer(p); err != nil {
		return nil, false, err
	}
	sa := &saRound{p: p, srv: srv, session: session, floor: floor, expect: n, seen: map[uint32]bool{}, full: make(chan struct{}), step: stepKeys,
		slot: make(map[uint32]uint32, n),
		plan: &fedv1.SecAggPlan{Order: roster, Degree: uint32(k), Threshold: uint32(t), Bits: uint32(b.Bits),
			Words: uint32(b.Words), Seed: p.Seed[:], Session: session, Active: p.Active},
		co: co, shardRound: shardRound}
	for pos, id := range roster {
		sa.slot[id] = uint32(pos)
	}
	for i := range sa.done {
		sa.done[i] = make(chan struct{})
	}
	if p.Active {
		sa.step = stepCommit
	}
	w := toWireBroadcast(b)
	w.V, w.Aux = clone(w.V), clone(w.Aux)
	s.mu.Lock()
	s.round, s.bc, s.wire, s.open, s.sa, s.skipped = b.Round, b, w, true, sa, ""
	s.ups = make([]*protocol.Upload, enrolled)
	s.answered = make([]bool, enrolled)
	s.nAnswer, s.maskedInputs = 0, 0
	s.rejected = map[string]int{}
	s.notify()
	s.mu.Unlock()
	s.met.roundOpened(b.Round)
	defer func() { // the round stays open to a retry: exchangeMasked closes it
		s.mu.Lock()
		s.open = false
		s.mu.Unlock()
	}()

	// However the session ends, no client stays waiting in it: a session
	// left early (the server stopping) releases its waiters with an error.
	defer func() {
		s.mu.Lock()
		open := sa.err == nil && sa.step < numSteps
		s.mu.Unlock()
		if open {
			s.abort(sa, b.Round, errors.New("the server is stopping"))
		}
	}()
	sent := false // a masked vector may have been taken
	fail := func(step int, err error) ([]*protocol.Upload, bool, error) {
		s.abort(sa, b.Round, err)
		s.log.Warn("secure aggregation session failed; nothing released", "round", b.Round, "session", session, "step", step, "err", err)
		return nil, !sent, nil
	}
	var sum []uint32
	for step := range numSteps {
		if (step == stepCommit || step == stepConsist) && !p.Active {
			s.mu.Lock()
			sa.step = step + 1
			s.mu.Unlock()
			close(sa.done[step])
			continue
		}
		if err := s.awaitStep(ctx, sa, step); err != nil {
			return nil, false, err
		}
		s.mu.Lock()
		sa.step = step + 1 // refuse late messages of this step from now on
		s.mu.Unlock()
		var next int
		switch step {
		case stepCommit:
			set, err := srv.FinishCommit()
			if err != nil {
				return fail(step, err)
			}
			sa.commitSet = set[:]
			s.mu.Lock()
			next = sa.got // every committed client reveals
			s.mu.Unlock()
		case stepKeys:
			kb, err := srv.FinishKeys()
			if err != nil {
				return fail(step, err)
			}
			sa.keys = byRecipient(kb, func(m *secagg.KeysBroadcast) uint32 { return m.To })
			if len(kb) > 0 && p.Active {
				sa.committed = packCommitted(kb[0].Committed)
			}
			next = len(kb)
		case stepShares:
			sd, err := srv.FinishShares()
			if err != nil {
				return fail(step, err)
			}
			sa.shares = byRecipient(sd, func(m *secagg.SharesDelivery) uint32 { return m.To })
			next = len(sd)
		case stepCheck:
			ex, err := srv.FinishCheck()
			s.banReported(sa, b.Round, srv.Reports())
			if err != nil {
				return fail(step, err)
			}
			sa.checked = byRecipient(ex, func(m *secagg.SharesDelivery) uint32 { return m.To })
			next = len(ex)
		case stepMasked:
			var ur []*secagg.UnmaskRequest
			if co != nil {
				sa.uploads.Wait() // the step is closed: no upload starts
				ur, err = co.CloseInput(ctx)
				if ctx.Err() != nil {
					return nil, false, ctx.Err()
				}
				s.mu.Lock()
				sa.inputs = srv.Survivors() // admitted, whatever their callers heard
				s.mu.Unlock()
			} else {
				ur, err = srv.FinishMaskedInput()
			}
			if err != nil {
				return fail(step, err)
			}
			sa.unmask = byRecipient(ur, func(m *secagg.UnmaskRequest) uint32 { return m.To })
			next = len(ur)
		case stepConsist:
			ur, err := srv.FinishConsistency()
			if err != nil {
				return fail(step, err)
			}
			sa.signed = byRecipient(ur, func(m *secagg.UnmaskRequest) uint32 { return m.To })
			next = len(ur)
		case stepReveal:
			if co != nil {
				// The aggregators' shards of the sum, bit for bit
				// Result's; they wait as long as a step may.
				fctx, cancel := context.WithTimeout(ctx, time.Duration(1+maxWaits)*s.cfg.RoundTimeout)
				sum, err = co.Finish(fctx)
				cancel()
				if ctx.Err() != nil {
					return nil, false, ctx.Err()
				}
			} else {
				sum, err = srv.Result()
			}
			if err != nil {
				return fail(step, err)
			}
			survivors := make([]uint32, 0, len(sa.inputs))
			for _, pos := range srv.Survivors() {
				survivors = append(survivors, roster[pos])
			}
			if err := s.st.putMasked(b.Round, &maskedRecord{Session: session, Sum: sum, Inputs: len(sa.inputs), Survivors: survivors}); err != nil {
				return nil, false, err
			}
			if s.testHook != nil {
				s.testHook("sum", b.Round, sum)
			}
		}
		if nextStep(step, p.Active) == stepMasked {
			// Record that masked vectors may now be sent, before any
			// client hears the answer that lets it send one: a restart
			// then never opens another session of this round.
			if err := s.st.putMasked(b.Round, &maskedRecord{Session: session}); err != nil {
				return nil, false, err
			}
			sent = true
			if s.testHook != nil {
				s.testHook("masked", b.Round, nil)
			}
		}
		s.mu.Lock()
		sa.expect, sa.got, sa.seen, sa.full = next, 0, map[uint32]bool{}, make(chan struct{})
		// Open the step the clients send next before they hear this
		// one's answer, past the active protocol's steps when they do
		// not run: a client never finds its next step not open yet
		// (before, a fast client's reveal could arrive while the skipped
		// consistency step was still open, be refused as early and drop
		// the client from the round, which then waited out its deadline).
		sa.step = nextStep(step, p.Active)
		if step == stepMasked {
			for _, pos := range srv.Survivors() {
				s.answered[s.slots[roster[pos]]] = true
			}
			s.nAnswer, s.maskedInputs = len(sa.inputs), len(sa.inputs)
		}
		s.mu.Unlock()
		close(sa.done[step])
		if s.testHook != nil {
			s.testHook(fmt.Sprintf("answered step %d", step), b.Round, nil)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if co != nil {
		released, s.shardDone = true, shardRound
		if err := co.Purge(ctx); err != nil {
			s.log.Warn("purging a sharded round", "round", b.Round, "shard_round", shardRound, "err", err)
		}
	}
	return []*protocol.Upload{{Client: -1, Round: b.Round, Words: sum}}, false, nil
}

// banReported bans every client that banReports or more clients reported
// in this round's share check; a client reported once is only excluded
// from this round.
func (s *Server) banReported(sa *saRound, round int, reports map[uint32][]uint32) {
	for pos, by := range reports {
		id := sa.plan.Order[pos]
		if len(by) < banReports {
			s.log.Warn("client excluded from the round: a neighbour reported its shares", "round", round, "client", id, "reporters", len(by))
			continue
		}
		s.ban(id, fmt.Sprintf("round %d: %d neighbours reported its shares as failing authentication", round, len(by)))
	}
}

// ban excludes client id from every later round, durably.
func (s *Server) ban(id uint32, why string) {
	s.mu.Lock()
	already := s.banned[id]
	if !already {
		s.banned[id] = true
	}
	s.mu.Unlock()
	if already {
		return
	}
	s.log.Warn("client banned", "client", id, "why", why)
	s.met.ban()
	if err := s.st.putBan(id, why); err != nil {
		s.log.Error("storing a ban", "client", id, "err", err)
	}
}

// awaitStep waits until every expected client sent its message of step,
// or the deadline passed with enough of them for the protocol to go on:
// the round's floor, or in the last step the shares that unmask the sum.
// Short of that it waits up to maxWaits more deadlines (the secagg server
// then refuses to go on).
func (s *Server) awaitStep(ctx context.Context, sa *saRound, step int) error {
	timer := time.NewTimer(s.cfg.RoundTimeout)
	defer timer.Stop()
	for waits := 0; ; waits++ {
		s.mu.Lock()
		full, got, want := sa.full, sa.got, sa.expect
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
		got = sa.got
		s.mu.Unlock()
		// Enough to go on: the floor of vectors, or, when revealing,
		// the shares that unmask the sum.
		enough := got >= sa.floor
		if step == stepReveal {
			enough = sa.srv.Ready()
		}
		if enough || waits >= maxWaits {
			s.log.Warn("secure aggregation step closed at its deadline", "step", step, "sent", got, "expected", want, "floor", sa.floor)
			return nil
		}
		s.log.Warn("secure aggregation step below the round's floor at its deadline: waiting on", "step", step, "sent", got, "floor", sa.floor)
		timer.Reset(s.cfg.RoundTimeout)
	}
}

// abort ends a session whose secure aggregation failed: nothing is
// released, and every client waiting in it gets the error.
func (s *Server) abort(sa *saRound, round int, err error) {
	s.mu.Lock()
	sa.err = fmt.Errorf("deploy: round %d: secure aggregation aborted, nothing released: %w", round, err)
	s.mu.Unlock()
	for _, d := range sa.done {
		select {
		case <-d:
		default:
			close(d)
		}
	}
}
