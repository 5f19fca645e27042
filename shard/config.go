package shard

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config names a run and fixes its sharding. Every coordinator,
// aggregator and client of a run must use the same Config.
type Config struct {
	// Run names the run in subjects, streams and buckets
	// ([A-Za-z0-9_-]+).
	Run string
	// Shards is S, the number of aggregators; shard s owns the words
	// Range(s) of every vector.
	Shards int
	// Len is L, the length of a client's vector, and Clients is N.
	// Bits is the secagg modulus 2^Bits of the sum. For the run they are
	// bounds: each round's coordinator announces the round's own L, N
	// and Bits, at most these, in the round's open message (a deployed
	// run's rounds differ in length and cohort), and every party of the
	// round uses them (Coordinator.Config). A round's vector may be
	// shorter than Shards (a deployed run's setup round sums one word):
	// some shards then own no word and sum nothing.
	Len, Clients int
	Bits         int
	// Backlog bounds the pieces of one shard and round that the upload
	// stream holds unacknowledged (MaxMsgsPerSubject with
	// DiscardNewPerSubject): when a shard falls that far behind, its
	// publishes are refused and clients wait. 0 means 1024.
	Backlog int64
	// MaxBytes bounds each shard's upload stream; 0 means 1 GiB.
	MaxBytes int64
	// MaxAckPending bounds the pieces an aggregator holds
	// unacknowledged; 0 means 256.
	MaxAckPending int
	// AckWait is how long JetStream waits for an aggregator's
	// acknowledgement before redelivering; 0 means 30 s.
	AckWait time.Duration
	// CheckpointEvery is how many folded pieces an aggregator
	// checkpoints and acknowledges at once (and it does whenever it is
	// idle); 0 means 64.
	CheckpointEvery int
	// Replicas is how many servers of the cluster hold each of the
	// run's streams and its checkpoint bucket (JetStream's R): with 3,
	// a stream survives the loss of any one server, its leader included
	// (see the package doc, Clusters). 0 means 3 when the server
	// connected to is in a cluster of at least three (its cluster name
	// is set and the connection knows three servers' URLs, given or
	// discovered), and 1 otherwise: a single
	// server, or a smaller cluster, which must set it.
	Replicas int `json:",omitempty"`

	// AggregatorKeys are the aggregators' Ed25519 public keys, one per
	// shard in shard order: the coordinator takes a shard's result only
	// when it is signed with that shard's key for this run, round and
	// shard (see the package doc, Trust and privacy), and logs and skips
	// any other. Without them it takes the first well-formed result of
	// each shard, which anyone who may publish on the run's subjects can
	// forge. A party's own trust: never stored on the cluster
	// (LoadConfig returns none), and aggregators ignore them.
	AggregatorKeys []ed25519.PublicKey `json:"-"`
	// SignKey is an aggregator's Ed25519 private key (the one whose
	// public key is its shard's in the coordinator's AggregatorKeys): it
	// signs its results with it. Never stored on the cluster; a
	// coordinator ignores it.
	SignKey ed25519.PrivateKey `json:"-"`
	// Logger receives the coordinator's warnings (a refused result);
	// nil means slog.Default(). Never stored on the cluster.
	Logger *slog.Logger `json:"-"`
}

var runName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case !runName.MatchString(c.Run):
		return fmt.Errorf("shard: run name %q: want [A-Za-z0-9_-]+", c.Run)
	case c.Shards < 1 || c.Len < 1:
		return fmt.Errorf("shard: %d shards for %d words", c.Shards, c.Len)
	case c.Clients < 1:
		return fmt.Errorf("shard: %d clients", c.Clients)
	case c.Bits < 1 || c.Bits > 32:
		return fmt.Errorf("shard: %d bits, want 1..32", c.Bits)
	case len(c.AggregatorKeys) != 0 && len(c.AggregatorKeys) != c.Shards:
		return fmt.Errorf("shard: %d aggregator keys for %d shards, want one a shard", len(c.AggregatorKeys), c.Shards)
	case c.SignKey != nil && len(c.SignKey) != ed25519.PrivateKeySize:
		return fmt.Errorf("shard: a signing key of %d bytes, want an Ed25519 private key of %d", len(c.SignKey), ed25519.PrivateKeySize)
	case c.Backlog < 0 || c.MaxBytes < 0 || c.MaxAckPending < 0 || c.AckWait < 0 || c.CheckpointEvery < 0:
		return errors.New("shard: negative limit")
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("shard: %d replicas, want 1..5 (JetStream's limit), or 0 to choose", c.Replicas)
	}
	for s, k := range c.AggregatorKeys {
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("shard: aggregator key of shard %d has %d bytes, want an Ed25519 public key of %d", s, len(k), ed25519.PublicKeySize)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Backlog == 0 {
		c.Backlog = 1024
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 1 << 30
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 256
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 64
	}
	return c
}

