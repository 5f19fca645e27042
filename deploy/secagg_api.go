package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"unsafe"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/shard"
)

// SecAgg takes one client's message for the open step of a masked round
// and answers, once the step is closed, with the client's input for the
// next one.
func (s *Server) SecAgg(ctx context.Context, req *connect.Request[fedv1.SecAggRequest]) (*connect.Response[fedv1.SecAggResponse], error) {
	resp, err := s.secAgg(ctx, req.Header(), req.Msg, false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// secAgg is SecAgg of msg, the call of the client whose credential is in
// header. With published, msg is a masked-vector step that a front-end
// published and committed for the client (Published).
func (s *Server) secAgg(ctx context.Context, header http.Header, msg *fedv1.SecAggRequest, published bool) (*fedv1.SecAggResponse, error) {
	id, err := s.authenticate(header)
	if err != nil {
		s.met.reject("auth")
		return nil, err
	}
	if msg.GetStep() == nil {
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
	m, err := s.fromWireStep(sa, me, msg, published)
	if err != nil {
		return nil, err
	}
	if mi, ok := m.(*secagg.MaskedInput); ok && sa.co != nil && !published && !sa.pin(me, sha256.Sum256(msg.GetMasked().GetData())) {
		// A sharded round: the server publishes it, and a front-end may
		// have published another of the client's (ShardTicket).
		return nil, s.rejectErr(connect.CodeAlreadyExists, "duplicate", "client %d (position %d) already sent another masked vector in session %s", id, mi.From, sa.session)
	}
	err = s.addStep(ctx, sa, id, m)
	var again *againError
	switch {
	case errors.As(err, &again):
		// The client sent this step before (or sends it after the step
		// closed): if the session took its first call — whose answer
		// was lost with a front-end that died, or a broken connection —
		// it gets that call's answer; otherwise the refusal.
		if r, rerr := sa.ses.Reply(ctx, m.Step(), me); rerr == nil {
			return sa.toWireReply(r), nil
		} else if ctx.Err() == nil && errors.Is(rerr, secagg.ErrNoReply) {
			return nil, s.rejectErr(again.code, again.reason, "%v", again.err)
		}
	case err != nil:
		return nil, err
	}
	r, err := sa.ses.Reply(ctx, m.Step(), me)
	switch {
	case ctx.Err() != nil:
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	case errors.Is(err, secagg.ErrNoReply):
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeAborted, err)
	}
	return sa.toWireReply(r), nil
}

// addStep hands client id's message m to the round's session. A step
// that refuses it (late, early, a duplicate) or a secagg server that
// does not accept it gets the client a refusal; a key of small order
// bans the client.
func (s *Server) addStep(ctx context.Context, sa *saRound, id uint32, m secagg.Message) error {
	sharded := sa.co != nil && m.Step() == secagg.StepMasked
	if sharded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RoundTimeout)
		defer cancel()
	}
	err := sa.ses.Add(ctx, m)
	switch {
	case err == nil || published(sa, m, err):
		s.met.accept()
		return nil
	case errors.Is(err, secagg.ErrLate):
		return &againError{connect.CodeFailedPrecondition, "late", err}
	case errors.Is(err, secagg.ErrEarly):
		return s.rejectErr(connect.CodeUnavailable, "early", "%v", err)
	case errors.Is(err, secagg.ErrDuplicate):
		return &againError{connect.CodeAlreadyExists, "duplicate", err}
	case errors.Is(err, secagg.ErrLowOrder):
		s.ban(id, fmt.Sprintf("advertised a key of small order: %v", err))
	case sharded && !errors.Is(err, shard.ErrRefused) && !errors.Is(err, shard.ErrNotAdmitted):
		return s.rejectErr(connect.CodeUnavailable, "sharded", "step %d: handing the masked vector to the aggregators failed; the client is out of this round: %v", m.Step(), err)
	}
	return s.rejectErr(connect.CodeInvalidArgument, "secagg", "step %d: %v", m.Step(), err)
}

// againError is addStep's refusal of a step that the client sent
// already (secagg.ErrDuplicate) or after it closed (secagg.ErrLate): a
// client whose first call was taken and whose answer was lost sends it
// again, and SecAgg answers it with the first call's answer; the
// refusal (code, counted under reason) is for a client without one.
type againError struct {
	code   connect.Code
	reason string
	err    error
}

func (e *againError) Error() string {
	return fmt.Sprintf("upload refused (%s): %v", e.reason, e.err)
}

func (e *againError) Unwrap() error { return e.err }

