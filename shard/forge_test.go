package shard

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// aggregatorKeys makes one Ed25519 key pair a shard, from a fixed seed.
func aggregatorKeys(t testing.TB, shards int) ([]ed25519.PublicKey, []ed25519.PrivateKey) {
	t.Helper()
	pubs := make([]ed25519.PublicKey, shards)
	privs := make([]ed25519.PrivateKey, shards)
	for s := range shards {
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1] = 0xa9, byte(s)
		privs[s] = ed25519.NewKeyFromSeed(seed)
		pubs[s] = privs[s].Public().(ed25519.PublicKey)
	}
	return pubs, privs
}

// signingAggregators runs one aggregator a shard, each signing with its
// key; before, if set, runs first (before any aggregator starts).
func signingAggregators(js jetstream.JetStream, privs []ed25519.PrivateKey, before func()) func(ctx context.Context, t *testing.T, c Config, round uint64) func() []AggStats {
	return func(ctx context.Context, t *testing.T, c Config, round uint64) func() []AggStats {
		if before != nil {
			before()
		}
		stats := make([]AggStats, c.Shards)
		errs := make([]error, c.Shards)
		var wg sync.WaitGroup
		for s := range c.Shards {
			cs := c
			cs.SignKey = privs[s]
			ag, err := NewAggregator(js, cs, s)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { stats[s], errs[s] = ag.Round(ctx, round) })
		}
		return func() []AggStats {
			wg.Wait()
			for s, err := range errs {
				if err != nil {
					t.Errorf("aggregator %d: %v", s, err)
				}
			}
			return stats
		}
	}
}

// lockedBuffer is a log sink shared by goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestForgedResultRefused is the attack of issue 44: before the
// aggregators of round 2 publish, a forger who may publish on the run's
// control subjects publishes results for every shard — unsigned under
// the aggregator's guessable message id result.<round>.<shard>, signed
// with a key of its own, signed with the shard's genuine key but for
// another round, another shard or another run (what a replay of a
// genuine signature over other words would carry), a genuine result of
// round 1 replayed on round 2's subject, a result of the wrong size,
// and one on a shard that does not exist. The coordinator, holding the
// aggregators' public keys, refuses and logs every one, waits for the
// genuine results, and returns the single server's sum bit for bit.
func TestForgedResultRefused(t *testing.T) {
	nc, js := startNATS(t)
	const shards = 2
	pubs, privs := aggregatorKeys(t, shards)
	var logs lockedBuffer
	c := Config{Run: "forge", Shards: shards, Len: 100, Clients: 8, Bits: 24,
		AggregatorKeys: pubs, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := context.Background()

	// Round 1 is honest: its signed results are what a forger replays.
	pr1 := newProblem(c.Clients, c.Len, 21)
	got, want, _ := runRound(t, nc, js, c, pr1, 1, roundHooks{aggregators: signingAggregators(js, privs, nil)})
	if !slices.Equal(got, want) || !slices.Equal(got, pr1.plainSum()) {
		t.Fatal("round 1 (no forgery): sharded sum differs from the single server's")
	}
	if strings.Contains(logs.String(), "refused") {
		t.Fatalf("round 1 (no forgery) refused a result:\n%s", logs.String())
	}
	cs, err := js.Stream(ctx, c.ctlStream())
	if err != nil {
		t.Fatal(err)
	}
	round1 := make([]*jetstream.RawStreamMsg, shards)
	for s := range shards {
		if round1[s], err = cs.GetLastMsgForSubject(ctx, c.ctlSubject(1, fmt.Sprint("result.", s))); err != nil {
			t.Fatal(err)
		}
	}

	const round = 2
	stranger := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x55}, ed25519.SeedSize))
	forged := 0
	publish := func(subj string, data []byte, id string, sig []byte) {
		t.Helper()
		msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		if sig != nil {
			msg.Header.Set(hdrSig, base64.StdEncoding.EncodeToString(sig))
		}
		ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate {
			t.Fatalf("forgery %s dropped as a duplicate", id)
		}
		forged++
	}
	forge := func() {
		a, b := c.Range(0)
		zero := encodeWords(make([]uint32, b-a)) // every shard has b-a words
		for s := range shards {
			subj := c.ctlSubject(round, fmt.Sprint("result.", s))
			sign := func(key ed25519.PrivateKey, run string, r uint64, sh int) []byte {
				return ed25519.Sign(key, resultMessage(run, r, sh, zero))
			}
			for _, f := range []struct {
				kind string
				data []byte
				sig  []byte
			}{
				// First, under the id the old aggregator used: the
				// genuine result would be dropped as its duplicate.
				{"unsigned", zero, nil},
				{"stranger's key", zero, sign(stranger, c.Run, round, s)},
				{"another round", zero, sign(privs[s], c.Run, round+1, s)},
				{"another shard", zero, sign(privs[1-s], c.Run, round, 1-s)},
				{"another run", zero, sign(privs[s], "other", round, s)},
				{"replayed from round 1", round1[s].Data, sigOf(t, round1[s].Header)},
				{"wrong size", zero[4:], sign(privs[s], c.Run, round, s)[:10]},
				{"not base64", zero, nil},
			} {
				id := fmt.Sprintf("result.%d.%d", round, s)
				if f.kind != "unsigned" {
					id = fmt.Sprintf("forged.%d.%s", s, f.kind)
				}
				if f.kind == "not base64" {
					msg := &nats.Msg{Subject: subj, Data: f.data, Header: nats.Header{hdrSig: []string{"!!"}}}
					if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
						t.Fatal(err)
					}
					forged++
					continue
				}
				publish(subj, f.data, id, f.sig)
			}
		}
		publish(c.ctlSubject(round, "result.9"), zero, "forged.9", nil)
		publish(c.ctlSubject(round, "result.x"), zero, "forged.x", nil)
	}
	pr := newProblem(c.Clients, c.Len, 22)
	got, want, _ = runRound(t, nc, js, c, pr, round, roundHooks{aggregators: signingAggregators(js, privs, forge)})
	if !slices.Equal(got, want) || !slices.Equal(got, pr.plainSum()) {
		a, b := c.Range(0)
		t.Errorf("round %d: sum differs from the single server's (shard 0 took %v…, want %v…)", round, got[a:min(a+3, b)], want[a:min(a+3, b)])
	}
	refused := strings.Count(logs.String(), "shard result refused")
	if refused != forged {
		t.Errorf("%d forged results refused, want %d:\n%s", refused, forged, logs.String())
	}
}

