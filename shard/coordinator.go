package shard

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/secagg"
)

// ErrAborted is returned (wrapped) by an aggregator or coordinator when
// the round was aborted: it releases nothing.
var ErrAborted = errors.New("shard: round aborted")

// Coordinator runs one round's secagg key and share steps (through
// Server, exactly as a single server), admits the clients' sharded
// masked inputs, hands the aggregators the mask streams and assembles
// their shards of the sum.
type Coordinator struct {
	c     Config
	nc    *nats.Conn
	js    jetstream.JetStream
	srv   *secagg.Server
	round uint64

	mu       sync.Mutex
	sub      *nats.Subscription
	closed   bool
	admitted int
	commits  map[uint32][]byte // admitted commits, by client
	admits   []admission
}

// admission is the publication of one client's admission: its future
// (nil when it could not be sent asynchronously) and what to publish
// again if it is not acknowledged.
type admission struct {
	f        jetstream.PubAckFuture
	subj, id string
	data     []byte
}

// NewCoordinator sets up the run (Setup), announces round to the
// aggregators with its shape — p.Len words, p.N clients, p.Bits bits, at
// most the run's c.Len, c.Clients and c.Bits — and returns the round's
// coordinator with secagg parameters p.
func NewCoordinator(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, c Config, p secagg.Params, round uint64) (*Coordinator, error) {
	if err := Setup(ctx, js, c); err != nil {
		return nil, err
	}
	rc, err := c.forRound(p.Len, p.N, p.Bits)
	if err != nil {
		return nil, err
	}
	// A piece, a shard's result and its checkpoint are single messages.
	if w := (p.Len + c.Shards - 1) / c.Shards; 5+(p.N+7)/8+4*w > int(nc.MaxPayload()) {
		return nil, fmt.Errorf("shard: round %d: a shard of %d words (%d words over %d shards) and %d clients does not fit the NATS maximum payload of %d bytes; use more shards",
			round, w, p.Len, c.Shards, p.N, nc.MaxPayload())
	}
	srv, err := secagg.NewServer(p)
	if err != nil {
		return nil, err
	}
	if err := publish(ctx, js, fmt.Sprintf("open round %d", round),
		&nats.Msg{Subject: rc.ctlSubject(round, "open"), Data: encodeOpen(rc)}, fmt.Sprintf("open.%d", round)); err != nil {
		return nil, err
	}
	return &Coordinator{c: rc.withDefaults(), nc: nc, js: js, srv: srv, round: round, commits: map[uint32][]byte{}}, nil
}

// Config returns the round's Config: the run's, with the round's vector
// length, clients and bits. Clients upload with it.
func (co *Coordinator) Config() Config { return co.c }

// Server is the round's secagg server: the caller runs the key and share
// steps on it (AddKeys, FinishKeys, AddShares, FinishShares, and the
// optional check round) and the unmasking step (AddUnmask) as with the
// single server; masked inputs go through Listen and CloseInput instead.
func (co *Coordinator) Server() *secagg.Server { return co.srv }

// Listen starts admitting commits (the masked-input step). Each commit
// is admitted at most once per client: secagg.Server.RecordMaskedInput
// checks that the client shared its keys and was not admitted before.
// The same commit again (a client retrying after a lost reply) is
// answered as admitted; a different one from an admitted client is
// refused.
func (co *Coordinator) Listen() error {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.sub != nil {
		return errors.New("shard: coordinator already listening")
	}
	sub, err := co.nc.Subscribe(co.c.commitSubject(), co.commit)
	if err != nil {
		return fmt.Errorf("shard: subscribe %s: %w", co.c.commitSubject(), err)
	}
	co.sub = sub
	return nil
}

