package deploy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/rng"
	"github.com/privrec/privrec/secagg"
)

// streamGraph labels the public seeds of the rounds' neighbour graphs.
const streamGraph = 0x47524150 // "GRAP"

// Collusion is the fraction of clients a server may collude with that the
// neighbour graph and threshold of masked rounds are provisioned for.
const Collusion = 0.1

// saRound is the server's state of one secure-aggregation round: four
// steps (keys, shares, masked vectors, revealed shares), each closing when
// every client expected in it has sent or at the deadline.
type saRound struct {
	p      secagg.Params
	srv    *secagg.Server
	plan   *fedv1.SecAggPlan
	step   int // the open step, 4 when done
	expect int // clients expected in the open step
	got    int
	seen   map[uint32]bool // positions that sent in the open step
	full   chan struct{}   // closed when got == expect
	done   [4]chan struct{}
	keys   map[uint32]*secagg.KeysBroadcast
	shares map[uint32]*secagg.SharesDelivery
	unmask map[uint32]*secagg.UnmaskRequest
	inputs []uint32 // positions whose masked vector was taken
	err    error
}

// exchangeMasked runs round b through SecAgg+ with the enrolled clients
// and returns the unmasked sum as one upload. s.mu is not held.
func (s *Server) exchangeMasked(ctx context.Context, b *protocol.Broadcast) ([]*protocol.Upload, error) {
	n := len(s.order)
	if n < 2 {
		return nil, fmt.Errorf("deploy: secure aggregation needs at least 2 clients, the run has %d", n)
	}
	k, t, err := secagg.ChooseParams(n, 1-s.cfg.MinParticipants+0.05, Collusion)
	if err != nil {
		return nil, fmt.Errorf("deploy: secure aggregation parameters for %d clients: %w", n, err)
	}
	p := secagg.Params{N: n, K: k, T: t, Bits: b.Bits, Len: b.Words,
		Seed: rng.Seed(s.plan.Seed, streamGraph, uint64(b.Round))}
	srv, err := secagg.NewServer(p)
	if err != nil {
		return nil, err
	}
	sa := &saRound{p: p, srv: srv, expect: n, seen: map[uint32]bool{}, full: make(chan struct{}),
		plan: &fedv1.SecAggPlan{Order: s.order, Degree: uint32(k), Threshold: uint32(t), Bits: uint32(b.Bits),
			Words: uint32(b.Words), Seed: p.Seed[:]}}
	for i := range sa.done {
		sa.done[i] = make(chan struct{})
	}
	w := toWireBroadcast(b)
	w.V, w.Aux = clone(w.V), clone(w.Aux)
	// Provision the noise for dropouts: each client draws its share as if
	// only this fraction of an item's raters took part, so that any such
	// fraction of shares still sums to the calibrated noise.
	if s.cfg.MinParticipants < 1 {
		w.Params[protocol.ParamMinShare] = s.cfg.MinParticipants
	}
	s.mu.Lock()
	s.round, s.bc, s.wire, s.open, s.sa = b.Round, b, w, true, sa
	s.ups = make([]*protocol.Upload, n)
	s.answered = make([]bool, n)
	s.nAnswer = 0
	s.rejected = map[string]int{}
	s.notify()
	s.mu.Unlock()
	s.met.roundOpened(b.Round)
	defer func() {
		s.mu.Lock()
		s.open, s.closed = false, b.Round
		s.mu.Unlock()
	}()

	var sum []uint32
	for step := range 4 {
		if err := s.awaitStep(ctx, sa, step); err != nil {
			return nil, err
		}
		s.mu.Lock()
		sa.step = step + 1 // refuse late messages of this step from now on
		s.mu.Unlock()
		var next int
		switch step {
		case 0:
			kb, err := srv.FinishKeys()
			if err != nil {
				return nil, s.abort(sa, b.Round, err)
			}
			sa.keys = map[uint32]*secagg.KeysBroadcast{}
			for _, m := range kb {
				sa.keys[m.To] = m
			}
			next = len(kb)
		case 1:
			sd, err := srv.FinishShares()
			if err != nil {
				return nil, s.abort(sa, b.Round, err)
			}
			sa.shares = map[uint32]*secagg.SharesDelivery{}
			for _, m := range sd {
				sa.shares[m.To] = m
			}
			next = len(sd)
		case 2:
			ur, err := srv.FinishMaskedInput()
			if err != nil {
				return nil, s.abort(sa, b.Round, err)
			}
			sa.unmask = map[uint32]*secagg.UnmaskRequest{}
			for _, m := range ur {
				sa.unmask[m.To] = m
			}
			next = len(ur)
		case 3:
			if sum, err = srv.Result(); err != nil {
				return nil, s.abort(sa, b.Round, err)
			}
		}
		s.mu.Lock()
		sa.expect, sa.got, sa.seen, sa.full = next, 0, map[uint32]bool{}, make(chan struct{})
		if step == 2 {
			for _, pos := range sa.inputs {
				s.answered[pos] = true
			}
			s.nAnswer = len(sa.inputs)
		}
		s.mu.Unlock()
		close(sa.done[step])
	}
	return []*protocol.Upload{{Client: -1, Round: b.Round, Words: sum}}, nil
}

