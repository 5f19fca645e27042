package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/secagg"
)

// UploadStats reports what an Upload did.
type UploadStats struct {
	// Retries counts publishes refused (a full stream, a timeout) and
	// commits not answered, and retried: the backpressure (or the
	// cluster's leader changes) the client felt.
	Retries int
	// Duplicates counts pieces JetStream reported as already stored
	// (the client's replay, dropped by the duplicate window).
	Duplicates int
}

// Upload publishes the client's masked input m for round, split into
// the run's shards, then commits it to the coordinator. A publish the
// stream refuses (it is full: some shard is behind) or that is not
// acknowledged within a few seconds (its stream leader died) is retried
// with exponential backoff until ctx ends, and so is a commit not
// answered. Calling Upload again with the same
// m is safe: stored pieces are dropped as duplicates and the coordinator
// answers the same commit as admitted, once.
func Upload(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, c Config, round uint64, m *secagg.MaskedInput) (UploadStats, error) {
	var st UploadStats
	if err := c.Validate(); err != nil {
		return st, err
	}
	if len(m.Y) != c.Len {
		return st, fmt.Errorf("shard: masked input of %d has %d words, want %d", m.From, len(m.Y), c.Len)
	}
	digests := make([][32]byte, c.Shards)
	for s := range c.Shards {
		a, b := c.Range(s)
		data := encodeWords(m.Y[a:b])
		digests[s] = digest(m.From, round, s, data)
		msg := &nats.Msg{Subject: c.upSubject(round, s), Data: data, Header: nats.Header{}}
		msg.Header.Set(hdrClient, strconv.FormatUint(uint64(m.From), 10))
		msg.Header.Set(hdrRound, strconv.FormatUint(round, 10))
		msg.Header.Set(hdrShard, strconv.Itoa(s))
		id := fmt.Sprintf("%d.%d.%d", m.From, round, s)
		wait := 5 * time.Millisecond
		for n := 0; ; n++ {
			// Each attempt is bounded: on a cluster, a publish whose
			// stream leader died is never answered, and is sent again
			// (the same id: a copy already stored is dropped).
			actx, cancel := context.WithTimeout(ctx, attemptBound(n))
			ack, err := js.PublishMsg(actx, msg, jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				if ack.Duplicate {
					st.Duplicates++
				}
				break
			}
			if ctx.Err() != nil {
				return st, fmt.Errorf("shard: client %d, round %d, shard %d: %w", m.From, round, s, err)
			}
			st.Retries++
			select {
			case <-ctx.Done():
				return st, fmt.Errorf("shard: client %d, round %d, shard %d: %w (last: %v)", m.From, round, s, ctx.Err(), err)
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
		}
	}
	// The coordinator answers the same commit again as admitted, so a
	// commit whose request or reply was lost (the coordinator's or the
	// client's server died, the coordinator reconnecting) is sent again.
	var reply *nats.Msg
	if err := retry(ctx, fmt.Sprintf("commit of client %d, round %d", m.From, round), func(ctx context.Context) error {
		var err error
		reply, err = nc.RequestWithContext(ctx, c.commitSubject(), encodeCommit(round, m.From, digests))
		if err != nil {
			st.Retries++
		}
		return err
	}); err != nil {
		return st, err
	}
	if len(reply.Data) > 0 {
		return st, fmt.Errorf("%w: client %d, round %d: %s", ErrRefused, m.From, round, reply.Data)
	}
	return st, nil
}

// ErrRefused is returned (wrapped) when the coordinator refuses a
// commit: the client is not in the round, committed other pieces, or the
// input step is closed.
var ErrRefused = errors.New("shard: commit refused")