// commit handles one client's commit: the empty reply admits it, any
// other reply says why not.
func (co *Coordinator) commit(m *nats.Msg) {
	refuse := func(err error) { _ = m.Respond([]byte(err.Error())) }
	round, client, d, err := decodeCommit(m.Data, co.c.Shards)
	if err != nil {
		refuse(err)
		return
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if prev, ok := co.commits[client]; ok && round == co.round {
		// A retried commit (its reply was lost) is answered again; a
		// different one is the client changing its input: refused.
		if bytes.Equal(prev, m.Data) {
			_ = m.Respond(nil)
		} else {
			refuse(fmt.Errorf("client %d already committed other pieces in round %d", client, round))
		}
		return
	}
	switch {
	case round != co.round:
		refuse(fmt.Errorf("round %d is not the open round %d", round, co.round))
		return
	case co.closed:
		refuse(fmt.Errorf("round %d: the masked-input step is closed", round))
		return
	}
	if err := co.srv.RecordMaskedInput(client); err != nil {
		refuse(err)
		return
	}
	// The client is in U3 now: its admission must reach the
	// aggregators. It is published asynchronously; CloseInput waits for
	// its acknowledgement and publishes it again (same id) if none came
	// (too many in flight, a stream leader that died).
	a := admission{subj: co.c.ctlSubject(round, "admit"), id: fmt.Sprintf("admit.%d.%d", client, round),
		data: encodeCommit(round, client, d)}
	if f, err := co.js.PublishAsync(a.subj, a.data, jetstream.WithMsgID(a.id)); err == nil {
		a.f = f
	}
	co.admits = append(co.admits, a)
	co.admitted++
	co.commits[client] = bytes.Clone(m.Data)
	_ = m.Respond(nil)
}

// Admitted returns how many clients were admitted so far.
func (co *Coordinator) Admitted() int {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.admitted
}

// CloseInput ends the masked-input step: later commits are refused, the
// admissions are confirmed stored (those not acknowledged within a few
// seconds are published again, until ctx ends), the close (|U3|) is
// published to the aggregators, and the secagg server's unmask requests
// are returned for the caller to deliver.
func (co *Coordinator) CloseInput(ctx context.Context) ([]*secagg.UnmaskRequest, error) {
	co.mu.Lock()
	co.closed = true
	sub, admits := co.sub, co.admits
	co.mu.Unlock()
	if sub != nil {
		if err := sub.Unsubscribe(); err != nil {
			return nil, err
		}
	}
	deadline := time.NewTimer(attemptTimeout) // for all the futures at once
	defer deadline.Stop()
	expired := false
	for _, a := range admits {
		if a.f != nil && !expired {
			select {
			case <-a.f.Ok():
				continue
			case <-a.f.Err():
			case <-deadline.C:
				expired = true
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else if a.f != nil {
			select {
			case <-a.f.Ok():
				continue
			default:
			}
		}
		if err := publish(ctx, co.js, "admission", &nats.Msg{Subject: a.subj, Data: a.data}, a.id); err != nil {
			return nil, co.Abort(ctx, fmt.Errorf("admission not stored: %w", err))
		}
	}
	co.mu.Lock()
	n3 := co.admitted
	co.mu.Unlock()
	reqs, err := co.srv.FinishMaskedInput()
	if err != nil {
		return nil, co.Abort(ctx, err)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n3))
	if err := publish(ctx, co.js, fmt.Sprintf("publish close of round %d", co.round),
		&nats.Msg{Subject: co.c.ctlSubject(co.round, "close"), Data: b[:]}, fmt.Sprintf("close.%d", co.round)); err != nil {
		return nil, err
	}
	return reqs, nil
}

// Abort ends the round with nothing released, whatever step it is in:
// it stops admitting commits, and the aggregators stop the round
// (ErrAborted) and go on to the next. A
// caller aborts a round it gives up on (a failed secure-aggregation
// session, a server stopping). It returns err wrapped in ErrAborted.
func (co *Coordinator) Abort(ctx context.Context, err error) error {
	co.mu.Lock()
	co.closed = true // no commit is admitted any more
	sub := co.sub
	co.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe() // the next round's coordinator answers commits
	}
	_ = Abort(ctx, co.js, co.c, co.round, err.Error())
	return fmt.Errorf("%w: round %d: %w", ErrAborted, co.round, err)
}

// Abort publishes the abort of round of run c without its coordinator:
// a restarted caller aborts a round its previous incarnation may have
// left open. An abort of a round whose aggregators already published
// their results changes nothing.
func Abort(ctx context.Context, js jetstream.JetStream, c Config, round uint64, why string) error {
	return retry(ctx, fmt.Sprintf("publish abort of round %d", round), func(ctx context.Context) error {
		_, err := js.Publish(ctx, c.ctlSubject(round, "abort"), []byte(why))
		return err
	})
}

// streamsPerMsg bounds the mask streams in one control message: 510 KB,
// half of NATS's default maximum payload (a variable for tests).
var streamsPerMsg = 30_000

// hdrPart numbers a part of the mask streams: "i/n".
const hdrPart = "Privrec-Part"

func encodeStreams(st []secagg.MaskStream) []byte {
	out := make([]byte, 0, 17*len(st))
	for _, s := range st {
		out = append(out, s.Key[:]...)
		if s.Sub {
			out = append(out, 1)
		} else {
			out = append(out, 0)
		}
	}
	return out
}

func decodeStreams(b []byte) ([]secagg.MaskStream, error) {
	if len(b)%17 != 0 {
		return nil, fmt.Errorf("shard: mask streams of %d bytes, not a multiple of 17", len(b))
	}
	out := make([]secagg.MaskStream, len(b)/17)
	for i := range out {
		r := b[17*i:]
		out[i].Key = [16]byte(r)
		switch r[16] {
		case 0:
		case 1:
			out[i].Sub = true
		default:
			return nil, fmt.Errorf("shard: mask stream %d: sign byte %d", i, r[16])
		}
	}
	return out, nil
}

// AddMaskedInput publishes client m.From's masked input to the round's
// shards and commits it (Upload) on the client's behalf: a Coordinator
// is a secagg.Aggregator, the sharded backend of a secagg.Session.
//
// A masked input without words stands for one that was published and
// committed by another process on the client's behalf (a front-end,
// privrec front): it is taken when the client's commit was admitted,
// and refused with ErrNotAdmitted otherwise.
func (co *Coordinator) AddMaskedInput(ctx context.Context, m *secagg.MaskedInput) error {
	if len(m.Y) == 0 {
		if !co.IsAdmitted(m.From) {
			return fmt.Errorf("%w: client %d in round %d", ErrNotAdmitted, m.From, co.round)
		}
		return nil
	}
	_, err := Upload(ctx, co.nc, co.js, co.c, co.round, m)
	return err
}

// ErrNotAdmitted is returned (wrapped) by AddMaskedInput for a masked
// input said to be published elsewhere whose client's commit was not
// admitted.
var ErrNotAdmitted = errors.New("shard: no admitted commit")

// IsAdmitted reports whether client's commit was admitted in the round.
func (co *Coordinator) IsAdmitted(client uint32) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	_, ok := co.commits[client]
	return ok
}