// awaitStep waits until every expected client sent its message of step,
// or the deadline passed with enough of them for the protocol to go on
// (the secagg server decides: too few aborts the round).
func (s *Server) awaitStep(ctx context.Context, sa *saRound, step int) error {
	s.mu.Lock()
	full := sa.full
	if sa.got >= sa.expect {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	timer := time.NewTimer(s.cfg.RoundTimeout)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-full:
	case <-timer.C:
		s.mu.Lock()
		got, want := sa.got, sa.expect
		s.mu.Unlock()
		s.log.Warn("secure aggregation step closed at its deadline", "step", step, "sent", got, "expected", want)
	}
	return nil
}

// abort ends a round whose secure aggregation failed: nothing is
// released, and the error stops the run (a restart retries the round).
func (s *Server) abort(sa *saRound, round int, err error) error {
	s.mu.Lock()
	sa.err = err
	s.mu.Unlock()
	for _, d := range sa.done {
		select {
		case <-d:
		default:
			close(d)
		}
	}
	return fmt.Errorf("deploy: round %d: secure aggregation aborted, nothing released: %w", round, err)
}

// SecAgg takes one client's message for the open step of a masked round
// and answers, once the step is closed, with the client's input for the
// next one.
func (s *Server) SecAgg(ctx context.Context, req *connect.Request[fedv1.SecAggRequest]) (*connect.Response[fedv1.SecAggResponse], error) {
	id, err := s.authenticate(req.Header())
	if err != nil {
		s.met.reject("auth")
		return nil, err
	}
	msg := req.Msg
	var step int
	switch msg.GetStep().(type) {
	case *fedv1.SecAggRequest_Keys:
		step = 0
	case *fedv1.SecAggRequest_Shares:
		step = 1
	case *fedv1.SecAggRequest_Masked:
		step = 2
	case *fedv1.SecAggRequest_Reveal:
		step = 3
	default:
		return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "no step")
	}
	at, err := s.admit(id, int(msg.GetRound()), true)
	if err != nil {
		return nil, err
	}
	sa := at.sa
	me := uint32(at.pos)
	if err := s.addStep(sa, step, me, msg); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	case <-sa.done[step]:
	}
	s.mu.Lock()
	abortErr := sa.err
	s.mu.Unlock()
	if abortErr != nil {
		return nil, connect.NewError(connect.CodeAborted, abortErr)
	}
	resp := &fedv1.SecAggResponse{}
	switch step {
	case 0:
		kb, ok := sa.keys[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's keys"))
		}
		list := &fedv1.SecAggKeyList{}
		for _, k := range kb.Keys {
			list.Keys = append(list.Keys, &fedv1.SecAggKeys{Position: k.From, MaskKey: k.MaskKey, EncKey: k.EncKey})
		}
		resp.Next = &fedv1.SecAggResponse_Keys{Keys: list}
	case 1:
		sd, ok := sa.shares[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's shares"))
		}
		resp.Next = &fedv1.SecAggResponse_Shares{Shares: toWireShares(sd.Shares)}
	case 2:
		ur, ok := sa.unmask[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's masked inputs"))
		}
		resp.Next = &fedv1.SecAggResponse_Unmask{Unmask: &fedv1.SecAggUnmask{Survivors: ur.Survivors, Dropped: ur.Dropped}}
	case 3:
		resp.Next = &fedv1.SecAggResponse_Done{Done: &fedv1.SecAggDone{}}
	}
	return connect.NewResponse(resp), nil
}

