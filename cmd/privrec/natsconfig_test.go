package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
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

// violations records a connection's asynchronous errors (the server's
// permission violations arrive that way).
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

// wait returns the first recorded error containing want, waiting up to
// 5 s for it.
func (v *violations) wait(want string) string {
	for range 100 {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(e, want) {
				v.mu.Unlock()
				return e
			}
		}
		v.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	return ""
}

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.errs)
}

// natsConfigServer writes the users of run runName with shards shards
// and two front-ends (privrec nats-config), starts an embedded nats-server from a
// configuration file that includes them, and returns the server and the
// directory of the seeds.
func natsConfigServer(t *testing.T, runName string, shards int) (*server.Server, string) {
	t.Helper()
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth")
	if _, _, err := run(t, "nats-config", "--run", runName, "--shards", fmt.Sprint(shards), "--front-ends", "2", "--out", auth); err != nil {
		t.Fatal(err)
	}
	for _, name := range seedNames(shards, 2) {
		if fi, err := os.Stat(filepath.Join(auth, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, want mode 0600", name, err)
		}
	}
	if _, _, err := run(t, "nats-config", "--run", runName, "--shards", fmt.Sprint(shards), "--out", auth); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("nats-config over existing users: %v, want refused", err)
	}
	conf := filepath.Join(dir, "nats-server.conf")
	body := fmt.Sprintf("jetstream {\n  store_dir: %q\n}\ninclude \"auth/%s\"\n", filepath.Join(dir, "js"), natsAuthFile)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server does not load the generated configuration: %v", err)
	}
	return startNATS(t, opts), auth
}

// connectAs connects with a party's seed of nats-config, recording its
// asynchronous errors.
func connectAs(t *testing.T, url, seed string) (*nats.Conn, jetstream.JetStream, *violations) {
	t.Helper()
	nc, err := (&natsFlags{nkey: seed}).connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	v := &violations{}
	nc.SetErrorHandler(v.handler)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, v
}