// fromWireStep decodes position me's message of a step, refusing one
// that speaks for another position or has the wrong shape. published
// marks a masked vector that a front-end published (its data empty).
func (s *Server) fromWireStep(sa *saRound, me uint32, msg *fedv1.SecAggRequest, published bool) (secagg.Message, error) {
	switch st := msg.GetStep().(type) {
	case *fedv1.SecAggRequest_Commit:
		c := st.Commit
		if c.GetPosition() != me || len(c.GetDigest()) != 32 {
			return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "position %d commits as %d with a %d-byte digest", me, c.GetPosition(), len(c.GetDigest()))
		}
		return &secagg.KeyCommit{From: me, Digest: [32]byte(c.GetDigest())}, nil
	case *fedv1.SecAggRequest_Keys:
		k := st.Keys
		if k.GetPosition() != me {
			return nil, s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d sends as %d", me, k.GetPosition())
		}
		return &secagg.AdvertiseKeys{From: me, MaskKey: k.GetMaskKey(), EncKey: k.GetEncKey(), Cert: k.GetCert(), Sig: k.GetSig(), Nonce: k.GetNonce()}, nil
	case *fedv1.SecAggRequest_Shares:
		var shares []secagg.EncryptedShare
		for _, sh := range st.Shares.GetShares() {
			if sh.GetFrom() != me {
				return nil, s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d sends a share from %d", me, sh.GetFrom())
			}
			shares = append(shares, secagg.EncryptedShare{From: sh.GetFrom(), To: sh.GetTo(), Ciphertext: sh.GetCiphertext()})
		}
		return &secagg.ShareKeys{From: me, Shares: shares}, nil
	case *fedv1.SecAggRequest_Check:
		return &secagg.ShareCheck{From: me, Reported: st.Check.GetReported()}, nil
	case *fedv1.SecAggRequest_Masked:
		m := st.Masked
		if published {
			// A front-end published and committed it (ShardTicket).
			if sa.co == nil || int(m.GetModulusBits()) != sa.p.Bits || len(m.GetData()) != 0 {
				return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "a published masked vector with %d bytes mod 2^%d in a round of %d bits, sharded %t",
					len(m.GetData()), m.GetModulusBits(), sa.p.Bits, sa.co != nil)
			}
			return &secagg.MaskedInput{From: me}, nil
		}
		if int(m.GetModulusBits()) != sa.p.Bits || len(m.GetData()) != 4*sa.p.Len {
			return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "a masked vector of %d bytes mod 2^%d; the round wants %d words mod 2^%d",
				len(m.GetData()), m.GetModulusBits(), sa.p.Len, sa.p.Bits)
		}
		return &secagg.MaskedInput{From: me, Y: bytesWords(m.GetData())}, nil
	case *fedv1.SecAggRequest_Consistency:
		c := st.Consistency
		if c.GetPosition() != me {
			return nil, s.rejectErr(connect.CodePermissionDenied, "not-member", "position %d signs as %d", me, c.GetPosition())
		}
		return &secagg.SurvivorSig{From: me, Sig: c.GetSig()}, nil
	case *fedv1.SecAggRequest_Reveal:
		rv := st.Reveal
		return &secagg.UnmaskResponse{From: me, SelfShares: fromWireRevealed(rv.GetSelfShares()), MaskShares: fromWireRevealed(rv.GetMaskShares())}, nil
	}
	return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "no step")
}

// toWireReply encodes a client's reply. The opened commitment set, the
// same for every client, is packed once.
func (sa *saRound) toWireReply(r secagg.Reply) *fedv1.SecAggResponse {
	resp := &fedv1.SecAggResponse{}
	switch r := r.(type) {
	case *secagg.CommitSet:
		resp.Next = &fedv1.SecAggResponse_Committed{Committed: &fedv1.SecAggCommitted{SetHash: r.Hash[:]}}
	case *secagg.KeysBroadcast:
		list := &fedv1.SecAggKeyList{}
		if sa.p.Active {
			sa.packOnce.Do(func() { sa.committed = packCommitted(r.Committed) })
			list.Committed = sa.committed
		}
		for _, k := range r.Keys {
			list.Keys = append(list.Keys, &fedv1.SecAggKeys{Position: k.From, MaskKey: k.MaskKey, EncKey: k.EncKey, Cert: k.Cert, Sig: k.Sig})
		}
		resp.Next = &fedv1.SecAggResponse_Keys{Keys: list}
	case *secagg.SharesDelivery:
		resp.Next = &fedv1.SecAggResponse_Shares{Shares: toWireShares(r.Shares)}
	case *secagg.Exclusion:
		resp.Next = &fedv1.SecAggResponse_Excluded{Excluded: &fedv1.SecAggExcluded{Excluded: r.Excluded}}
	case *secagg.UnmaskRequest:
		resp.Next = &fedv1.SecAggResponse_Unmask{Unmask: toWireUnmask(r)}
	case *secagg.Done:
		resp.Next = &fedv1.SecAggResponse_Done{Done: &fedv1.SecAggDone{}}
	}
	return resp
}