// addStep hands the message of position me for step to the secagg server.
func (s *Server) addStep(sa *saRound, step int, me uint32, msg *fedv1.SecAggRequest) error {
	s.mu.Lock()
	if sa.step != step {
		s.mu.Unlock()
		if sa.step > step {
			return s.rejectErr(connect.CodeFailedPrecondition, "late", "step %d of the round is closed", step)
		}
		return s.rejectErr(connect.CodeUnavailable, "early", "step %d is not open yet", step)
	}
	if sa.seen[me] {
		s.mu.Unlock()
		return s.rejectErr(connect.CodeAlreadyExists, "duplicate", "position %d already sent step %d", me, step)
	}
	s.mu.Unlock()
	var err error
	switch step {
	case 0:
		k := msg.GetKeys()
		if k.GetPosition() != me {
			return s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d sends as %d", me, k.GetPosition())
		}
		err = sa.srv.AddKeys(&secagg.AdvertiseKeys{From: me, MaskKey: k.GetMaskKey(), EncKey: k.GetEncKey()})
	case 1:
		var shares []secagg.EncryptedShare
		for _, sh := range msg.GetShares().GetShares() {
			if sh.GetFrom() != me {
				return s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d sends a share from %d", me, sh.GetFrom())
			}
			shares = append(shares, secagg.EncryptedShare{From: sh.GetFrom(), To: sh.GetTo(), Ciphertext: sh.GetCiphertext()})
		}
		err = sa.srv.AddShares(&secagg.ShareKeys{From: me, Shares: shares})
	case 2:
		m := msg.GetMasked()
		if int(m.GetModulusBits()) != sa.p.Bits || len(m.GetData()) != 4*sa.p.Len {
			return s.rejectErr(connect.CodeInvalidArgument, "shape", "a masked vector of %d bytes mod 2^%d; the round wants %d words mod 2^%d",
				len(m.GetData()), m.GetModulusBits(), sa.p.Len, sa.p.Bits)
		}
		y := make([]uint32, sa.p.Len)
		for i := range y {
			y[i] = binary.LittleEndian.Uint32(m.GetData()[4*i:])
		}
		err = sa.srv.AddMaskedInput(&secagg.MaskedInput{From: me, Y: y})
	case 3:
		rv := msg.GetReveal()
		err = sa.srv.AddUnmask(&secagg.UnmaskResponse{From: me,
			SelfShares: fromWireRevealed(rv.GetSelfShares()), MaskShares: fromWireRevealed(rv.GetMaskShares())})
	}
	if err != nil {
		return s.rejectErr(connect.CodeInvalidArgument, "secagg", "step %d: %v", step, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sa.step != step { // closed while the message was checked
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("upload refused (late): step %d closed", step))
	}
	sa.seen[me] = true
	sa.got++
	if step == 2 {
		sa.inputs = append(sa.inputs, me)
	}
	if sa.got == sa.expect {
		close(sa.full)
	}
	s.met.accept()
	return nil
}

func toWireShares(in []secagg.EncryptedShare) *fedv1.SecAggShares {
	out := &fedv1.SecAggShares{}
	for _, sh := range in {
		out.Shares = append(out.Shares, &fedv1.SecAggShare{From: sh.From, To: sh.To, Ciphertext: sh.Ciphertext})
	}
	return out
}

func fromWireShares(in *fedv1.SecAggShares) []secagg.EncryptedShare {
	var out []secagg.EncryptedShare
	for _, sh := range in.GetShares() {
		out = append(out, secagg.EncryptedShare{From: sh.GetFrom(), To: sh.GetTo(), Ciphertext: sh.GetCiphertext()})
	}
	return out
}

func toWireRevealed(in []secagg.RevealedShare) []*fedv1.SecAggRevealed {
	var out []*fedv1.SecAggRevealed
	for _, r := range in {
		out = append(out, &fedv1.SecAggRevealed{Owner: r.Owner, Share: r.Share})
	}
	return out
}

func fromWireRevealed(in []*fedv1.SecAggRevealed) []secagg.RevealedShare {
	var out []secagg.RevealedShare
	for _, r := range in {
		out = append(out, secagg.RevealedShare{Owner: r.GetOwner(), Share: r.GetShare()})
	}
	return out
}