// sigOf returns the signature in a result's headers.
func sigOf(t *testing.T, h nats.Header) []byte {
	t.Helper()
	sig, err := base64.StdEncoding.DecodeString(h.Get(hdrSig))
	if err != nil {
		t.Fatalf("result header %s: %v", hdrSig, err)
	}
	return sig
}

// TestConfigKeys: a coordinator's aggregator keys must be one Ed25519
// public key a shard, and an aggregator's signing key an Ed25519
// private key; the keys are never stored on the cluster.
func TestConfigKeys(t *testing.T) {
	pubs, privs := aggregatorKeys(t, 3)
	base := Config{Run: "k", Shards: 3, Len: 30, Clients: 4, Bits: 24}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"no keys", func(*Config) {}, ""},
		{"one key a shard", func(c *Config) { c.AggregatorKeys = pubs }, ""},
		{"a signing key", func(c *Config) { c.SignKey = privs[0] }, ""},
		{"two keys for three shards", func(c *Config) { c.AggregatorKeys = pubs[:2] }, "2 aggregator keys for 3 shards"},
		{"a short key", func(c *Config) { c.AggregatorKeys = []ed25519.PublicKey{pubs[0], pubs[1], pubs[2][:31]} }, "shard 2 has 31 bytes"},
		{"a public key to sign with", func(c *Config) { c.SignKey = ed25519.PrivateKey(pubs[0]) }, "signing key of 32 bytes"},
	} {
		c := base
		tc.edit(&c)
		err := c.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	_, js := startNATS(t)
	c := base
	c.AggregatorKeys, c.SignKey = pubs, privs[0]
	if err := Setup(context.Background(), js, c); err != nil {
		t.Fatal(err)
	}
	if err := Setup(context.Background(), js, base); err != nil {
		t.Fatalf("Setup of the same run without keys: %v", err)
	}
	got, err := LoadConfig(context.Background(), js, c.Run)
	if err != nil {
		t.Fatal(err)
	}
	if got.AggregatorKeys != nil || got.SignKey != nil {
		t.Error("LoadConfig returned keys: they were stored on the cluster")
	}
}

// TestSignedResultRepublishedOnce: an aggregator that publishes its
// checkpointed result again (after a crash) signs the same bytes, gets
// the same signature (Ed25519 is deterministic) and so the same message
// id: JetStream stores the result once.
func TestSignedResultRepublishedOnce(t *testing.T) {
	_, js := startNATS(t)
	ctx := context.Background()
	_, privs := aggregatorKeys(t, 2)
	c := Config{Run: "again", Shards: 2, Len: 10, Clients: 2, Bits: 24, SignKey: privs[1]}
	if err := Setup(ctx, js, c); err != nil {
		t.Fatal(err)
	}
	ag, err := NewAggregator(js, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	sum := []uint32{1, 2, 3, 4, 5}
	for range 3 {
		if err := ag.publishResult(ctx, 4, sum); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := js.Stream(ctx, c.ctlStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cs.Info(ctx, jetstream.WithSubjectFilter(c.ctlSubject(4, "result.1")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[c.ctlSubject(4, "result.1")]; n != 1 {
		t.Errorf("result published 3 times is stored %d times, want once", n)
	}
	m, err := cs.GetLastMsgForSubject(ctx, c.ctlSubject(4, "result.1"))
	if err != nil {
		t.Fatal(err)
	}
	if id := m.Header.Get(jetstream.MsgIDHeader); !strings.HasPrefix(id, "result.4.1.") || len(id) != len("result.4.1.")+32 {
		t.Errorf("message id %q, want result.4.1.<32 hex digits of the signature's hash>", id)
	}
}
