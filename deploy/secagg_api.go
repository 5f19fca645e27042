package deploy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/secagg"
)

// refusal says, with s.mu held, why position me may not send its message
// of step now: the step is closed ("late") or not open yet ("early"), or
// me sent it already ("duplicate"); reason "" when it may.
func (sa *saRound) refusal(me uint32, step int) (code connect.Code, reason, msg string) {
	switch {
	case sa.step > step:
		return connect.CodeFailedPrecondition, "late", fmt.Sprintf("step %d of the round is closed", step)
	case sa.step != step:
		return connect.CodeUnavailable, "early", fmt.Sprintf("step %d is not open yet", step)
	case sa.seen[me]:
		return connect.CodeAlreadyExists, "duplicate", fmt.Sprintf("position %d already sent step %d", me, step)
	}
	return 0, "", ""
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
	case *fedv1.SecAggRequest_Commit:
		step = stepCommit
	case *fedv1.SecAggRequest_Keys:
		step = stepKeys
	case *fedv1.SecAggRequest_Shares:
		step = stepShares
	case *fedv1.SecAggRequest_Check:
		step = stepCheck
	case *fedv1.SecAggRequest_Masked:
		step = stepMasked
	case *fedv1.SecAggRequest_Reveal:
		step = stepReveal
	case *fedv1.SecAggRequest_Consistency:
		step = stepConsist
	default:
		return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "no step")
	}
	at, err := s.admit(id, int(msg.GetRound()), true)
	if err != nil {
		return nil, err
	}
	sa := at.sa
	if ses := msg.GetSession(); ses != "" && ses != sa.session {
		return nil, s.rejectErr(connect.CodeFailedPrecondition, "late", "session %q of round %d is over; the open one is %q", ses, at.round, sa.session)
	}
	me, ok := sa.slot[id]
	if !ok {
		return nil, s.rejectErr(connect.CodePermissionDenied, "banned", "client %d is banned from this run's secure aggregation", id)
	}
	if err := s.addStep(ctx, sa, step, id, me, msg); err != nil {
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
	case stepCommit:
		resp.Next = &fedv1.SecAggResponse_Committed{Committed: &fedv1.SecAggCommitted{SetHash: sa.commitSet}}
	case stepKeys:
		kb, ok := sa.keys[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's keys"))
		}
		list := &fedv1.SecAggKeyList{Committed: sa.committed}
		for _, k := range kb.Keys {
			list.Keys = append(list.Keys, &fedv1.SecAggKeys{Position: k.From, MaskKey: k.MaskKey, EncKey: k.EncKey, Cert: k.Cert, Sig: k.Sig})
		}
		resp.Next = &fedv1.SecAggResponse_Keys{Keys: list}
	case stepShares:
		sd, ok := sa.shares[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's shares"))
		}
		resp.Next = &fedv1.SecAggResponse_Shares{Shares: toWireShares(sd.Shares)}
	case stepCheck:
		ex, ok := sa.checked[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("excluded from the round after the share check"))
		}
		resp.Next = &fedv1.SecAggResponse_Excluded{Excluded: &fedv1.SecAggExcluded{Excluded: ex.Excluded}}
	case stepMasked:
		ur, ok := sa.unmask[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's masked inputs"))
		}
		resp.Next = &fedv1.SecAggResponse_Unmask{Unmask: toWireUnmask(ur)}
	case stepConsist:
		ur, ok := sa.signed[me]
		if !ok {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("dropped from the round's consistency check"))
		}
		resp.Next = &fedv1.SecAggResponse_Unmask{Unmask: toWireUnmask(ur)}
	case stepReveal:
		resp.Next = &fedv1.SecAggResponse_Done{Done: &fedv1.SecAggDone{}}
	}
	return connect.NewResponse(resp), nil
}

