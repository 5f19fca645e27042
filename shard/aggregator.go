package shard

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/secagg"
)

const (
	fetchWait   = 100 * time.Millisecond
	notYetDelay = 20 * time.Millisecond
	// pullExpiry bounds the pull requests of an aggregator's control
	// consumer: JetStream heartbeats within a pull every pullExpiry/2,
	// and two missed heartbeats have the pull sent again. On the test
	// cluster a new ordered consumer's first pull was at times lost:
	// with 5 s a round's start stalled 5 s (TestClusterSumEquals-
	// SingleServer, 1 round in 6), with 1 s at most 1 s.
	pullExpiry = time.Second
)

// Aggregator folds one shard of the run's rounds.
type Aggregator struct {
	c     Config
	js    jetstream.JetStream
	shard int
	// OnFold, if set, is called after each piece folded with the number
	// folded so far in the round (tests use it to crash an aggregator).
	OnFold func(folded int)
}

// AggStats reports an aggregator's round.
type AggStats struct {
	// Folded is |U3|: the pieces in the shard sum.
	Folded int
	// Resumed is the number of pieces found in the checkpoint at start.
	Resumed int
	// Duplicates counts redelivered or replayed pieces of clients
	// already folded; Rejected counts pieces refused (not admitted,
	// wrong digest or size, malformed).
	Duplicates, Rejected int
	// Deferred counts pieces that arrived before their client's
	// admission (held until it arrives, or redelivered later).
	Deferred int
	// Checkpoints counts checkpoint writes.
	Checkpoints int
	// Streams is the number of mask streams removed, and Unmasking the
	// time spent expanding this shard's range of them.
	Streams   int
	Unmasking time.Duration
}

// NewAggregator returns the aggregator of shard s.
func NewAggregator(js jetstream.JetStream, c Config, s int) (*Aggregator, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if s < 0 || s >= c.Shards {
		return nil, fmt.Errorf("shard: shard %d of %d", s, c.Shards)
	}
	c = c.withDefaults()
	c.CheckpointEvery = min(c.CheckpointEvery, c.MaxAckPending)
	return &Aggregator{c: c, js: js, shard: s}, nil
}

func ckptKey(round uint64, s int) string { return fmt.Sprintf("r%d.s%d", round, s) }

// checkpoint is an aggregator's durable state for a round: whether its
// result was published, the folded clients (one bit each) and the shard
// sum (before unmasking; after it when done).
type checkpoint struct {
	done   bool
	count  int
	folded []byte
	sum    []uint32
}

func (k *checkpoint) encode() []byte {
	out := make([]byte, 5, 5+len(k.folded)+4*len(k.sum))
	if k.done {
		out[0] = 1
	}
	binary.BigEndian.PutUint32(out[1:], uint32(k.count))
	out = append(out, k.folded...)
	return append(out, encodeWords(k.sum)...)
}

func decodeCheckpoint(b []byte, clients, words int) (*checkpoint, error) {
	nb := (clients + 7) / 8
	if len(b) != 5+nb+4*words || b[0] > 1 {
		return nil, fmt.Errorf("shard: checkpoint of %d bytes, want %d", len(b), 5+nb+4*words)
	}
	sum, _ := decodeWords(b[5+nb:])
	return &checkpoint{done: b[0] == 1, count: int(binary.BigEndian.Uint32(b[1:])),
		folded: append([]byte(nil), b[5:5+nb]...), sum: sum}, nil
}

func bit(b []byte, i uint32) bool { return b[i/8]&(1<<(i%8)) != 0 }
func setBit(b []byte, i uint32)   { b[i/8] |= 1 << (i % 8) }

// Round folds, unmasks and publishes the aggregator's shard of round,
// resuming from its checkpoint and durable consumer if an earlier run
// of it stopped. It returns when its result is published, the round is
// aborted (ErrAborted), or ctx ends — which, before the result, is a
// crash: nothing pending is acknowledged or checkpointed.
func (ag *Aggregator) Round(ctx context.Context, round uint64) (AggStats, error) {
	st, err := ag.round(ctx, round)
	if errors.Is(err, ErrAborted) { // its durable consumer is of no more use
		_ = ag.js.DeleteConsumer(ctx, ag.c.upStream(ag.shard), consumerName(round, ag.shard))
	}
	return st, err
}

