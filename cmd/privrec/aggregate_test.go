package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/shard"
)

// TestAggregateCommand runs one sharded round with two `privrec
// aggregate` commands against an embedded NATS server (127.0.0.1,
// random port, file store in a temporary directory) and checks the
// released sum against the plain sum of the inputs; the aggregators
// sign with keys of privrec aggregate keygen and the coordinator takes
// only results signed by them.
func TestAggregateCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"aggregate", "--run", "x"}, "--nats"},
		{[]string{"aggregate", "--nats", "nats://127.0.0.1:1", "--run", "x"}, "--sign-key FILE is required"},
		{[]string{"aggregate", "--nats", "nats://127.0.0.1:1", "--run", "x", "--sign-key", "/nonexistent/aggregator.key"}, "--sign-key: open /nonexistent"},
		{[]string{"aggregate", "keygen"}, "--out DIR is required"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	// One key pair a shard; a second keygen into the same directory is
	// refused (it would replace a key in use), the private key is 0600.
	keyDirs := make([]string, 2)
	pubs := make([]ed25519.PublicKey, 2)
	for s := range keyDirs {
		keyDirs[s] = filepath.Join(t.TempDir(), fmt.Sprint("agg", s))
		if _, _, err := run(t, "aggregate", "keygen", "--out", keyDirs[s]); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(keyDirs[s], "aggregator.key"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("aggregator.key: %v, mode %v, want 0600", err, fi.Mode().Perm())
		}
		if pubs[s], err = readEd25519Pub("aggregator.pub", filepath.Join(keyDirs[s], "aggregator.pub")); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := run(t, "aggregate", "keygen", "--out", keyDirs[0]); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("keygen over an existing key: %v, want refused", err)
	}
	ns := startNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const n, l = 6, 101
	c := shard.Config{Run: "cmd", Shards: 2, Len: l, Clients: n, Bits: 24, AggregatorKeys: pubs}
	p := secagg.Params{N: n, K: n - 1, T: 4, Bits: 24, Len: l}
	co, err := shard.NewCoordinator(ctx, nc, js, c, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]string, c.Shards)
	errs := make([]error, c.Shards)
	var wg sync.WaitGroup
	for s := range c.Shards {
		wg.Go(func() {
			outs[s], _, errs[s] = run(t, "aggregate", "--nats", ns.ClientURL(), "--run", "cmd",
				"--shard", fmt.Sprint(s), "--round", "1", "--rounds", "1", "--sign-key", filepath.Join(keyDirs[s], "aggregator.key"))
		})
	}
	got, want := maskedRound(t, ctx, co, nc, js, p, 1)
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			t.Fatalf("aggregate --shard %d: %v", s, err)
		}
		if !strings.Contains(outs[s], fmt.Sprintf("round 1 shard %d: folded %d", s, n)) {
			t.Errorf("aggregate --shard %d printed %q", s, outs[s])
		}
	}
	if !slices.Equal(got, want) {
		t.Fatal("sum released through the aggregate commands differs from the plain sum")
	}
}

// maskedRound runs round of p.N clients with random inputs through the
// coordinator co (uploading on their behalf on nc, as privrec serve
// does) and returns the released sum and the plain sum of the inputs
// mod 2^p.Bits. The aggregators must be running.
func maskedRound(t *testing.T, ctx context.Context, co *shard.Coordinator, nc *nats.Conn, js jetstream.JetStream, p secagg.Params, round uint64) (got, want []uint32) {
	t.Helper()
	n, l := p.N, p.Len
	r := rand.New(rand.NewPCG(1, 1))
	in := make([][]uint32, n)
	want = make([]uint32, l)
	rnd := rand.NewChaCha8([32]byte{7, byte(round)})
	cs := make([]*secagg.Client, n)
	for u := range n {
		in[u] = make([]uint32, l)
		for i := range in[u] {
			in[u][i] = r.Uint32() & 0xffff
			want[i] += in[u][i]
		}
		cs[u], _ = secagg.NewClient(uint32(u), p, rnd)
		m, _ := cs[u].AdvertiseKeys()
		if err := co.Server().AddKeys(m); err != nil {
			t.Fatal(err)
		}
	}
	kb, err := co.Server().FinishKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range kb {
		m, _ := cs[b.To].ShareKeys(b)
		if err := co.Server().AddShares(m); err != nil {
			t.Fatal(err)
		}
	}
	sd, err := co.Server().FinishShares()
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Listen(); err != nil {
		t.Fatal(err)
	}
	for _, d := range sd {
		m, _ := cs[d.To].MaskedInput(d, in[d.To])
		if _, err := shard.Upload(ctx, nc, js, co.Config(), round, m); err != nil {
			t.Fatal(err)
		}
	}
	reqs, err := co.CloseInput(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range reqs {
		m, _ := cs[q.To].Unmask(q)
		if err := co.Server().AddUnmask(m); err != nil {
			t.Fatal(err)
		}
	}
	got, err = co.Sum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] &= 1<<p.Bits - 1
	}
	return got, want
}