// addStep hands the message of client id, at position me, for step to
// the secagg server. The step check, the hand-over and the count happen
// under one lock, so that a message is either in the step (and in the
// sum, and in the ledger's counts) or refused as late, never half.
func (s *Server) addStep(ctx context.Context, sa *saRound, step int, id, me uint32, msg *fedv1.SecAggRequest) error {
	// Decode outside the lock.
	var y []uint32
	if step == stepMasked {
		m := msg.GetMasked()
		if int(m.GetModulusBits()) != sa.p.Bits || len(m.GetData()) != 4*sa.p.Len {
			return s.rejectErr(connect.CodeInvalidArgument, "shape", "a masked vector of %d bytes mod 2^%d; the round wants %d words mod 2^%d",
				len(m.GetData()), m.GetModulusBits(), sa.p.Len, sa.p.Bits)
		}
		y = make([]uint32, sa.p.Len)
		for i := range y {
			y[i] = binary.LittleEndian.Uint32(m.GetData()[4*i:])
		}
		if sa.co != nil {
			return s.addSharded(ctx, sa, me, y)
		}
	}
	s.mu.Lock()
	if code, reason, msg := sa.refusal(me, step); reason != "" {
		s.mu.Unlock()
		return s.rejectErr(code, reason, "%s", msg)
	}
	var err error
	switch step {
	case stepCommit:
		c := msg.GetCommit()
		if c.GetPosition() != me || len(c.GetDigest()) != 32 {
			s.mu.Unlock()
			return s.rejectErr(connect.CodeInvalidArgument, "shape", "position %d commits as %d with a %d-byte digest", me, c.GetPosition(), len(c.GetDigest()))
		}
		err = sa.srv.AddCommit(&secagg.KeyCommit{From: me, Digest: [32]byte(c.GetDigest())})
	case stepKeys:
		k := msg.GetKeys()
		if k.GetPosition() != me {
			s.mu.Unlock()
			return s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d sends as %d", me, k.GetPosition())
		}
		err = sa.srv.AddKeys(&secagg.AdvertiseKeys{From: me, MaskKey: k.GetMaskKey(), EncKey: k.GetEncKey(), Cert: k.GetCert(), Sig: k.GetSig(), Nonce: k.GetNonce()})
	case stepShares:
		var shares []secagg.EncryptedShare
		for _, sh := range msg.GetShares().GetShares() {
			if sh.GetFrom() != me {
				s.mu.Unlock()
				return s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d sends a share from %d", me, sh.GetFrom())
			}
			shares = append(shares, secagg.EncryptedShare{From: sh.GetFrom(), To: sh.GetTo(), Ciphertext: sh.GetCiphertext()})
		}
		err = sa.srv.AddShares(&secagg.ShareKeys{From: me, Shares: shares})
	case stepCheck:
		err = sa.srv.AddCheck(&secagg.ShareCheck{From: me, Reported: msg.GetCheck().GetReported()})
	case stepMasked:
		err = sa.srv.AddMaskedInput(&secagg.MaskedInput{From: me, Y: y})
	case stepConsist:
		c := msg.GetConsistency()
		if c.GetPosition() != me {
			s.mu.Unlock()
			return s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d signs as %d", me, c.GetPosition())
		}
		err = sa.srv.AddConsistency(&secagg.SurvivorSig{From: me, Sig: c.GetSig()})
	case stepReveal:
		rv := msg.GetReveal()
		err = sa.srv.AddUnmask(&secagg.UnmaskResponse{From: me,
			SelfShares: fromWireRevealed(rv.GetSelfShares()), MaskShares: fromWireRevealed(rv.GetMaskShares())})
	}
	if err == nil {
		sa.seen[me] = true
		sa.got++
		if step == stepMasked {
			sa.inputs = append(sa.inputs, me)
		}
		if sa.got == sa.expect {
			close(sa.full)
		}
	}
	s.mu.Unlock()
	if errors.Is(err, secagg.ErrLowOrder) {
		s.ban(id, fmt.Sprintf("advertised a key of small order: %v", err))
	}
	if err != nil {
		return s.rejectErr(connect.CodeInvalidArgument, "secagg", "step %d: %v", step, err)
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

// byRecipient indexes a step's messages by the client they are for.
func byRecipient[M any](ms []M, to func(M) uint32) map[uint32]M {
	out := make(map[uint32]M, len(ms))
	for _, m := range ms {
		out[to(m)] = m
	}
	return out
}

// commitSize is the wire size of one entry of the opened commitment set:
// position, advertisement digest, nonce.
const commitSize = 4 + 32 + secagg.NonceSize

func packCommitted(cs []secagg.Commitment) []byte {
	out := make([]byte, 0, commitSize*len(cs))
	for _, c := range cs {
		out = binary.BigEndian.AppendUint32(out, c.From)
		out = append(out, c.Digest[:]...)
		out = append(out, c.Nonce[:]...)
	}
	return out
}

func unpackCommitted(b []byte) ([]secagg.Commitment, error) {
	if len(b)%commitSize != 0 {
		return nil, fmt.Errorf("deploy: committed key set of %d bytes, not a multiple of %d", len(b), commitSize)
	}
	out := make([]secagg.Commitment, len(b)/commitSize)
	for i := range out {
		e := b[i*commitSize:]
		out[i].From = binary.BigEndian.Uint32(e)
		copy(out[i].Digest[:], e[4:36])
		copy(out[i].Nonce[:], e[36:commitSize])
	}
	return out, nil
}

func toWireUnmask(ur *secagg.UnmaskRequest) *fedv1.SecAggUnmask {
	w := &fedv1.SecAggUnmask{Survivors: ur.Survivors, Dropped: ur.Dropped, Survived: ur.Survived}
	for _, sg := range ur.Signatures {
		w.Signatures = append(w.Signatures, &fedv1.SecAggSignature{Position: sg.From, Sig: sg.Sig})
	}
	return w
}

func fromWireUnmask(to uint32, w *fedv1.SecAggUnmask) *secagg.UnmaskRequest {
	ur := &secagg.UnmaskRequest{To: to, Survivors: w.GetSurvivors(), Dropped: w.GetDropped(), Survived: w.GetSurvived()}
	for _, sg := range w.GetSignatures() {
		ur.Signatures = append(ur.Signatures, secagg.SurvivorSig{From: sg.GetPosition(), Sig: sg.GetSig()})
	}
	return ur
}

// nextStep is the step a client sends after step: the next one, past
// the active protocol's commitment and consistency steps when the
// session runs the passive protocol.
func nextStep(step int, active bool) int {
	next := step + 1
	for !active && (next == stepCommit || next == stepConsist) {
		next++
	}
	return next
}

// clientsWord is "1 client" or "n clients".
func clientsWord(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}
