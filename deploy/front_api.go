package deploy

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/secagg"
)

// ShardTicket answers a front-end (Front) about the SecAgg call of the
// client whose credential it forwards. Without a digest it only checks
// the credential and returns the call's byte cap, which the front-end
// applies before it reads the call. With the SHA-256 digest of the
// client's masked vector it checks what SecAgg would check of a masked
// vector (the round and session open, the client in the session and not
// banned, the vector's length and bits, the masked step open), pins the
// digest — a second, different
// vector of the client in this session is refused, so that two
// front-ends never publish different pieces under the client's message
// ids — and names the shard round and the client's position, under
// which the front-end publishes and commits the pieces (shard.Upload).
// A client whose commit was admitted already (a retry through another
// front-end) is told so (Taken): the front-end sends its step on without
// publishing again.
func (s *Server) ShardTicket(ctx context.Context, req *connect.Request[fedv1.ShardTicketRequest]) (*connect.Response[fedv1.ShardTicketResponse], error) {
	id, err := s.authenticate(req.Header())
	if err != nil {
		s.met.reject("auth")
		return nil, err
	}
	msg := req.Msg
	resp := &fedv1.ShardTicketResponse{Client: id, MaxBytes: s.roundBytes(true, msg.GetJson())}
	if len(msg.GetDigest()) == 0 {
		return connect.NewResponse(resp), nil
	}
	if len(msg.GetDigest()) != 32 {
		return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "a digest of %d bytes, want 32", len(msg.GetDigest()))
	}
	at, err := s.admit(id, int(msg.GetRound()), true)
	if err != nil {
		return nil, err
	}
	sa := at.sa
	switch ses := msg.GetSession(); {
	case ses != "" && ses != sa.session:
		return nil, s.rejectErr(connect.CodeFailedPrecondition, "late", "session %q of round %d is over; the open one is %q", ses, at.round, sa.session)
	case sa.co == nil:
		return nil, s.rejectErr(connect.CodeFailedPrecondition, "not-sharded", "round %d aggregates in the server's process: send the masked vector to the server", at.round)
	}
	me, ok := sa.slot[id]
	if !ok {
		return nil, s.rejectErr(connect.CodePermissionDenied, "banned", "client %d is banned from this run's secure aggregation", id)
	}
	if int(msg.GetWords()) != sa.p.Len || int(msg.GetModulusBits()) != sa.p.Bits {
		return nil, s.rejectErr(connect.CodeInvalidArgument, "shape", "a masked vector of %d words mod 2^%d; the round wants %d words mod 2^%d",
			msg.GetWords(), msg.GetModulusBits(), sa.p.Len, sa.p.Bits)
	}
	if !sa.pin(me, [32]byte(msg.GetDigest())) {
		return nil, s.rejectErr(connect.CodeAlreadyExists, "duplicate", "client %d already sent another masked vector in session %s", id, sa.session)
	}
	resp.Taken = sa.co.IsAdmitted(me)
	switch open := sa.ses.Open(); {
	case open < secagg.StepMasked:
		return nil, s.rejectErr(connect.CodeUnavailable, "early", "step %d is not open yet", secagg.StepMasked)
	case open > secagg.StepMasked && !resp.Taken:
		return nil, s.rejectErr(connect.CodeFailedPrecondition, "late", "step %d of the round is closed", secagg.StepMasked)
	}
	c := sa.co.Config()
	resp.Run, resp.ShardRound, resp.Shards = c.Run, sa.shardRound, uint32(c.Shards)
	resp.Words, resp.Clients, resp.Bits, resp.Position = uint32(c.Len), uint32(c.Clients), uint32(c.Bits), me
	return connect.NewResponse(resp), nil
}

// pin records d as the digest of position me's masked vector in the
// session, and reports whether it is the first or the same as the first:
// JetStream drops a piece published again under the same message id, so
// two different vectors of one client must never both be published (the
// aggregators would hold pieces of one under the other's commit).
func (sa *saRound) pin(me uint32, d [32]byte) bool {
	sa.pinMu.Lock()
	defer sa.pinMu.Unlock()
	if sa.pins == nil {
		sa.pins = map[uint32][32]byte{}
	}
	prev, pinned := sa.pins[me]
	if !pinned {
		sa.pins[me] = d
	}
	return !pinned || prev == d
}

// Published takes the masked-vector step of the client whose
// credential a front-end forwards, once the front-end has published and
// committed the client's pieces (ShardTicket, shard.Upload): the session
// counts the client's admitted commit as its masked vector (refused
// when there is none), and the call answers as SecAgg answers a masked
// vector.
func (s *Server) Published(ctx context.Context, req *connect.Request[fedv1.PublishedRequest]) (*connect.Response[fedv1.PublishedResponse], error) {
	msg := &fedv1.SecAggRequest{Round: req.Msg.GetRound(), Session: req.Msg.GetSession(),
		Step: &fedv1.SecAggRequest_Masked{Masked: &fedv1.MaskedUpload{ModulusBits: req.Msg.GetModulusBits()}}}
	resp, err := s.secAgg(ctx, req.Header(), msg, true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&fedv1.PublishedResponse{Response: resp}), nil
}

// published reports whether err, refusing position me's masked vector
// published by a front-end (Published), refuses a retry of
// one the session holds already: the client's commit was admitted and
// its place in the step taken (ErrDuplicate) or the step closed with it
// (ErrLate). Its answer is the one it would have had.
func published(sa *saRound, m secagg.Message, err error) bool {
	mi, ok := m.(*secagg.MaskedInput)
	return ok && len(mi.Y) == 0 && sa.co != nil && (errors.Is(err, secagg.ErrDuplicate) || errors.Is(err, secagg.ErrLate)) &&
		sa.co.IsAdmitted(mi.From)
}
