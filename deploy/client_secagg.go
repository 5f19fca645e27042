package deploy

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/secagg"
)

// answerMasked runs every client's Round on b, a round of secure
// aggregation, and returns their dense integer vectors: zeros for a client
// with nothing to send (it takes part all the same, so that the server
// cannot tell who has data), nil for one sitting the round out.
func (s *Session) answerMasked(b *protocol.Broadcast, clients []protocol.Client) ([][]uint32, error) {
	out := make([][]uint32, len(clients))
	err := s.roundAll(b, clients, func(k int, up *protocol.Upload, online bool) error {
		switch {
		case !online:
			return nil
		case up == nil:
			out[k] = make([]uint32, b.Words)
			return nil
		}
		if err := up.Validate(b); err != nil {
			return err
		}
		out[k] = up.DenseWords(b)
		return nil
	})
	return out, err
}

// answerParty runs every client's Round on b, a round of secure
// aggregation, exactly as answerMasked does, and returns one vector: the
// sum mod 2^Bits of the clients' vectors, which the session's one
// identity sends (ClientConfig.OneParty). The server's unmasked sum is
// then the sum of every user's vector, bit for bit, as with one identity
// per user. The vectors are added as they come, one worker at a time,
// never held all at once.
func (s *Session) answerParty(b *protocol.Broadcast, clients []protocol.Client) ([][]uint32, error) {
	total := make([]uint32, b.Words)
	var mu sync.Mutex
	err := s.roundAll(b, clients, func(_ int, up *protocol.Upload, online bool) error {
		if !online || up == nil {
			return nil // zeros
		}
		if err := up.Validate(b); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		addWords(total, b, up)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b.Bits < 32 {
		mask := uint32(1)<<b.Bits - 1
		for k := range total {
			total[k] &= mask
		}
	}
	return [][]uint32{total}, nil
}

// addWords adds up's words (dense, or rows by item) to total, mod 2^32.
func addWords(total []uint32, b *protocol.Broadcast, up *protocol.Upload) {
	if up.Items == nil {
		for k, x := range up.Words {
			total[k] += x
		}
		return
	}
	stride := b.Words / b.NumItems
	for k, j := range up.Items {
		dst := total[int(j)*stride : (int(j)+1)*stride]
		for d, x := range up.Words[k*stride : (k+1)*stride] {
			dst[d] += x
		}
	}
}

// answerPlainParty answers a round without secure aggregation for a
// OneParty session: every client runs its Round (its state advances as a
// device's would), and the party sends one empty answer. A client with
// something to upload fails the round: a plain upload is one user's, and
// the party sends masked sums only.
func (s *Session) answerPlainParty(ctx context.Context, b *protocol.Broadcast, clients []protocol.Client, cache []*fedv1.UploadRequest) error {
	each := make([]*fedv1.UploadRequest, len(clients))
	if err := s.answer(ctx, b, clients, each); err != nil {
		return err
	}
	for k, u := range each {
		if u.GetSparse() != nil {
			return fmt.Errorf("deploy: round %d asks client %d for a plain upload, and a party (--one-party) sends only masked sums of its users' vectors: run the method with secagg=masked", b.Round, clients[k].ID())
		}
	}
	cache[0] = toWireUpload(b.Round, nil, s.cfg.Seeded)
	return nil
}

// secureAggregate runs the steps of SecAgg+ for every client with a
// vector that has not sent a masked vector for this round before (in any
// session), concurrently (a step closes only when all have sent). A
// client whose step fails drops out of the round, as a device would.
func (s *Session) secureAggregate(ctx context.Context, round int, plan *fedv1.SecAggPlan, clients []protocol.Client, ids []uint32, dense [][]uint32, creds []string, sentMasked []int) error {
	pos := make(map[uint32]uint32, len(plan.GetOrder()))
	for k, id := range plan.GetOrder() {
		pos[id] = uint32(k)
	}
	p := secagg.Params{N: len(plan.GetOrder()), K: int(plan.GetDegree()), T: int(plan.GetThreshold()),
		Bits: int(plan.GetBits()), Len: int(plan.GetWords())}
	copy(p.Seed[:], plan.GetSeed())
	p.Active = plan.GetActive()
	if err := p.Validate(); err != nil {
		return fmt.Errorf("deploy: round %d: the server's secure-aggregation plan: %w", round, err)
	}
	if err := s.checkPlan(p); err != nil {
		return fmt.Errorf("deploy: round %d: %w", round, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	dropped, sitting, left := 0, 0, 0
	var firstErr error // the first dropped client's error, for the round's warning
	for k, v := range dense {
		if v == nil {
			continue
		}
		if sentMasked[k] == round {
			sitting++
			continue
		}
		me, ok := pos[ids[k]]
		if !ok {
			continue // banned, or left out of this session by the server
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			markSent := func() { // only this goroutine touches entry k
				if !s.resend {
					sentMasked[k] = round
					// Never sent again: its masked copy is the last use
					// of the client's vector (thousands of clients hold
					// theirs at once in a cohort).
					dense[k] = nil
				}
			}
			var auth *secagg.Auth
			if p.Active {
				id := s.ids[ids[k]]
				auth = &secagg.Auth{Authority: s.cfg.Authority, Key: id.key, Cert: id.cert, Order: plan.GetOrder(),
					Context: protocol.SessionContext(s.cfg.Run, round, plan.GetSession())}
			}
			leave := s.leavesAfterShares(k, round)
			if err := s.secaggFlow(ctx, round, plan.GetSession(), p, auth, ids[k], me, v, creds[k], markSent, leave); errors.Is(err, errLeftAfterShares) {
				mu.Lock()
				left++
				mu.Unlock()
			} else if err != nil {
				s.log.Debug("dropped out of secure aggregation", "client", ids[k], "round", round, "err", err)
				mu.Lock()
				dropped++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	switch {
	case dropped > 0:
		s.log.Warn("clients dropped out of the round's secure aggregation", "round", round, "dropped", dropped,
			"already_sent", sitting, "first_err", firstErr)
	case sitting > 0:
		s.log.Info("clients left out of the round's secure aggregation", "round", round, "already_sent", sitting)
	}
	if left > 0 {
		s.log.Info("simulated devices went offline after their encrypted shares", "round", round, "devices", left)
	}
	return ctx.Err()
}

// checkPlan is the clients' policy on a masked round's plan: without a
// pinned authority it is refused unless Insecure (the honest-but-curious
// protocol holds only against a server that follows it); with one the
// round must run the active protocol, with no more
// positions than the certified roster, and with K and T that withstand a
// lying server colluding with ClientConfig.Collusion of that roster. It is checked
// before any key leaves a client.
func (s *Session) checkPlan(p secagg.Params) error {
	if s.cfg.Authority == nil {
		if p.Active {
			return errors.New("the server runs the active secure-aggregation protocol and no enrolment authority is pinned (--authority-key): this client has no certified identity")
		}
		if !s.cfg.Insecure {
			return errors.New("the server's plan runs the honest-but-curious secure-aggregation protocol and no enrolment authority is pinned: " +
				"a server that lies could unmask a client (by substituting a neighbour's key, or telling neighbours different survivor sets). " +
				"Pin the run's authority (--authority-key with its certificates) against a server running --secagg-active, or accept the weaker protocol with --insecure")
		}
		return nil
	}
	if !p.Active {
		return errors.New("an enrolment authority is pinned and the server's plan is not the active secure-aggregation protocol (a server that lies could unmask a client): refusing")
	}
	roster := s.cfg.Roster
	if roster <= 0 {
		roster = len(s.ids)
	}
	return secagg.CheckPlan(p, roster, s.cfg.Collusion)
}

// checkSurvivors refuses, before a client signs the survivor set (and so
// before any share is revealed), a set smaller than MinShare of the
// certified roster: the noise shares were calibrated for that many
// clients, and a server that dropped honest clients below it would
// release a sum with less noise than the clients agreed to.
func (s *Session) checkSurvivors(bitmap []byte) error {
	roster := s.cfg.Roster
	if roster <= 0 {
		roster = len(s.ids)
	}
	if s.part.Cohort > 0 {
		roster = min(roster, s.part.Cohort) // the shares were drawn for the cohort
	}
	if err := secagg.CheckSurvivors(bitmap, roster, floorOr(s.cfg.MinShare)); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	return nil
}

// secaggFlow is one client's steps of a session (secagg.Client.Start,
// Next) over the Connect API. markSent is called just before
// the masked vector leaves, whether or not it arrives. With leave (a
// simulated device, Population.DropAfterShares) the client stops there
// instead, its encrypted shares sent and its masked vector not, and
// returns errLeftAfterShares.
func (s *Session) secaggFlow(ctx context.Context, round int, session string, p secagg.Params, auth *secagg.Auth, id, me uint32, x []uint32, cred string, markSent func(), leave bool) error {
	var c *secagg.Client
	var err error
	if p.Active {
		c, err = secagg.NewActiveClient(me, p, crand.Reader, auth)
	} else {
		c, err = secagg.NewClient(me, p, crand.Reader)
	}
	if err != nil {
		return err
	}
	call := func(req *fedv1.SecAggRequest) (*fedv1.SecAggResponse, error) {
		req.Round, req.Session = int32(round), session
		// A step the server has not opened yet ("early": it answered
		// UNAVAILABLE) is sent again until it opens, for at most
		// cfg.Retry; the message was not taken, so nothing is sent twice.
		deadline := time.Now().Add(s.cfg.Retry)
		wait := 50 * time.Millisecond
		for {
			resp, err := s.api.SecAgg(ctx, withCred(req, cred))
			if err == nil {
				return resp.Msg, nil
			}
			if connect.CodeOf(err) != connect.CodeUnavailable || unreachable(err) || time.Now().After(deadline) {
				return nil, err
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
		}
	}
	m, err := c.Start(x)
	for err == nil && m != nil {
		if s.lie != nil {
			if m = s.lie(id, c, m); m == nil {
				return errors.New("deploy: a red-team client stopped sending")
			}
		}
		switch m := m.(type) {
		case *secagg.MaskedInput:
			markSent()
			if leave {
				return errLeftAfterShares
			}
		case *secagg.ShareCheck:
			if len(m.Reported) > 0 {
				s.log.Warn("neighbours' shares failed authentication: reported", "round", round, "position", me, "reported", m.Reported)
			}
		}
		step, req := m.Step(), toWireStep(m, p)
		m = nil // a masked vector lives on in req alone while its step is open
		var resp *fedv1.SecAggResponse
		if resp, err = call(req); err != nil {
			break
		}
		req = nil
		var r secagg.Reply
		if r, err = fromWireReply(me, step, p, resp); err != nil {
			break
		}
		if um, ok := r.(*secagg.UnmaskRequest); ok && p.Active && step == secagg.StepMasked {
			if err = s.checkSurvivors(um.Survived); err != nil {
				break
			}
		}
		m, err = c.Next(r)
	}
	return err
}

// streamDropout labels the dropout draws apart from the clients' own.
const streamDropout = 0x44524f50 // "DROP"

// dropped reports whether client id sits round out (ClientConfig.Dropout).
func (s *Session) dropped(id, round int) bool {
	if !(s.cfg.Dropout > 0) {
		return false
	}
	if s.cfg.Seeded {
		return rng.New(s.cfg.Seed, streamDropout, uint64(id), uint64(round)).Float64() < s.cfg.Dropout
	}
	return rand.Float64() < s.cfg.Dropout
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// send uploads every cached answer of round r. An answer the server
// already has, or a round it already closed, is not an error: the round
// went on without this client.
func (s *Session) send(ctx context.Context, r int, cache []*fedv1.UploadRequest, creds []string) error {
	var mu sync.Mutex
	var first error
	var late int
	parallel(len(cache), s.cfg.Workers, func(k int) {
		if cache[k] == nil { // offline this round
			return
		}
		err := s.retry(ctx, "upload", func(ctx context.Context) error {
			_, err := s.api.Upload(ctx, withCred(cache[k], creds[k]))
			return err
		})
		switch connect.CodeOf(err) {
		case connect.CodeAlreadyExists:
			err = nil
		case connect.CodeFailedPrecondition:
			mu.Lock()
			late++
			mu.Unlock()
			err = nil
		}
		if err != nil {
			mu.Lock()
			first = cmpErr(first, fmt.Errorf("deploy: upload of client %d round %d: %w", k, r, err))
			mu.Unlock()
		}
	})
	if late > 0 {
		s.log.Debug("uploads after their round closed", "round", r, "late", late)
	}
	return first
}

// DefaultFloor is the participation floor of the active protocol when
// none is given: the server's MinParticipants and the clients' MinShare.
// A tenth of the roster (secagg.DefaultDropout) may drop out, or sit a
// session out after committing to keys it never revealed, and the round
// is still released; the noise shares are drawn for this fraction of the
// roster, so the released sums carry their calibrated noise.
const DefaultFloor = 1 - secagg.DefaultDropout

// floorOr returns x when it is a fraction in (0, 1], else DefaultFloor.
func floorOr(x float64) float64 {
	if x > 0 && x <= 1 {
		return x
	}
	return DefaultFloor
}
