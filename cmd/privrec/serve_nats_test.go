package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// servedModel runs `privrec serve` (hdpmf, masked, test mode, dev TLS on
// loopback) with extra flags and one `privrec client --simulate` of every
// user of data against it, and returns the published model file.
func servedModel(t *testing.T, data string, users int, extra ...string) []byte {
	t.Helper()
	return servedModelVia(t, data, users, nil, extra...)
}

// servedModelVia is servedModel whose client calls the URLs via returns
// (given the server's address and state directory, once its dev
// certificate is written) instead of the server; nil calls the server.
func servedModelVia(t *testing.T, data string, users int, via func(addr, state string) string, extra ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	addr := freeAddr(t)
	prm := filepath.Join(dir, "model.prm")
	common := []string{"--seed", "7", "--scale", "1,5,1"}
	var wg sync.WaitGroup
	var serveErr, clientErr error
	var serveLog, clientLog string
	// A client that fails stops the server, which would otherwise wait
	// for its enrolments until the test's deadline.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wg.Go(func() {
		_, serveLog, serveErr = runCtx(ctx, append(append([]string{"serve", "--method", "hdpmf", "--epochs", "2", "--secagg", "masked", "--secagg-active=false", "--insecure",
			"--dev-tls", "--state", state, "--listen", addr, "--items", data, "--min-clients", fmt.Sprint(users),
			"--enroll-quiet", "500ms", "--round-timeout", "1m", "--linger", "2s", "--out", prm}, common...), extra...)...)
	})
	cert := devCert(t, state)
	server := "https://" + addr
	if via != nil {
		server = via(addr, state)
	}
	_, clientLog, clientErr = run(t, append([]string{"client", "--insecure", "--server", server, "--ca", cert,
		"--token-file", filepath.Join(state, "enroll-token"), "--simulate", fmt.Sprint(users),
		"--data", data, "--split", "random:0.9"}, common...)...)
	if clientErr != nil {
		stop()
	}
	wg.Wait()
	if serveErr != nil || clientErr != nil {
		t.Fatalf("serve %v: %v; client: %v\nserver's log:\n%s\nclient's log:\n%s", extra, serveErr, clientErr, serveLog, clientLog)
	}
	raw, err := os.ReadFile(prm)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestServeNATS: `privrec serve --nats URL --shards 2` with two `privrec
// aggregate` commands against an embedded NATS JetStream (127.0.0.1,
// random port, file store in a temporary directory) that admits only
// the users of privrec nats-config, each party connecting with its seed
// (--nats-nkey) under its least privileges, publishes the same
// model file, byte for byte, as the same served run without --nats; the
// aggregators (signing with keys of privrec aggregate keygen, the
// server holding their public keys) report every round folded. Bad flag
// combinations, and --nats without --aggregator-keys or --insecure, are
// refused.
func TestServeNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two served hdpmf runs")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--method", "hdpmf", "--dev-tls", "--state", t.TempDir(), "--shards", "2"}, "need --nats"},
		{[]string{"serve", "--method", "hdpmf", "--dev-tls", "--state", t.TempDir(), "--aggregator-keys", "a.pub"}, "need --nats"},
		{[]string{"serve", "--method", "hdpmf", "--dev-tls", "--state", t.TempDir(), "--nats", "nats://127.0.0.1:1"}, "--nats needs --aggregator-keys"},
		{[]string{"serve", "--method", "hdpmf", "--dev-tls", "--state", t.TempDir(), "--nats", "nats://127.0.0.1:1", "--shards", "2", "--aggregator-keys", "a.pub"}, "1 files for --shards 2"},
		{[]string{"serve", "--method", "hdpmf", "--dev-tls", "--state", t.TempDir(), "--nats", "nats://127.0.0.1:1", "--aggregator-keys", "/nonexistent.pub"}, "--aggregator-keys (shard 0): open /nonexistent.pub"},
		{[]string{"serve", "--method", "hdpmf", "--dev-tls", "--state", t.TempDir(), "--nats", "nats://127.0.0.1:1", "--insecure"}, "--nats nats://127.0.0.1:1"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	data := syntheticTSV(t, 3)
	const users = 200
	want := servedModel(t, data, users)

	// The cluster admits only the users of privrec nats-config, each
	// with its least privileges.
	ns, auth := natsConfigServer(t, "cli", 2)
	keys := t.TempDir()
	for s := range 2 {
		if _, _, err := run(t, "aggregate", "keygen", "--out", filepath.Join(keys, fmt.Sprint(s))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	outs := make([]strings.Builder, 2)
	errs := make([]error, 2)
	for s := range outs {
		wg.Go(func() {
			var errb bytes.Buffer
			errs[s] = newRoot(&outs[s], &errb, []string{"aggregate", "--nats", ns.ClientURL(), "--run", "cli",
				"--shard", fmt.Sprint(s), "--wait", "200ms", "--sign-key", filepath.Join(keys, fmt.Sprint(s), "aggregator.key"),
				"--nats-nkey", filepath.Join(auth, fmt.Sprintf("aggregator-%d.nk", s))}).ExecuteContext(ctx)
		})
	}
	got := servedModel(t, data, users, "--nats", ns.ClientURL(), "--nats-run", "cli", "--shards", "2",
		"--aggregator-keys", filepath.Join(keys, "0", "aggregator.pub")+","+filepath.Join(keys, "1", "aggregator.pub"),
		"--nats-nkey", filepath.Join(auth, "coordinator.nk"))
	cancel()
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Errorf("the model served with --nats differs from the one served without (%d and %d bytes)", len(got), len(want))
	}
	for s := range outs {
		if errs[s] != nil && !errors.Is(errs[s], context.Canceled) {
			t.Errorf("aggregator %d: %v", s, errs[s])
		}
		// hdpmf with 2 epochs: a setup round and 2 training rounds are
		// masked, each one shard round here.
		lines := strings.Split(strings.TrimSpace(outs[s].String()), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], fmt.Sprintf("round 1 shard %d: folded %d", s, users)) {
			t.Errorf("aggregator %d printed:\n%s", s, outs[s].String())
		}
	}
}