// Range returns the words [a, b) of every vector that shard s owns:
// contiguous, in shard order, sizes differing by at most one (empty
// when the vector is shorter than the shards).
func (c Config) Range(s int) (a, b int) {
	return s * c.Len / c.Shards, (s + 1) * c.Len / c.Shards
}

func (c Config) upStream(s int) string { return fmt.Sprintf("PRIVREC_%s_UP_%d", c.Run, s) }
func (c Config) ctlStream() string     { return "PRIVREC_" + c.Run + "_CTL" }
func (c Config) ckptBucket() string    { return "PRIVREC_" + c.Run + "_CKPT" }
func (c Config) commitSubject() string { return "privrec." + c.Run + ".commit" }
func (c Config) upSubject(round uint64, s int) string {
	return fmt.Sprintf("privrec.%s.up.%d.%d", c.Run, round, s)
}
func (c Config) ctlSubject(round uint64, what string) string {
	return fmt.Sprintf("privrec.%s.ctl.%d.%s", c.Run, round, what)
}
func (c Config) broadcastSubject() string { return "privrec." + c.Run + ".broadcast" }

// replicas returns c.Replicas, or when it is 0 the replicas that suit
// the cluster js is connected to: 3 on a cluster of at least three
// servers, 1 otherwise.
func (c Config) replicas(js jetstream.JetStream) int {
	if c.Replicas > 0 {
		return c.Replicas
	}
	nc := js.Conn()
	if nc.ConnectedClusterName() != "" && len(nc.Servers()) >= 3 { // given and discovered
		return 3
	}
	return 1
}

// Setup creates (or updates) the run's streams and checkpoint bucket,
// with c's Replicas. It is idempotent; the coordinator calls it, and so
// may every process.
func Setup(ctx context.Context, js jetstream.JetStream, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	c = c.withDefaults()
	c.CheckpointEvery = min(c.CheckpointEvery, c.MaxAckPending)
	r := c.replicas(js)
	// One stream per shard: in a cluster each can have its leader on
	// another server, so ingest scales with the shards.
	// Each request is retried (retry) through a leader election: creating
	// or updating with the same config is idempotent.
	stream := func(cfg jetstream.StreamConfig) error {
		return retry(ctx, "stream "+cfg.Name, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		})
	}
	for s := range c.Shards {
		if err := stream(jetstream.StreamConfig{
			Name:      c.upStream(s),
			Subjects:  []string{fmt.Sprintf("privrec.%s.up.*.%d", c.Run, s)},
			Retention: jetstream.WorkQueuePolicy,
			Discard:   jetstream.DiscardNew,
			MaxBytes:  c.MaxBytes,
			// Per round: a slow shard refuses only its own pieces.
			// Clients publish in shard order and commit after the last,
			// so the last shard's backlog is always committable and the
			// shards cannot deadlock one another.
			MaxMsgsPerSubject:    c.Backlog,
			DiscardNewPerSubject: true,
			Storage:              jetstream.FileStorage,
			Replicas:             r,
			Duplicates:           2 * time.Minute,
		}); err != nil {
			return err
		}
	}
	if err := stream(jetstream.StreamConfig{
		Name:       c.ctlStream(),
		Subjects:   []string{"privrec." + c.Run + ".ctl.>", c.broadcastSubject()},
		Storage:    jetstream.FileStorage,
		Replicas:   r,
		Duplicates: 2 * time.Minute,
	}); err != nil {
		return err
	}
	var kv jetstream.KeyValue
	if err := retry(ctx, "bucket "+c.ckptBucket(), func(ctx context.Context) error {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: c.ckptBucket(), Storage: jetstream.FileStorage, MaxValueSize: -1, Replicas: r,
		})
		return err
	}); err != nil {
		return err
	}
	// The run's Config is stored once, so aggregators started with only
	// the run name (LoadConfig) agree with the coordinator.
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	err = retry(ctx, "store config of run "+c.Run, func(ctx context.Context) error {
		_, err := kv.Create(ctx, configKey, b)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		old, err := LoadConfig(ctx, js, c.Run)
		if err != nil {
			return err
		}
		if ob, err := json.Marshal(old); err != nil || !bytes.Equal(ob, b) {
			return fmt.Errorf("shard: run %s exists with another config (%+v)", c.Run, old)
		}
	} else if err != nil {
		return err
	}
	return nil
}

const configKey = "config"

// LoadConfig returns the Config that Setup stored for run.
func LoadConfig(ctx context.Context, js jetstream.JetStream, run string) (Config, error) {
	var c Config
	if !runName.MatchString(run) {
		return c, fmt.Errorf("shard: run name %q: want [A-Za-z0-9_-]+", run)
	}
	var e jetstream.KeyValueEntry
	if err := retry(ctx, "config of run "+run, func(ctx context.Context) error {
		kv, err := js.KeyValue(ctx, Config{Run: run}.ckptBucket())
		if err != nil {
			return err
		}
		e, err = kv.Get(ctx, configKey)
		return err
	}); err != nil {
		return c, err
	}
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return c, fmt.Errorf("shard: config of run %s: %w", run, err)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("shard: config of run %s: %w", run, err)
	}
	return c, nil
}