func consumerName(round uint64, s int) string { return fmt.Sprintf("agg-%d-%d", round, s) }

func (ag *Aggregator) round(ctx context.Context, round uint64) (AggStats, error) {
	var st AggStats
	c, err := ag.roundConfig(ctx, round)
	if err != nil {
		return st, err
	}
	lo, hi := c.Range(ag.shard)
	// Every request to JetStream is retried (retry) through a leader
	// election on a cluster; each is idempotent.
	var kv jetstream.KeyValue
	if err := retry(ctx, "bucket "+c.ckptBucket(), func(ctx context.Context) error {
		var err error
		kv, err = ag.js.KeyValue(ctx, c.ckptBucket())
		return err
	}); err != nil {
		return st, err
	}
	key := ckptKey(round, ag.shard)
	ck := &checkpoint{folded: make([]byte, (c.Clients+7)/8), sum: make([]uint32, hi-lo)}
	var e jetstream.KeyValueEntry
	err = retry(ctx, "checkpoint "+key, func(ctx context.Context) error {
		var err error
		e, err = kv.Get(ctx, key)
		return err
	})
	if err == nil {
		if ck, err = decodeCheckpoint(e.Value(), c.Clients, hi-lo); err != nil {
			return st, fmt.Errorf("%w (key %s)", err, key)
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, err
	}
	st.Resumed = ck.count
	if ck.done { // crashed after unmasking: publish the result again
		return st, ag.publishResult(ctx, round, ck.sum)
	}
	// inCkpt: folded and durable, so a redelivery may be acknowledged.
	inCkpt := append([]byte(nil), ck.folded...)

	upCfg := jetstream.ConsumerConfig{
		Durable:       consumerName(round, ag.shard),
		FilterSubject: c.upSubject(round, ag.shard),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxAckPending: c.MaxAckPending,
	}
	var up jetstream.Consumer
	consumer := func() error {
		return retry(ctx, fmt.Sprintf("consumer of shard %d", ag.shard), func(ctx context.Context) error {
			var err error
			up, err = ag.js.CreateOrUpdateConsumer(ctx, c.upStream(ag.shard), upCfg)
			return err
		})
	}
	if err := consumer(); err != nil {
		return st, err
	}

	admitted := make([][32]byte, c.Clients)
	have := make([]byte, (c.Clients+7)/8)
	closed, n3 := false, -1
	var streams []secagg.MaskStream
	var parts [][]secagg.MaskStream // of the mask streams, as they arrive
	nParts := 0
	haveStreams := false
	var pending []jetstream.Msg
	var fresh []uint32 // folded since the last checkpoint

	// The control subjects arrive in order on their own goroutine, from
	// an ordered consumer; should it fail (its server died), another
	// goes on after the last message passed on.
	ctlCh := make(chan jetstream.Msg, 256)
	ctlErr := make(chan error, 1)
	done := make(chan struct{}) // Round returned: the goroutine stops
	var itMu sync.Mutex
	var ctlIter jetstream.MessagesContext
	gctx, gcancel := context.WithCancel(ctx) // the goroutine's requests
	defer func() {
		gcancel()
		itMu.Lock()
		close(done)
		if ctlIter != nil {
			ctlIter.Stop()
		}
		itMu.Unlock()
	}()
	go func() {
		defer close(ctlCh)
		var last uint64 // stream sequence of the last message passed on
		for {
			cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.ctlSubject(round, ">")}}
			if last > 0 {
				cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, last+1
			}
			var it jetstream.MessagesContext
			if err := retry(gctx, "control consumer", func(ctx context.Context) error {
				cons, err := ag.js.OrderedConsumer(ctx, c.ctlStream(), cfg)
				if err != nil {
					return err
				}
				it, err = cons.Messages(jetstream.PullExpiry(pullExpiry))
				return err
			}); err != nil {
				ctlErr <- err
				return
			}
			itMu.Lock()
			select {
			case <-done:
				itMu.Unlock()
				it.Stop()
				return
			default:
			}
			ctlIter = it
			itMu.Unlock()
			for {
				m, err := it.Next()
				if err != nil {
					it.Stop()
					select {
					case <-done:
						return
					case <-ctx.Done():
						return
					case <-time.After(notYetDelay):
					}
					if permanent(err) {
						ctlErr <- err
						return
					}
					break // another consumer
				}
				if md, err := m.Metadata(); err == nil {
					last = md.Sequence.Stream
				}
				select {
				case ctlCh <- m:
				case <-ctx.Done():
					return
				case <-done:
					return
				}
			}
		}
	}()
	applied := 0
	// Pieces that arrive before their client's admission (the usual
	// case: a client commits after its pieces are stored) are held,
	// unacknowledged, up to half of MaxAckPending, and folded when the
	// admission arrives; beyond that they are redelivered later.
	held := map[uint32][]jetstream.Msg{}
	nHeld := 0
	var ready []jetstream.Msg
	apply := func(m jetstream.Msg) error {
		applied++
		var err error
		switch subj := m.Subject(); subj {
		case c.ctlSubject(round, "admit"):
			r, u, d, err := decodeCommit(m.Data(), c.Shards)
			if err != nil || r != round || int64(u) >= int64(c.Clients) {
				return fmt.Errorf("shard: bad admission in round %d: %v", round, err)
			}
			admitted[u] = d[ag.shard]
			setBit(have, u)
			if ms := held[u]; ms != nil {
				ready = append(ready, ms...)
				nHeld -= len(ms)
				delete(held, u)
			}
		case c.ctlSubject(round, "close"):
			if len(m.Data()) != 4 {
				return fmt.Errorf("shard: bad close of round %d", round)
			}
			closed, n3 = true, int(binary.BigEndian.Uint32(m.Data()))
		case c.ctlSubject(round, "unmask"):
			var i, n int
			if _, err := fmt.Sscanf(m.Headers().Get(hdrPart), "%d/%d", &i, &n); err != nil || i < 0 || i >= n || (parts != nil && len(parts) != n) {
				return fmt.Errorf("shard: mask streams of round %d: bad part %q", round, m.Headers().Get(hdrPart))
			}
			if parts == nil {
				parts = make([][]secagg.MaskStream, n)
			}
			if parts[i] == nil {
				if parts[i], err = decodeStreams(m.Data()); err != nil {
					return err
				}
				if parts[i] == nil {
					parts[i] = []secagg.MaskStream{}
				}
				nParts++
			}
			if nParts == n {
				streams = slices.Concat(parts...)
				haveStreams = true
			}
		case c.ctlSubject(round, "abort"):
			return fmt.Errorf("%w: round %d: %s", ErrAborted, round, m.Data())
		}
		return nil
	}
	// readCtl applies the control messages that arrived; with wait, it
	// first waits for one (or ctx's end).
	readCtl := func(wait bool) error {
		for {
			var m jetstream.Msg
			var ok bool
			if wait {
				select {
				case m, ok = <-ctlCh:
				case <-ctx.Done():
					return ctx.Err()
				}
				wait = false
			} else {
				select {
				case m, ok = <-ctlCh:
				default:
					return nil
				}
			}
			if !ok {
				select {
				case err := <-ctlErr:
					return fmt.Errorf("shard: control consumer: %w", err)
				default:
					return fmt.Errorf("shard: control consumer stopped: %w", ctx.Err())
				}
			}
			if err := apply(m); err != nil {
				return err
			}
		}
	}
	put := func() error {
		b := ck.encode()
		return retry(ctx, "checkpoint "+key, func(ctx context.Context) error {
			_, err := kv.Put(ctx, key, b)
			return err
		})
	}
	save := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := put(); err != nil {
			return err
		}
		st.Checkpoints++
		for _, u := range fresh {
			setBit(inCkpt, u)
		}
		fresh = fresh[:0]
		for _, m := range pending {
			_ = m.Ack()
		}
		pending = pending[:0]
		return nil
	}
	handle := func(m jetstream.Msg) {
		h := m.Headers()
		u64, err1 := strconv.ParseUint(h.Get(hdrClient), 10, 32)
		r, err2 := strconv.ParseUint(h.Get(hdrRound), 10, 64)
		s, err3 := strconv.Atoi(h.Get(hdrShard))
		if err1 != nil || err2 != nil || err3 != nil || r != round || s != ag.shard || u64 >= uint64(c.Clients) {
			st.Rejected++
			_ = m.Term()
			return
		}
		u := uint32(u64)
		switch {
		case bit(ck.folded, u):
			st.Duplicates++
			if bit(inCkpt, u) {
				_ = m.Ack()
			} else {
				pending = append(pending, m)
			}
			return
		case !bit(have, u):
			if closed { // never admitted: dropped
				st.Rejected++
				_ = m.Term()
			} else if st.Deferred++; nHeld < c.MaxAckPending/2 {
				held[u] = append(held[u], m)
				nHeld++
			} else {
				_ = m.NakWithDelay(notYetDelay)
			}
			return
		}
		data := m.Data()
		if len(data) != 4*(hi-lo) || digest(u, round, ag.shard, data) != admitted[u] {
			st.Rejected++
			_ = m.Term()
			return
		}
		for i := range ck.sum {
			ck.sum[i] += binary.LittleEndian.Uint32(data[4*i:])
		}
		setBit(ck.folded, u)
		ck.count++
		fresh = append(fresh, u)
		pending = append(pending, m)
		if ag.OnFold != nil {
			ag.OnFold(ck.count)
		}
	}

	// Catch up with the control messages already stored (a restart, or
	// a late start) before any piece, so none is deferred needlessly.
	var info *jetstream.StreamInfo
	if err := retry(ctx, "control stream", func(ctx context.Context) error {
		cs, err := ag.js.Stream(ctx, c.ctlStream())
		if err != nil {
			return err
		}
		info, err = cs.Info(ctx, jetstream.WithSubjectFilter(c.ctlSubject(round, ">")))
		return err
	}); err != nil {
		return st, err
	}
	backlog := 0
	for _, n := range info.State.Subjects {
		backlog += int(n)
	}
	for applied < backlog {
		if err := readCtl(true); err != nil {
			return st, err
		}
	}
	// The pieces, fetched from the durable consumer in batches of at
	// most CheckpointEvery, each Fetch a pull request of its own that
	// expires after fetchWait: a pull lost with its consumer's leader
	// costs one wait, and the next goes to the new leader. (A Messages
	// iterator read with short waits never noticed a lost pull, and a
	// new R3 consumer's first pull was at times lost: rounds stalled for
	// its 5 s expiry, BenchmarkClusterRound.) Should a Fetch fail, the
	// consumer is created again (the same config: idempotent); pieces
	// held or not yet acknowledged are redelivered after AckWait and
	// counted as duplicates.
	var batch jetstream.MessageBatch
	nextPiece := func() (jetstream.Msg, error) {
		if batch == nil {
			b, err := up.Fetch(c.CheckpointEvery, jetstream.FetchMaxWait(fetchWait))
			if err != nil {
				return nil, err
			}
			batch = b
		}
		if m, ok := <-batch.Messages(); ok {
			return m, nil
		}
		err := batch.Error()
		batch = nil
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		return nil, nats.ErrTimeout
	}
	for {
		if err := readCtl(false); err != nil {
			return st, err
		}
		for len(ready) > 0 {
			m := ready[0]
			ready = ready[1:]
			handle(m)
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
		}
		if closed && nHeld > 0 { // never admitted
			for _, ms := range held {
				for _, m := range ms {
					st.Rejected++
					_ = m.Term()
				}
			}
			clear(held)
			nHeld = 0
		}
		if len(pending) >= c.CheckpointEvery {
			if err := save(); err != nil {
				return st, err
			}
		}
		if closed && ck.count >= n3 {
			break
		}
		m, err := nextPiece()
		switch {
		case ctx.Err() != nil:
			return st, ctx.Err() // a crash: nothing more acknowledged
		case errors.Is(err, nats.ErrTimeout):
			if err := save(); err != nil { // idle: checkpoint
				return st, err
			}
			continue
		case err != nil:
			if permanent(err) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return st, fmt.Errorf("shard: consume shard %d: %w", ag.shard, err)
			}
			if err := consumer(); err != nil {
				return st, err
			}
			continue
		}
		handle(m)
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		if len(pending) >= c.CheckpointEvery {
			if err := save(); err != nil {
				return st, err
			}
		}
	}
	if err := save(); err != nil {
		return st, err
	}
	st.Folded = ck.count
	if ck.count != n3 {
		return st, fmt.Errorf("shard: shard %d folded %d pieces, %d admitted", ag.shard, ck.count, n3)
	}
	for !haveStreams {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if err := readCtl(true); err != nil {
			return st, err
		}
	}
	t0 := time.Now()
	Unmask(ck.sum, lo, streams, c.Bits)
	st.Streams, st.Unmasking = len(streams), time.Since(t0)
	ck.done = true
	if err := put(); err != nil {
		return st, err
	}
	if err := ag.publishResult(ctx, round, ck.sum); err != nil {
		return st, err
	}
	_ = ag.js.DeleteConsumer(ctx, c.upStream(ag.shard), consumerName(round, ag.shard))
	return st, nil
}