// Sum ends the round once the caller has fed the unmasking responses
// to Server: it reconstructs the mask streams, publishes them to the
// aggregators, waits (until ctx ends) for every shard's result and
// returns the whole unmasked sum — the sum secagg.Server.Result would
// return.
func (co *Coordinator) Sum(ctx context.Context) ([]uint32, error) {
	streams, err := co.srv.MaskStreams()
	if err != nil {
		return nil, co.Abort(ctx, err)
	}
	// In parts of at most streamsPerMsg streams (17 B each), so that a
	// round of any size fits NATS's maximum payload.
	parts := max(1, (len(streams)+streamsPerMsg-1)/streamsPerMsg)
	for i := range parts {
		chunk := streams[i*len(streams)/parts : (i+1)*len(streams)/parts]
		msg := &nats.Msg{Subject: co.c.ctlSubject(co.round, "unmask"), Data: encodeStreams(chunk), Header: nats.Header{}}
		msg.Header.Set(hdrPart, fmt.Sprintf("%d/%d", i, parts))
		if err := publish(ctx, co.js, fmt.Sprintf("publish mask streams of round %d", co.round), msg, fmt.Sprintf("unmask.%d.%d", co.round, i)); err != nil {
			return nil, err
		}
	}
	// The results are read one by one from the control stream: each the
	// next message on the round's result subjects from a sequence on. A
	// stateless request, answered by whichever server leads the stream
	// (a consumer's Fetch on the stream's killed leader went unanswered
	// for good, TestClusterLeaderKill).
	var cs jetstream.Stream
	if err := retry(ctx, "control stream", func(ctx context.Context) error {
		var err error
		cs, err = co.js.Stream(ctx, co.c.ctlStream())
		return err
	}); err != nil {
		return nil, err
	}
	filter := co.c.ctlSubject(co.round, "result.*")
	seq := uint64(1)
	sum := make([]uint32, co.c.Len)
	got := make([]bool, co.c.Shards)
	for left := co.c.Shards; left > 0; {
		var msg *jetstream.RawStreamMsg
		err := retry(ctx, fmt.Sprintf("round %d: waiting for %d shard results", co.round, left), func(ctx context.Context) error {
			var err error
			msg, err = cs.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) { // not yet
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("shard: round %d: waiting for %d shard results: %w", co.round, left, ctx.Err())
			case <-time.After(fetchWait):
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		seq = msg.Sequence + 1
		s, w, err := co.checkResult(msg.Subject, msg.Data, msg.Header)
		if err != nil {
			// A forgery, or a result of another round or run: skipped,
			// the genuine one is still to come.
			co.log().Warn("shard result refused", "run", co.c.Run, "round", co.round, "subject", msg.Subject, "err", err)
			continue
		}
		if got[s] {
			continue
		}
		a, b := co.c.Range(s)
		copy(sum[a:b], w)
		got[s] = true
		left--
	}
	return sum, nil
}

// checkResult returns the shard and words of a result message, or why
// it is refused: a bad subject or size, or — when the coordinator has
// the aggregators' keys — a signature missing or not by the shard's
// aggregator for this run, round and shard.
func (co *Coordinator) checkResult(subj string, data []byte, hdr nats.Header) (int, []uint32, error) {
	s, err := strconv.Atoi(subj[strings.LastIndexByte(subj, '.')+1:])
	if err != nil || s < 0 || s >= co.c.Shards {
		return 0, nil, fmt.Errorf("no shard %q of %d", subj[strings.LastIndexByte(subj, '.')+1:], co.c.Shards)
	}
	a, b := co.c.Range(s)
	if len(data) != 4*(b-a) {
		return s, nil, fmt.Errorf("result of shard %d has %d bytes, want %d", s, len(data), 4*(b-a))
	}
	if co.c.AggregatorKeys != nil {
		h := hdr.Get(hdrSig)
		if h == "" {
			return s, nil, fmt.Errorf("result of shard %d is unsigned", s)
		}
		sig, err := base64.StdEncoding.DecodeString(h)
		if err != nil || !ed25519.Verify(co.c.AggregatorKeys[s], resultMessage(co.c.Run, co.round, s, data), sig) {
			return s, nil, fmt.Errorf("result of shard %d is not signed by its aggregator for run %s, round %d", s, co.c.Run, co.round)
		}
	}
	w, err := decodeWords(data)
	return s, w, err
}

func (co *Coordinator) log() *slog.Logger {
	if co.c.Logger != nil {
		return co.c.Logger
	}
	return slog.Default()
}

// next returns the next message of a consumer, waiting until ctx ends.
func next(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			return nil, err
		}
		for m := range b.Messages() {
			return m, nil
		}
		if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
	}
}