// forRound returns c with a round's vector length, clients and bits,
// which must be within c's.
func (c Config) forRound(l, n, bits int) (Config, error) {
	r := c
	r.Len, r.Clients, r.Bits = l, n, bits
	if err := r.Validate(); err != nil {
		return c, err
	}
	if l > c.Len || n > c.Clients || bits > c.Bits {
		return c, fmt.Errorf("shard: a round of %d words, %d clients and %d bits exceeds run %s's %d, %d and %d",
			l, n, bits, c.Run, c.Len, c.Clients, c.Bits)
	}
	return r, nil
}

// The open message of a round (coordinator → aggregators) is its L, N
// and Bits, 4 bytes each.
func encodeOpen(c Config) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(c.Len))
	out = binary.BigEndian.AppendUint32(out, uint32(c.Clients))
	return binary.BigEndian.AppendUint32(out, uint32(c.Bits))
}

func decodeOpen(b []byte) (l, n, bits int, err error) {
	if len(b) != 12 {
		return 0, 0, 0, fmt.Errorf("shard: open message of %d bytes, want 12", len(b))
	}
	return int(binary.BigEndian.Uint32(b)), int(binary.BigEndian.Uint32(b[4:])), int(binary.BigEndian.Uint32(b[8:])), nil
}

// Headers of an uploaded piece.
const (
	hdrClient = "Privrec-Client"
	hdrRound  = "Privrec-Round"
	hdrShard  = "Privrec-Shard"
)

// digest binds a piece to its client, round and shard.
func digest(client uint32, round uint64, s int, data []byte) [32]byte {
	h := sha256.New()
	var x [16]byte
	binary.BigEndian.PutUint32(x[:4], client)
	binary.BigEndian.PutUint64(x[4:12], round)
	binary.BigEndian.PutUint32(x[12:], uint32(s))
	h.Write(x[:])
	h.Write(data)
	return [32]byte(h.Sum(nil))
}

func encodeWords(w []uint32) []byte {
	out := make([]byte, 4*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint32(out[4*i:], x)
	}
	return out
}

func decodeWords(b []byte) ([]uint32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("shard: %d bytes is not a whole number of words", len(b))
	}
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, nil
}

// A commit (client → coordinator) and an admission (coordinator →
// aggregators) are round (8 B), client (4 B) and one 32-byte digest per
// shard.
func encodeCommit(round uint64, client uint32, d [][32]byte) []byte {
	out := make([]byte, 12, 12+32*len(d))
	binary.BigEndian.PutUint64(out, round)
	binary.BigEndian.PutUint32(out[8:], client)
	for _, x := range d {
		out = append(out, x[:]...)
	}
	return out
}

func decodeCommit(b []byte, shards int) (round uint64, client uint32, d [][32]byte, err error) {
	if len(b) != 12+32*shards {
		return 0, 0, nil, fmt.Errorf("shard: commit of %d bytes, want %d for %d shards", len(b), 12+32*shards, shards)
	}
	round = binary.BigEndian.Uint64(b)
	client = binary.BigEndian.Uint32(b[8:])
	for s := range shards {
		d = append(d, [32]byte(b[12+32*s:]))
	}
	return round, client, d, nil
}

// hdrSig carries an aggregator's signature of its result (standard
// base64 of the 64-byte Ed25519 signature of resultMessage).
const hdrSig = "Privrec-Sig"

// resultTag separates the signatures of shard results from any other
// use of an aggregator's key.
const resultTag = "privrec shard result v1\x00"

// resultMessage is what the aggregator of shard s signs for its result
// data (the shard's words) of round of run: the tag, the run name (which
// holds no zero byte), a zero byte, the round (8 bytes) and the shard
// (4 bytes, big-endian), then data.
func resultMessage(run string, round uint64, s int, data []byte) []byte {
	out := make([]byte, 0, len(resultTag)+len(run)+13+len(data))
	out = append(out, resultTag...)
	out = append(out, run...)
	out = append(out, 0)
	out = binary.BigEndian.AppendUint64(out, round)
	out = binary.BigEndian.AppendUint32(out, uint32(s))
	return append(out, data...)
}

// resultID is the JetStream message id of a signed result: derived from
// its signature, which nobody without the aggregator's key can predict,
// so that a forger cannot publish first under it and have the genuine
// result dropped as a duplicate. Ed25519 signatures are deterministic:
// an aggregator that publishes its checkpointed result again after a
// crash publishes it under the same id, and it is dropped.
func resultID(round uint64, s int, sig []byte) string {
	h := sha256.Sum256(sig)
	return fmt.Sprintf("result.%d.%d.%x", round, s, h[:16])
}