// roundConfig waits (until ctx ends) for round's open message and
// returns the run's Config with the round's shape, or ErrAborted if the
// round was aborted first.
func (ag *Aggregator) roundConfig(ctx context.Context, round uint64) (Config, error) {
	var cs jetstream.Stream
	if err := retry(ctx, "control stream", func(ctx context.Context) error {
		var err error
		cs, err = ag.js.Stream(ctx, ag.c.ctlStream())
		return err
	}); err != nil {
		return ag.c, err
	}
	last := func(what string) (*jetstream.RawStreamMsg, error) {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		return cs.GetLastMsgForSubject(actx, ag.c.ctlSubject(round, what))
	}
	for {
		m, err := last("open")
		if err == nil {
			l, n, bits, err := decodeOpen(m.Data)
			if err != nil {
				return ag.c, fmt.Errorf("%w (round %d)", err, round)
			}
			rc, err := ag.c.forRound(l, n, bits)
			if err != nil {
				return ag.c, fmt.Errorf("shard: open message of round %d: %w", round, err)
			}
			return rc, nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) && (permanent(err) || ctx.Err() != nil) {
			return ag.c, fmt.Errorf("shard: open message of round %d: %w", round, err)
		}
		// Not yet opened, or a leader being elected: ask again.
		if m, err := last("abort"); err == nil {
			return ag.c, fmt.Errorf("%w: round %d: %s", ErrAborted, round, m.Data)
		}
		select {
		case <-ctx.Done():
			return ag.c, ctx.Err()
		case <-time.After(fetchWait):
		}
	}
}

// publishResult publishes the shard's result of round, signed with
// SignKey when the aggregator has one, under a message id derived from
// the signature (resultID).
func (ag *Aggregator) publishResult(ctx context.Context, round uint64, sum []uint32) error {
	data := encodeWords(sum)
	msg := &nats.Msg{Subject: ag.c.ctlSubject(round, "result."+strconv.Itoa(ag.shard)), Data: data}
	id := fmt.Sprintf("result.%d.%d", round, ag.shard)
	if ag.c.SignKey != nil {
		sig := ed25519.Sign(ag.c.SignKey, resultMessage(ag.c.Run, round, ag.shard, data))
		msg.Header = nats.Header{hdrSig: []string{base64.StdEncoding.EncodeToString(sig)}}
		id = resultID(round, ag.shard, sig)
	}
	return publish(ctx, ag.js, fmt.Sprintf("publish result of round %d shard %d", round, ag.shard), msg, id)
}
