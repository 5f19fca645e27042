package deploy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/shard"
)

// Sharded runs the aggregation of a run's masked rounds on NATS
// JetStream (package shard) instead of in the server's process.
//
// The server stays the secagg server for everything but the sum: it runs
// the key, share and unmasking steps over the Connect API, unchanged for
// clients, and is the coordinator (shard.Coordinator). It receives each
// client's masked vector over Connect as without sharding, publishes its
// pieces to the shards' JetStream streams on the client's behalf and
// commits them (shard.Upload), at most once per client and round — or,
// when the clients call front-ends (Front, privrec front), the
// front-ends do that after asking the server (ShardTicket), and the
// server counts each admitted commit as its client's masked vector. The
// aggregators (privrec aggregate) fold the pieces and unmask their
// shards; the server assembles the sum from their results. JetStream
// and its storage only ever hold masked pieces; the server (or the
// front-end) sees the masked vectors, as the server does without
// sharding; the aggregators are part of the secagg server (they receive
// the mask streams). Whoever may publish on the run's NATS subjects can
// forge commits and pieces, which breaks the sum's integrity (not the
// clients' privacy): the cluster's permissions must let only the
// server, the front-ends and the aggregators publish.
//
// Every secure-aggregation session is its own shard round, numbered
// 1, 2, … in the order the server opens them and recorded in the state
// before it opens: a session retried under fresh keys is a new shard
// round, and a session that ends without a sum (failed, skipped, the
// server stopping) is aborted so the aggregators go on to the next;
// before opening a shard round the server aborts the last one again
// unless it took its sum (a lost abort, or a server that died in it). A
// run name belongs to one state directory.
type Sharded struct {
	// Conn is connected to the NATS cluster; the server does not close
	// it.
	Conn *nats.Conn
	// Config names the run (Run: the aggregators' --run), its number of
	// shards, its stream limits and the aggregators' public keys
	// (AggregatorKeys: a shard's result is taken only when signed by
	// its aggregator; nil takes unsigned results). The server sets the run's bounds:
	// Clients is MaxClients, Bits 32 and Len the longest vector whose
	// shards fit the cluster's maximum payload.
	Config shard.Config
}

// keyShardRun and keyShardRound name, in the meta bucket, the shard run
// this state directory owns and the last shard round it opened.
var (
	keyShardRun   = []byte("shard-run")
	keyShardRound = []byte("shard-round")
)

// setupSharded checks the sharded configuration, claims the run for this
// state directory and creates its streams (shard.Setup).
func (s *Server) setupSharded() error {
	sh := s.cfg.Sharded
	if sh.Conn == nil {
		return errors.New("deploy: sharded aggregation without a NATS connection")
	}
	if s.plan.Aggregation != "masked" {
		return fmt.Errorf("deploy: sharded aggregation needs masked rounds; %s runs with aggregation %q", s.plan.Method, s.plan.Aggregation)
	}
	c := sh.Config
	c.Clients, c.Bits = s.cfg.MaxClients, 32
	if c.Logger == nil {
		c.Logger = s.log
	}
	// A shard's piece, result and checkpoint (its sum and one bit a
	// client) are single messages.
	w := (int(sh.Conn.MaxPayload()) - 5 - (c.Clients+7)/8) / 4
	c.Len = w * c.Shards
	if w < 1 {
		return fmt.Errorf("deploy: a NATS maximum payload of %d bytes holds no shard of %d clients", sh.Conn.MaxPayload(), c.Clients)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	js, err := jetstream.New(sh.Conn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owned, err := s.st.meta(keyShardRun)
	if err != nil {
		return err
	}
	switch {
	case owned == nil:
		// A run already on the cluster has rounds of another state's
		// numbering: reusing it would read their results.
		_, err := shard.LoadConfig(ctx, js, c.Run)
		if err == nil {
			return fmt.Errorf("deploy: NATS run %s already exists on the cluster; a new state directory needs a new run name", c.Run)
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("deploy: NATS run %s: %w", c.Run, err)
		}
		if err := s.st.putMeta(keyShardRun, []byte(c.Run)); err != nil {
			return err
		}
	case string(owned) != c.Run:
		return fmt.Errorf("%w: %s aggregates on NATS run %s, not %s", ErrState, s.cfg.StateDir, owned, c.Run)
	}
	if err := shard.Setup(ctx, js, c); err != nil {
		return err
	}
	s.js, s.shardCfg = js, c
	return nil
}

// openShard opens the next shard round for a session of parameters p,
// recorded durably first. It first aborts the last round opened unless
// this incarnation took its sum: the previous session's abort may have
// been lost, or a previous incarnation died in it (an abort of a round
// already aborted or finished changes nothing).
func (s *Server) openShard(ctx context.Context, p secagg.Params) (*shard.Coordinator, uint64, error) {
	last, err := s.st.metaUint(keyShardRound)
	if err != nil {
		return nil, 0, err
	}
	if last > 0 && last != s.shardDone {
		if err := shard.Abort(ctx, s.js, s.shardCfg, last, "no sum was taken"); err != nil {
			return nil, 0, err
		}
	}
	round := last + 1
	if err := s.st.putMetaUint(keyShardRound, round); err != nil {
		return nil, 0, err
	}
	co, err := shard.NewCoordinator(ctx, s.cfg.Sharded.Conn, s.js, s.shardCfg, p, round)
	if err != nil {
		_ = shard.Abort(ctx, s.js, s.shardCfg, round, err.Error())
		return nil, 0, err
	}
	if err := co.Listen(); err != nil {
		return nil, 0, co.Abort(ctx, err)
	}
	return co, round, nil
}

// meta returns the value of key in the meta bucket, nil when absent.
func (s *store) meta(key []byte) ([]byte, error) {
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bucketMeta).Get(key))
		return nil
	})
	return v, err
}

// putMeta stores key's value in the meta bucket, fsynced.
func (s *store) putMeta(key, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(key, v) })
}

// metaUint returns key's value as a number, 0 when absent.
func (s *store) metaUint(key []byte) (uint64, error) {
	v, err := s.meta(key)
	switch {
	case err != nil || v == nil:
		return 0, err
	case len(v) != 8:
		return 0, fmt.Errorf("%w: meta %s of %d bytes, want 8", ErrState, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// putMetaUint stores key's value as a number.
func (s *store) putMetaUint(key []byte, v uint64) error {
	return s.putMeta(key, binary.BigEndian.AppendUint64(nil, v))
}