// Broadcast publishes the next broadcast (the model the round's sum
// produced) on privrec.<run>.broadcast, once per round, and purges the
// round's uploads and checkpoints.
func (co *Coordinator) Broadcast(ctx context.Context, data []byte) error {
	msg := &nats.Msg{Subject: co.c.broadcastSubject(), Data: data, Header: nats.Header{}}
	msg.Header.Set(hdrRound, strconv.FormatUint(co.round, 10))
	if err := publish(ctx, co.js, fmt.Sprintf("broadcast of round %d", co.round), msg, fmt.Sprintf("broadcast.%d", co.round)); err != nil {
		return err
	}
	return co.Purge(ctx)
}

// Purge deletes the round's uploads and checkpoints once its sum is
// assembled (Broadcast calls it).
func (co *Coordinator) Purge(ctx context.Context) error {
	for s := range co.c.Shards {
		if err := retry(ctx, fmt.Sprintf("purge round %d shard %d", co.round, s), func(ctx context.Context) error {
			st, err := co.js.Stream(ctx, co.c.upStream(s))
			if err != nil {
				return err
			}
			return st.Purge(ctx, jetstream.WithPurgeSubject(co.c.upSubject(co.round, s)))
		}); err != nil {
			return err
		}
	}
	for s := range co.c.Shards {
		if err := retry(ctx, fmt.Sprintf("purge checkpoint of round %d shard %d", co.round, s), func(ctx context.Context) error {
			kv, err := co.js.KeyValue(ctx, co.c.ckptBucket())
			if err != nil {
				return err
			}
			return kv.Purge(ctx, ckptKey(co.round, s))
		}); err != nil {
			return err
		}
	}
	return nil
}

var _ secagg.Aggregator = (*Coordinator)(nil)
