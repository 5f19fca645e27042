package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
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

// freePortList returns n ports that were free on 127.0.0.1, as a flag
// value (comma-separated).
func freePortList(t *testing.T, n int) string {
	t.Helper()
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, fmt.Sprint(l.Addr().(*net.TCPAddr).Port))
	}
	return strings.Join(ports, ",")
}

// startConf starts an embedded nats-server from a configuration file.
func startConf(t *testing.T, conf string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server does not load %s: %v", conf, err)
	}
	opts.NoSigs = true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatalf("%s: not ready", conf)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// TestNATSConfigCluster starts the three nodes privrec nats-config
// --nodes 3 configures (embedded, on 127.0.0.1), connects the
// coordinator and two aggregators with their seeds over TLS checked
// against the generated CA, and runs a signed masked round on streams
// with three replicas: the sum is the plain sum and nobody meets a
// permission violation. Then a connection without a seed, one that
// does not trust the cluster's CA, and a fourth server whose
// certificate is not of the cluster's CA trying to route to the
// cluster are each refused.
func TestNATSConfigCluster(t *testing.T) {
	const runName, shards = "clu", 2
	dir := filepath.Join(t.TempDir(), "natsc")
	stdout, _, err := run(t, "nats-config", "--run", runName, "--shards", fmt.Sprint(shards), "--nodes", "3",
		"--port", freePortList(t, 3), "--cluster-port", freePortList(t, 3), "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "cluster privrec of 3 nodes") {
		t.Errorf("nats-config said %q", stdout)
	}
	for _, name := range []string{"tls/ca-key.pem", "tls/n0-key.pem", "coordinator.nk"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", name, err)
		}
	}
	nodes := make([]*server.Server, 3)
	for i := range nodes {
		nodes[i] = startConf(t, filepath.Join(dir, fmt.Sprintf("n%d.conf", i)))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "nats-urls"))
	if err != nil {
		t.Fatal(err)
	}
	urls := strings.TrimSpace(string(raw))
	ca := filepath.Join(dir, "tls", "ca.pem")
	connect := func(seed string) (*nats.Conn, jetstream.JetStream, *violations) {
		t.Helper()
		nc, err := (&natsFlags{nkey: filepath.Join(dir, seed), ca: ca}).connect(urls)
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
	nc, js, vCo := connect("coordinator.nk")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for { // the meta leader
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no JetStream meta leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	pubs := make([]ed25519.PublicKey, shards)
	privs := make([]ed25519.PrivateKey, shards)
	for s := range shards {
		pubs[s], privs[s], _ = ed25519.GenerateKey(nil)
	}
	const n, l = 6, 101
	c := shard.Config{Run: runName, Shards: shards, Len: l, Clients: n, Bits: 24, AggregatorKeys: pubs}
	p := secagg.Params{N: n, K: n - 1, T: 4, Bits: 24, Len: l}
	co, err := shard.NewCoordinator(ctx, nc, js, c, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"PRIVREC_clu_CTL", "PRIVREC_clu_UP_0", "PRIVREC_clu_UP_1", "KV_PRIVREC_clu_CKPT"} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s: %d replicas, want 3", name, r)
		}
	}
	aggV := make([]*violations, shards)
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for s := range shards {
		var ajs jetstream.JetStream
		_, ajs, aggV[s] = connect(fmt.Sprintf("aggregator-%d.nk", s))
		lc, err := shard.LoadConfig(ctx, ajs, runName)
		if err != nil {
			t.Fatalf("aggregator %d loads the run's config: %v", s, err)
		}
		lc.SignKey = privs[s]
		ag, err := shard.NewAggregator(ajs, lc, s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _, errs[s] = ag.Round(ctx, 1) })
	}
	got, want := maskedRound(t, ctx, co, nc, js, p, 1)
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			t.Fatalf("aggregator %d: %v", s, err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatal("sum on the generated cluster differs from the plain sum")
	}
	if err := co.Broadcast(ctx, []byte("next")); err != nil {
		t.Fatal(err)
	}
	for party, v := range map[string]*violations{"coordinator": vCo, "aggregator 0": aggV[0], "aggregator 1": aggV[1]} {
		if errs := v.all(); len(errs) > 0 {
			t.Errorf("%s met errors in an honest round: %q", party, errs)
		}
	}

	// Strangers.
	first := strings.Split(urls, ",")[0]
	if snc, err := nats.Connect(first, nats.RootCAs(ca)); err == nil {
		snc.Close()
		t.Error("a connection without a seed was accepted")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("a connection without a seed: %v, want an authorization violation", err)
	}
	if _, err := (&natsFlags{nkey: filepath.Join(dir, "coordinator.nk")}).connect(first); err == nil {
		t.Error("a connection that does not trust the cluster's CA was made")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a connection without the cluster's CA: %v, want a certificate error", err)
	}

	// A rogue server with a certificate of another CA: same cluster
	// name, routes to every node. No node takes it as a route.
	other := filepath.Join(t.TempDir(), "other")
	if _, _, err := run(t, "nats-config", "--run", runName, "--shards", "1", "--nodes", "2",
		"--port", freePortList(t, 2), "--cluster-port", freePortList(t, 2), "--out", other); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(other, "n0.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, ns := range nodes {
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("tls://127.0.0.1:%d", ns.ClusterAddr().Port)))
	}
	rogue := strings.Replace(string(conf), "routes: [", "routes: [\n    "+strings.Join(routes, "\n    "), 1)
	rogue = strings.Replace(rogue, "server_name: n0", "server_name: rogue", 1)
	if err := os.WriteFile(filepath.Join(other, "rogue.conf"), []byte(rogue), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := startConf(t, filepath.Join(other, "rogue.conf"))
	time.Sleep(2 * time.Second) // route attempts, refused by TLS verification
	if n := rs.NumRoutes(); n != 0 {
		t.Errorf("a server with another CA's certificate has %d routes to the cluster, want 0", n)
	}
	for i, ns := range nodes {
		routez, err := ns.Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routez.Routes {
			if r.RemoteName == "rogue" {
				t.Errorf("node n%d routes to the rogue server", i)
			}
		}
	}
}

// TestNATSConfigOneNode: nats-config --nodes 1 writes a single server
// that nats-server starts with JetStream and TLS. It wrote a cluster
// block without routes, which nats-server refuses ("JetStream cluster
// requires configured routes").
func TestNATSConfigOneNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "one")
	if _, _, err := run(t, "nats-config", "--run", "solo", "--shards", "2", "--nodes", "1",
		"--port", freePortList(t, 1), "--cluster-port", freePortList(t, 1), "--out", dir); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "n0.conf")
	raw, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "cluster {") {
		t.Errorf("a single node's configuration has a cluster block:\n%s", raw)
	}
	ns := startConf(t, conf)
	if !ns.JetStreamEnabled() {
		t.Error("the single node runs without JetStream")
	}
}