// toWireStep encodes a client's message of a step; p is its session's.
func toWireStep(m secagg.Message, p secagg.Params) *fedv1.SecAggRequest {
	req := &fedv1.SecAggRequest{}
	switch m := m.(type) {
	case *secagg.KeyCommit:
		req.Step = &fedv1.SecAggRequest_Commit{Commit: &fedv1.SecAggCommit{Position: m.From, Digest: m.Digest[:]}}
	case *secagg.AdvertiseKeys:
		req.Step = &fedv1.SecAggRequest_Keys{Keys: &fedv1.SecAggKeys{Position: m.From, MaskKey: m.MaskKey, EncKey: m.EncKey, Cert: m.Cert, Sig: m.Sig, Nonce: m.Nonce}}
	case *secagg.ShareKeys:
		req.Step = &fedv1.SecAggRequest_Shares{Shares: toWireShares(m.Shares)}
	case *secagg.ShareCheck:
		req.Step = &fedv1.SecAggRequest_Check{Check: &fedv1.SecAggCheck{Reported: m.Reported}}
	case *secagg.MaskedInput:
		req.Step = &fedv1.SecAggRequest_Masked{Masked: &fedv1.MaskedUpload{ModulusBits: uint32(p.Bits), Data: wordBytes(m.Y)}}
	case *secagg.SurvivorSig:
		req.Step = &fedv1.SecAggRequest_Consistency{Consistency: &fedv1.SecAggSignature{Position: m.From, Sig: m.Sig}}
	case *secagg.UnmaskResponse:
		req.Step = &fedv1.SecAggRequest_Reveal{Reveal: &fedv1.SecAggReveal{SelfShares: toWireRevealed(m.SelfShares), MaskShares: toWireRevealed(m.MaskShares)}}
	}
	return req
}

// fromWireReply decodes the server's answer to position me's message of
// step in a session of parameters p.
func fromWireReply(me uint32, step secagg.Step, p secagg.Params, resp *fedv1.SecAggResponse) (secagg.Reply, error) {
	switch step {
	case secagg.StepCommit:
		set := resp.GetCommitted().GetSetHash()
		if len(set) != 32 {
			return nil, fmt.Errorf("deploy: a commitment set hash of %d bytes", len(set))
		}
		return &secagg.CommitSet{To: me, Hash: [32]byte(set)}, nil
	case secagg.StepKeys:
		kb := &secagg.KeysBroadcast{To: me}
		for _, k := range resp.GetKeys().GetKeys() {
			kb.Keys = append(kb.Keys, secagg.AdvertiseKeys{From: k.GetPosition(), MaskKey: k.GetMaskKey(), EncKey: k.GetEncKey(), Cert: k.GetCert(), Sig: k.GetSig()})
		}
		if p.Active {
			var err error
			if kb.Committed, err = unpackCommitted(resp.GetKeys().GetCommitted()); err != nil {
				return nil, err
			}
		}
		return kb, nil
	case secagg.StepShares:
		return &secagg.SharesDelivery{To: me, Shares: fromWireShares(resp.GetShares())}, nil
	case secagg.StepCheck:
		return &secagg.Exclusion{To: me, Excluded: resp.GetExcluded().GetExcluded()}, nil
	case secagg.StepMasked, secagg.StepConsistency:
		return fromWireUnmask(me, resp.GetUnmask()), nil
	}
	return &secagg.Done{To: me}, nil
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

// clientsWord is "1 client" or "n clients".
func clientsWord(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}

// littleEndian reports whether this machine stores a uint32 least
// significant byte first, the wire's order of a masked vector's words.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// wordBytes returns y as the wire's bytes (each word little-endian). On
// a little-endian machine that is y's own memory, not a copy: a process
// running a cohort of thousands of clients holds each masked vector once
// while its step is open (y must not change until the call returns).
func wordBytes(y []uint32) []byte {
	if littleEndian {
		if len(y) == 0 {
			return []byte{}
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&y[0])), 4*len(y))
	}
	data := make([]byte, 4*len(y))
	for i, v := range y {
		binary.LittleEndian.PutUint32(data[4*i:], v)
	}
	return data
}

// bytesWords decodes a masked vector's bytes, little-endian words (the
// inverse of wordBytes; a trailing partial word is dropped, which the
// callers refuse first).
func bytesWords(data []byte) []uint32 {
	y := make([]uint32, len(data)/4)
	for i := range y {
		y[i] = binary.LittleEndian.Uint32(data[4*i:])
	}
	return y
}
