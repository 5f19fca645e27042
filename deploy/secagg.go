package deploy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
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

// Policy of masked rounds.
const (
	// maxWaits bounds how many extra deadlines a step waits, below the
	// round's floor of participants, before the session gives up.
	maxWaits = 3
	// maxSessions bounds the sessions of one round that fail before any
	// masked vector was taken (each is retried under fresh keys).
	maxSessions = 5
)

// errSetupLost is returned by Run when the setup round's masked vectors
// were taken and its sum was lost (a crash between the masked step and
// the release, or too few clients): the setup sum cannot be recomputed
// without aggregating the same vectors again, which the clients refuse.
var errSetupLost = errors.New("deploy: the setup round's secure aggregation failed after masked vectors were sent; the run cannot continue without re-aggregating them — start a new run with a new --state")

// saRound is one secure-aggregation session of a round: the secagg
// session that runs its steps, and what the API needs to reach it.
type saRound struct {
	p       secagg.Params
	ses     *secagg.Session
	plan    *fedv1.SecAggPlan
	session string
	slot    map[uint32]uint32 // client id → position in the session
	// committed is the active protocol's opened commitment set on the
	// wire, the same for every client, packed once.
	committed []byte
	packOnce  sync.Once
	// co is the session's coordinator when the aggregation is sharded
	// (Sharded), shardRound its shard round.
	co         *shard.Coordinator
	shardRound uint64
	// pins holds the digest of each position's masked vector in a
	// sharded session: the first that a front-end asked to publish
	// (ShardTicket) or that the server took to publish itself (pin).
	pinMu sync.Mutex
	pins  map[uint32][32]byte
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
	s.mu.Lock()
	s.cohort = nil
	s.mu.Unlock()
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
	// A cohort run gathers the round's cohort once: a session that fails
	// before any masked vector was taken is retried with the same cohort
	// (less the clients it proved to lie or that sit out).
	if s.cohortRun() {
		cohort, err := s.gatherCohort(ctx, b)
		if errors.Is(err, errCohortShort) {
			return s.skipMasked(b, err.Error())
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.cohort = cohort
		s.mu.Unlock()
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
// check against the certified roster (Session.checkBroadcast), in users:
// a party enrolled for w users counts w.
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
		roster := s.usersLocked()
		s.mu.Unlock()
		if s.cohortRun() {
			roster = s.part.Cohort // a round's sum holds one cohort
		}
		b.Params[protocol.ParamRoster] = float64(roster)
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
	var weights []int // the users of each position (1 but for a party)
	if s.sitOutRound != b.Round {
		s.sitOut, s.sitOutRound = nil, b.Round
	}
	asked, base := s.order, s.usersLocked()
	if s.cohort != nil {
		// A cohort round: the setup's members do not bound it (other
		// cohorts answered the setup), and its floor is the cohort's.
		asked, base = cohortOrder(s.cohort), s.part.Cohort
	}
	for _, id := range asked {
		if !s.banned[id] && !s.sitOut[id] && (s.cohort != nil || s.members == nil || s.members[id] || b.Phase == protocol.PhaseSetup) {
			roster = append(roster, id)
			weights = append(weights, s.weightOf(id))
		}
	}
	enrolled := s.usersLocked()
	s.mu.Unlock()
	n := len(roster)
	// The floor counts users: a party's masked vector holds its users'.
	// Secure aggregation counts positions, so its own floor is the fewest
	// positions that can hold floorUsers (the largest parties first); the
	// users of the positions that actually survive are checked once the
	// masked step closes. A cohort round's floor is the cohort's.
	floorUsers := max(1, int(math.Ceil(s.cfg.MinParticipants*float64(base)-1e-9)))
	if n < 2 {
		return nil, false, fmt.Errorf("deploy: round %d: %s not banned of %d enrolled; secure aggregation needs at least 2 (the sum of one vector is that vector): start the run with --min-clients of 2 or more",
			b.Round, clientsWord(n), enrolled)
	}
	users := sumInts(weights)
	if users < floorUsers {
		return nil, false, fmt.Errorf("deploy: round %d: %d clients not banned of %d enrolled, below the floor of %d (--min-participants %g); secure aggregation cannot release anything",
			b.Round, users, enrolled, floorUsers, s.cfg.MinParticipants)
	}
	floor := positionsFor(weights, floorUsers)
	choose := secagg.ChooseParams
	if s.cfg.ActiveSecAgg {
		choose = secagg.ChooseParamsActive
	}
	collusion := secagg.DefaultCollusion
	if s.cohort != nil && s.cfg.ActiveSecAgg {
		// The clients check K and T against a fraction of the certified
		// roster colluding (secagg.CheckPlan), and a server choosing the
		// cohort could put every colluder in it.
		collusion = min(1, collusion*float64(enrolled)/float64(n))
	}
	k, t, err := choose(n, secagg.ProvisionedDropout(s.cfg.MinParticipants), collusion)
	if err != nil {
		return nil, false, fmt.Errorf("deploy: secure aggregation parameters for a round of %d clients of %d enrolled, assuming %g of the enrolled collude with the server: %w", n, enrolled, secagg.DefaultCollusion, err)
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
	if p.Active && s.cfg.Authority != nil {
		v := &secagg.Verifier{Authority: s.cfg.Authority, Run: s.cfg.Run, Context: protocol.SessionContext(s.cfg.Run, b.Round, session), Order: roster}
		if err := srv.SetVerifier(v); err != nil {
			return nil, false, err
		}
	}
	// However the session ends, the clients it proved to have lied are
	// banned, and under the active protocol those that committed to keys
	// and did not reveal them sit out the round's next session.
	defer s.judge(srv, roster, b.Round, session)
	var agg secagg.Aggregator
	if co != nil {
		agg = co
	}
	sa := &saRound{p: p, ses: secagg.NewSession(srv, agg), session: session, slot: make(map[uint32]uint32, n),
		plan: &fedv1.SecAggPlan{Order: roster, Degree: uint32(k), Threshold: uint32(t), Bits: uint32(b.Bits),
			Words: uint32(b.Words), Seed: p.Seed[:], Session: session, Active: p.Active},
		co: co, shardRound: shardRound}
	for pos, id := range roster {
		sa.slot[id] = uint32(pos)
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
	ses := sa.ses
	defer func() {
		if ses.Err() == nil && ses.Open() < secagg.NumSteps {
			s.abort(sa, b.Round, errors.New("the server is stopping"))
		}
	}()
	sent := false // a masked vector may have been taken
	fail := func(step secagg.Step, err error) ([]*protocol.Upload, bool, error) {
		s.abort(sa, b.Round, err)
		s.log.Warn("secure aggregation session failed; nothing released", "round", b.Round, "session", session, "step", int(step), "err", err)
		return nil, !sent, nil
	}
	for ses.Open() < secagg.NumSteps {
		if err := ses.Await(ctx, s.cfg.RoundTimeout, maxWaits, s.log); err != nil {
			return nil, false, err
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if co != nil && ses.Open() == secagg.StepReveal {
			// The aggregators' shards of the sum, bit for bit Result's;
			// they wait as long as a step may.
			cctx, cancel = context.WithTimeout(ctx, time.Duration(1+maxWaits)*s.cfg.RoundTimeout)
		}
		step, err := ses.Close(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if step == secagg.StepCheck {
			s.banReported(sa, b.Round, srv.Reports())
		}
		if err != nil {
			return fail(step, err)
		}
		if step == secagg.StepReveal {
			sum, err := ses.Result()
			if err != nil {
				return fail(step, err)
			}
			survivors := make([]uint32, 0, ses.Inputs())
			in := 0
			for _, pos := range srv.Survivors() {
				survivors = append(survivors, roster[pos])
				in += weights[pos]
			}
			if err := s.st.putMasked(b.Round, &maskedRecord{Session: session, Sum: sum, Inputs: in, Survivors: survivors}); err != nil {
				return nil, false, err
			}
			if s.testHook != nil {
				s.testHook("sum", b.Round, sum)
			}
		}
		if step.Next(p.Active) == secagg.StepMasked {
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
		if step == secagg.StepMasked {
			in := 0
			for _, pos := range srv.Survivors() {
				in += weights[pos]
			}
			if in < floorUsers {
				// Parties hold many users: positions above secagg's
				// floor may hold too few users for the noise shares.
				return fail(step, fmt.Errorf("the masked vectors of %d positions hold %d users, below the floor of %d of %d (--min-participants %g)", len(srv.Survivors()), in, floorUsers, enrolled, s.cfg.MinParticipants))
			}
			s.mu.Lock()
			for _, pos := range srv.Survivors() {
				s.answered[s.slots[roster[pos]]] = true
			}
			s.nAnswer, s.maskedInputs = in, in
			s.mu.Unlock()
		}
		// Open the step the clients send next before they hear this
		// one's answer (Release): a client never finds its next step
		// not open yet.
		ses.Release()
		if s.testHook != nil {
			s.testHook(fmt.Sprintf("answered step %d", step), b.Round, nil)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	sum, err := ses.Result()
	if err != nil {
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

// sumInts returns the sum of xs.
func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// positionsFor returns the fewest positions whose weights (users) reach
// users, the largest first: a round with fewer surviving positions cannot
// hold that many users. With every weight 1 it is users.
func positionsFor(weights []int, users int) int {
	w := slices.Clone(weights)
	slices.SortFunc(w, func(a, b int) int { return b - a })
	got := 0
	for k, x := range w {
		if got += x; got >= users {
			return k + 1
		}
	}
	return len(w)
}

// banReported bans every client that at least T neighbours reported in
// this session's share check: fewer than T of a client's neighbours are
// corrupt (the secrecy condition secagg's parameters are chosen for), so
// at least one honest neighbour saw its shares fail. Fewer reports only
// cost their reporters their shares of it (secagg.Server.FinishCheck),
// and are logged: one lying client could otherwise ban its honest
// neighbours.
func (s *Server) banReported(sa *saRound, round int, reports map[uint32][]uint32) {
	for pos, by := range reports {
		id := sa.plan.Order[pos]
		if len(by) < sa.p.T {
			s.log.Warn("a client's shares were reported; its reporters hold none of them", "round", round, "client", id, "reporters", len(by), "threshold", sa.p.T)
			continue
		}
		s.ban(id, fmt.Sprintf("round %d: %d neighbours (at least T = %d) reported its shares as failing authentication", round, len(by), sa.p.T))
	}
}

// judge bans the clients that session proved to have lied (secagg's
// Cheaters) and, under the active protocol, has those that committed to
// keys and never revealed them sit out the round's next session.
func (s *Server) judge(srv *secagg.Server, roster []uint32, round int, session string) {
	for _, pos := range srv.Cheaters() {
		s.ban(roster[pos], fmt.Sprintf("round %d session %s: proven to have lied (a revealed share other than the one committed to it, or shares that do not reconstruct one seed)", round, session))
	}
	if !s.cfg.ActiveSecAgg {
		return
	}
	for _, pos := range srv.Unrevealed() {
		id := roster[pos]
		if s.sitOut == nil {
			s.sitOut = map[uint32]bool{}
		}
		s.sitOut[id] = true
		s.log.Warn("client committed to keys and did not reveal them: it sits out the round's next session", "round", round, "session", session, "client", id)
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

// abort ends a session whose secure aggregation failed: nothing is
// released, and every client waiting in it gets the error.
func (s *Server) abort(sa *saRound, round int, err error) {
	sa.ses.Abort(fmt.Errorf("deploy: round %d: secure aggregation aborted, nothing released: %w", round, err))
}