// TestNATSConfig starts an embedded nats-server from privrec
// nats-config's authorization block and runs a whole sharded masked
// round (signed results) under exactly those users: the sum is the
// plain sum and no party meets a permission violation. Then a stranger
// without a seed is refused at the door, and an aggregator publishing
// shard 0's result, a piece or checkpoint of shard 0, reading shard 0's
// pieces or another party's inbox, a front-end (which published and
// committed the round's pieces) publishing a result, an admission, mask
// streams, an abort, a checkpoint or a broadcast, reading pieces,
// answering commits or reading the coordinator's inbox, and the
// coordinator publishing a result are each refused with a permission violation, and nothing of
// theirs reaches the streams.
func TestNATSConfig(t *testing.T) {
	const run, shards = "perm", 2
	ns, auth := natsConfigServer(t, run, shards)
	url := ns.ClientURL()
	seed := func(name string) string { return filepath.Join(auth, name) }
	nc, js, vCo := connectAs(t, url, seed("coordinator.nk"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pubs := make([]ed25519.PublicKey, shards)
	privs := make([]ed25519.PrivateKey, shards)
	for s := range shards {
		pubs[s], privs[s], _ = ed25519.GenerateKey(nil)
	}
	const n, l = 6, 101
	c := shard.Config{Run: run, Shards: shards, Len: l, Clients: n, Bits: 24, AggregatorKeys: pubs}
	p := secagg.Params{N: n, K: n - 1, T: 4, Bits: 24, Len: l}
	co, err := shard.NewCoordinator(ctx, nc, js, c, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	aggJS := make([]jetstream.JetStream, shards)
	aggNC := make([]*nats.Conn, shards)
	aggV := make([]*violations, shards)
	errs := make([]error, shards)
	stats := make([]shard.AggStats, shards)
	var wg sync.WaitGroup
	for s := range shards {
		aggNC[s], aggJS[s], aggV[s] = connectAs(t, url, seed(fmt.Sprintf("aggregator-%d.nk", s)))
		lc, err := shard.LoadConfig(ctx, aggJS[s], run)
		if err != nil {
			t.Fatalf("aggregator %d loads the run's config: %v", s, err)
		}
		lc.SignKey = privs[s]
		ag, err := shard.NewAggregator(aggJS[s], lc, s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { stats[s], errs[s] = ag.Round(ctx, 1) })
	}
	// The clients' pieces are published and committed by a front-end.
	feNC, feJS, vFe := connectAs(t, url, seed("front-0.nk"))
	got, want := maskedRound(t, ctx, co, feNC, feJS, p, 1)
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			t.Fatalf("aggregator %d: %v", s, err)
		}
		if stats[s].Folded != n {
			t.Errorf("aggregator %d folded %d, want %d", s, stats[s].Folded, n)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatal("sum under the generated permissions differs from the plain sum")
	}
	if err := co.Broadcast(ctx, []byte("next")); err != nil {
		t.Fatalf("broadcast and purge under the coordinator's permissions: %v", err)
	}
	for party, v := range map[string]*violations{"coordinator": vCo, "aggregator 0": aggV[0], "aggregator 1": aggV[1], "front-end 0": vFe} {
		if errs := v.all(); len(errs) > 0 {
			t.Errorf("%s met errors in an honest round: %q", party, errs)
		}
	}

	// A stranger without a seed is refused at the door.
	if snc, err := nats.Connect(url); err == nil {
		snc.Close()
		t.Error("a connection without credentials was accepted")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("a connection without credentials: %v, want an authorization violation", err)
	}

	// Forbidden acts: each must be refused with a permission violation.
	agg1, v1, coKey := aggNC[1], aggV[1], nc.Opts.Nkey
	for _, tc := range []struct {
		name string
		nc   *nats.Conn
		v    *violations
		act  func(nc *nats.Conn) error
		want string
	}{
		{"aggregator 1 publishes shard 0's result", agg1, v1,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.result.0", make([]byte, 200)) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.result.0"`},
		{"aggregator 1 publishes a piece of shard 0", agg1, v1,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.up.2.0", make([]byte, 200)) },
			`Permissions Violation for Publish to "privrec.perm.up.2.0"`},
		{"aggregator 1 publishes a piece of its own shard", agg1, v1,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.up.2.1", make([]byte, 200)) },
			`Permissions Violation for Publish to "privrec.perm.up.2.1"`},
		{"aggregator 1 writes shard 0's checkpoint", agg1, v1,
			func(nc *nats.Conn) error { return nc.Publish("$KV.PRIVREC_perm_CKPT.r2.s0", []byte{1}) },
			`Permissions Violation for Publish to "$KV.PRIVREC_perm_CKPT.r2.s0"`},
		{"aggregator 1 admits a client", agg1, v1,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.admit", []byte{1}) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.admit"`},
		{"aggregator 1 consumes shard 0's pieces", agg1, v1,
			func(nc *nats.Conn) error {
				return nc.Publish("$JS.API.CONSUMER.CREATE.PRIVREC_perm_UP_0.x.privrec.perm.up.2.0", []byte("{}"))
			},
			`Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.PRIVREC_perm_UP_0.x.privrec.perm.up.2.0"`},
		{"aggregator 1 reads shard 0's pieces directly", agg1, v1,
			func(nc *nats.Conn) error { return nc.Publish("$JS.API.STREAM.MSG.GET.PRIVREC_perm_UP_0", []byte("{}")) },
			`Permissions Violation for Publish to "$JS.API.STREAM.MSG.GET.PRIVREC_perm_UP_0"`},
		{"aggregator 1 listens on aggregator 0's inbox", agg1, v1,
			func(nc *nats.Conn) error {
				_, err := nc.Subscribe(inboxPrefix(aggNC[0].Opts.Nkey)+".>", func(*nats.Msg) {})
				return err
			},
			`Permissions Violation for Subscription to "` + inboxPrefix(aggNC[0].Opts.Nkey) + `.>"`},
		{"aggregator 1 listens to commits", agg1, v1,
			func(nc *nats.Conn) error {
				_, err := nc.Subscribe("privrec.perm.commit", func(*nats.Msg) {})
				return err
			},
			`Permissions Violation for Subscription to "privrec.perm.commit"`},
		{"front-end 0 publishes a result", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.result.0", make([]byte, 200)) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.result.0"`},
		{"front-end 0 admits a client", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.admit", []byte{1}) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.admit"`},
		{"front-end 0 publishes mask streams", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.unmask", make([]byte, 17)) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.unmask"`},
		{"front-end 0 aborts a round", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.abort", []byte("no")) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.abort"`},
		{"front-end 0 writes a checkpoint", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("$KV.PRIVREC_perm_CKPT.r2.s0", []byte{1}) },
			`Permissions Violation for Publish to "$KV.PRIVREC_perm_CKPT.r2.s0"`},
		{"front-end 0 publishes a broadcast", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.broadcast", []byte("model")) },
			`Permissions Violation for Publish to "privrec.perm.broadcast"`},
		{"front-end 0 reads shard 0's pieces", feNC, vFe,
			func(nc *nats.Conn) error { return nc.Publish("$JS.API.STREAM.MSG.GET.PRIVREC_perm_UP_0", []byte("{}")) },
			`Permissions Violation for Publish to "$JS.API.STREAM.MSG.GET.PRIVREC_perm_UP_0"`},
		{"front-end 0 answers commits", feNC, vFe,
			func(nc *nats.Conn) error {
				_, err := nc.Subscribe("privrec.perm.commit", func(*nats.Msg) {})
				return err
			},
			`Permissions Violation for Subscription to "privrec.perm.commit"`},
		{"front-end 0 listens on the coordinator's inbox", feNC, vFe,
			func(nc *nats.Conn) error {
				_, err := nc.Subscribe(inboxPrefix(coKey)+".>", func(*nats.Msg) {})
				return err
			},
			`Permissions Violation for Subscription to "` + inboxPrefix(coKey) + `.>"`},
		{"the coordinator publishes a result", nc, vCo,
			func(nc *nats.Conn) error { return nc.Publish("privrec.perm.ctl.2.result.0", make([]byte, 200)) },
			`Permissions Violation for Publish to "privrec.perm.ctl.2.result.0"`},
		{"the coordinator acknowledges a piece", nc, vCo,
			func(nc *nats.Conn) error { return nc.Publish("$JS.ACK.PRIVREC_perm_UP_0.agg-2-0.1.1.1.1.0", nil) },
			`Permissions Violation for Publish to "$JS.ACK.PRIVREC_perm_UP_0.agg-2-0.1.1.1.1.0"`},
	} {
		if err := tc.act(tc.nc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := tc.nc.Flush(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := tc.v.wait(tc.want); got == "" {
			t.Errorf("%s: no permission violation %s (errors: %q)", tc.name, tc.want, tc.v.all())
		}
	}
	// Nothing of theirs was stored: round 2's subjects are empty.
	cs, err := js.Stream(ctx, "PRIVREC_perm_CTL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cs.Info(ctx, jetstream.WithSubjectFilter("privrec.perm.ctl.2.>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 0 {
		t.Errorf("refused publishes reached the control stream: %v", info.State.Subjects)
	}
}

// TestNATSConfigFlags: nats-config refuses a missing directory, a bad
// run name and a shard count below one, naming the flag.
func TestNATSConfigFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nats-config", "--run", "r", "--shards", "2"}, "--out DIR is required"},
		{[]string{"nats-config", "--run", "a.b", "--shards", "2", "--out", t.TempDir()}, `--run "a.b"`},
		{[]string{"nats-config", "--run", "r", "--shards", "0", "--out", t.TempDir()}, "--shards 0"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