// TestFront: `privrec serve --nats` with two `privrec front` processes
// and two `privrec aggregate`, every party on its nats-config seed, and
// one `privrec client` given both front-ends (--server URL1,URL2)
// publishes the same model file, byte for byte, as the same run served
// without NATS; both front-ends published masked vectors and neither
// warned (but that the server was not listening yet). Missing flags
// are refused.
func TestFront(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two served hdpmf runs")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"front", "--nats", "nats://127.0.0.1:1"}, "--coordinator URL"},
		{[]string{"front", "--coordinator", "https://127.0.0.1:1"}, "--nats URL"},
		{[]string{"front", "--coordinator", "https://127.0.0.1:1", "--nats", "nats://127.0.0.1:1"}, "--tls-cert and --tls-key"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	data := syntheticTSV(t, 3)
	const users = 60
	want := servedModel(t, data, users)

	ns, auth := natsConfigServer(t, "fcli", 2)
	keys := t.TempDir()
	for s := range 2 {
		if _, _, err := run(t, "aggregate", "keygen", "--out", filepath.Join(keys, fmt.Sprint(s))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for s := range 2 {
		wg.Go(func() {
			var out, errb bytes.Buffer
			err := newRoot(&out, &errb, []string{"aggregate", "--nats", ns.ClientURL(), "--run", "fcli",
				"--shard", fmt.Sprint(s), "--wait", "200ms", "--sign-key", filepath.Join(keys, fmt.Sprint(s), "aggregator.key"),
				"--nats-nkey", filepath.Join(auth, fmt.Sprintf("aggregator-%d.nk", s))}).ExecuteContext(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("aggregator %d: %v", s, err)
			}
		})
	}
	var logs [2]bytes.Buffer
	got := servedModelVia(t, data, users, func(addr, state string) string {
		var urls []string
		for i := range 2 {
			fa := freeAddr(t)
			urls = append(urls, "https://"+fa)
			wg.Go(func() {
				var out bytes.Buffer
				err := newRoot(&out, &logs[i], []string{"front", "--coordinator", "https://" + addr,
					"--coordinator-ca", filepath.Join(state, "tls", "cert.pem"), "--listen", fa,
					"--tls-cert", filepath.Join(state, "tls", "cert.pem"), "--tls-key", filepath.Join(state, "tls", "key.pem"),
					"--nats", ns.ClientURL(), "--nats-run", "fcli", "--nats-nkey", filepath.Join(auth, fmt.Sprintf("front-%d.nk", i)),
					"--front-token-file", filepath.Join(state, "front-token")}).ExecuteContext(ctx)
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("front-end %d: %v", i, err)
				}
			})
		}
		// The client keeps to the front-end it reached: both must listen
		// before it starts, or on a loaded machine all of it may move to
		// the first one up.
		for _, u := range urls {
			for k := 0; ; k++ {
				c, err := net.DialTimeout("tcp", strings.TrimPrefix(u, "https://"), time.Second)
				if err == nil {
					c.Close()
					break
				}
				if k == 600 {
					t.Fatalf("front-end %s did not listen in 60 s: %v", u, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		return strings.Join(urls, ",")
	}, "--nats", ns.ClientURL(), "--nats-run", "fcli", "--shards", "2",
		"--aggregator-keys", filepath.Join(keys, "0", "aggregator.pub")+","+filepath.Join(keys, "1", "aggregator.pub"),
		"--nats-nkey", filepath.Join(auth, "coordinator.nk"))
	cancel()
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Errorf("the model served through front-ends differs from the one served without NATS (%d and %d bytes)", len(got), len(want))
	}
	for i := range logs {
		l := logs[i].String()
		warned := false
		for _, line := range strings.Split(l, "\n") {
			// The client may call before the server listens (it writes
			// its certificate first): the front-end says so.
			warned = warned || strings.Contains(line, `"level":"WARN"`) && !strings.Contains(line, `"msg":"front-end: the coordinator did not answer"`)
		}
		if warned || !strings.Contains(l, `"msg":"front-end stopped","published":`) || strings.Contains(l, `"published":0}`) {
			t.Errorf("front-end %d: a warning, or no masked vector published:\n%s", i, l)
		}
	}
}
