package webclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/shard"
	"github.com/privrec/privrec/webclient"
)

// clientTransport is httpTransport through an HTTP client of its own (the
// run's TLS roots).
type clientTransport struct {
	base string
	hc   *http.Client
}

func (h clientTransport) Post(ctx context.Context, path string, header map[string]string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// shardedRun is a served masked run (privrec serve --nats) over
// loopback TLS whose rounds two in-process aggregators sum on an
// embedded NATS JetStream, with one front-end (privrec front, with the
// coordinator's front token): the simulated clients call the
// coordinator, the client under test the front-end.
type shardedRun struct {
	ctx        context.Context // ends with the run's failure
	url, front string          // the coordinator's and the front-end's base URLs
	code       string          // the enrolment code of the client under test
	hc         *http.Client
	srv        *deploy.Server
	f          *deploy.Front
	done       chan error // the coordinator's run
	aggDone    []int      // shard rounds each aggregator completed (after stop)
	aggAborted []int
	stop       func()
}

// startShardedRun starts the sharded run of method name (params) with
// sim simulated clients (ml-latest-small's first users) and one page.
func startShardedRun(ctx context.Context, t *testing.T, name string, params map[string]string, sim int) *shardedRun {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	conn := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{Catalog: true})
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for k, u := range d.Users {
		if int(u) < sim {
			idx = append(idx, k)
		}
	}
	train := d.Subset(idx)
	spec, err := method.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := spec.Configure(params)
	if err != nil {
		t.Fatal(err)
	}
	served, err := method.Protocol(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	codes, err := deploy.IssueCodes(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := deploy.DevCertificate(dir)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := deploy.ServerTLS(cert, key, false, "")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := deploy.HTTPClient(cert)
	if err != nil {
		t.Fatal(err)
	}
	const run, frontToken = "web", "front-secret-0123456789"
	sharded := &deploy.Sharded{Conn: conn(), Config: shard.Config{Run: run, Shards: 2}}
	srv, err := deploy.NewServer(deploy.ServerConfig{Method: served, Config: cfg, StateDir: dir, Token: "tok-0123456789abcdef",
		Catalog:    deploy.Catalog{ItemIDs: d.ItemIDs, Titles: d.ItemTitles, Scale: d.Scale},
		MinClients: sim + 1, EnrollQuiet: 300 * time.Millisecond, RoundTimeout: time.Minute, Logger: quiet,
		FrontToken: frontToken, Sharded: sharded})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r := &shardedRun{ctx: ctx, code: codes[0], hc: hc, srv: srv, done: make(chan error, 1)}
	stopped := false
	r.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(r.stop)

	// The coordinator, its run, and the aggregators (privrec aggregate).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.url = "https://" + ln.Addr().String()
	hs := &http.Server{Handler: srv.Mux(nil), TLSConfig: tc}
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	go func() {
		err := srv.Run(ctx)
		if err != nil && ctx.Err() == nil {
			// Not the page's wait to the deadline: everything stops.
			t.Errorf("the coordinator's run: %v", err)
			cancel()
		}
		r.done <- err
	}()
	js, err := jetstream.New(conn())
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	sc, err := shard.LoadConfig(lctx, js, run)
	if err != nil {
		t.Fatal(err)
	}
	r.aggDone, r.aggAborted = make([]int, sc.Shards), make([]int, sc.Shards)
	for s := range sc.Shards {
		ag, err := shard.NewAggregator(js, sc, s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for k := uint64(1); ctx.Err() == nil; k++ {
				_, err := ag.Round(ctx, k)
				switch {
				case errors.Is(err, shard.ErrAborted):
					r.aggAborted[s]++
				case err != nil:
					if ctx.Err() == nil {
						t.Errorf("aggregator %d, shard round %d: %v", s, k, err)
					}
					return
				default:
					r.aggDone[s]++
				}
			}
		})
	}

	// The front-end, over TLS with the coordinator's certificate.
	f, err := deploy.NewFront(deploy.FrontConfig{Coordinator: r.url, HTTP: hc, Conn: conn(), Run: run, Token: frontToken, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	fln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.f, r.front = f, "https://"+fln.Addr().String()
	wg.Go(func() {
		if err := f.Serve(ctx, fln, tc); err != nil {
			t.Errorf("front-end: %v", err)
		}
	})

	// The simulated clients, at the coordinator.
	sess, err := deploy.Dial(ctx, deploy.ClientConfig{URL: r.url, HTTP: hc, Methods: method.Protocol, Token: "tok-0123456789abcdef",
		Retry: time.Minute, Logger: quiet, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	cls, err := spec.NewClients(cfg, train, 1)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if _, err := sess.Run(ctx, cls.List); err != nil && ctx.Err() == nil {
			t.Errorf("simulated clients: %v", err)
		}
	})
	for deadline := time.Now().Add(time.Minute); srv.Parties() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the simulated clients did not enrol")
		}
	}
	return r
}

// hello returns the run's Hello through base, as the page asks it.
func (r *shardedRun) hello(t *testing.T, base string) []byte {
	t.Helper()
	resp, err := r.hc.Post(base+webclient.Service+"Hello", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("Hello through %s: %d %s %v", base, resp.StatusCode, b, err)
	}
	return b
}

// TestClientThroughFrontEnd: the web client, natively, takes part in a
// sharded masked run (privrec serve --nats, two aggregators) beside
// simulated privrec clients, every call of its own — Hello, enrolment,
// rounds, secure aggregation, model — sent to a front-end (privrec
// front) over TLS in Connect's JSON encoding. The run completes; each
// masked vector of the page was published to the shards by the
// front-end (the simulated clients', which call the coordinator, by the
// coordinator) and every masked round took every client's vector;
// every shard round completed on both aggregators, none aborted; and
// the page's list is the one the served tests check without front-ends:
// dp-ease's the published model's fold-in, dp-als's the one a page that
// folds its ratings into the published model gets.
func TestClientThroughFrontEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("a served run: skipped in -short")
	}
	for _, tc := range []struct {
		method string
		params map[string]string
	}{
		{"dp-ease", map[string]string{"secagg": "masked", "top-items": "400"}}, // the Gram round: 80,201 words, past the cap without base64
		{"dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "init-items": "20"}},
	} {
		t.Run(tc.method, func(t *testing.T) { throughFrontEnd(t, tc.method, tc.params) })
	}
}

func throughFrontEnd(t *testing.T, name string, params map[string]string) {
	const sim = 12
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := startShardedRun(ctx, t, name, params, sim)
	ctx = r.ctx
	hello := r.hello(t, r.front)
	c, err := webclient.New(clientTransport{r.front, r.hc}, hello)
	if err != nil {
		t.Fatal(err)
	}
	c.AllowInsecure()
	if err := c.Remember(nil, &memStore{}); err != nil {
		t.Fatal(err)
	}
	cred, err := c.Enroll(ctx, r.code)
	if err != nil {
		t.Fatalf("enrolment through the front-end: %v", err)
	}
	var rs []webclient.Rating
	var rated []int
	for k := range 20 {
		rs = append(rs, webclient.Rating{Item: 7 * k, Value: float32(1 + k%5)})
		rated = append(rated, 7*k)
	}
	var evs []webclient.Event
	res, err := c.Train(ctx, rs, 10, func(e webclient.Event) { evs = append(evs, e) }, nil)
	if err != nil {
		t.Fatalf("%v; rounds seen: %+v", err, evs)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the coordinator's run did not end")
	}
	masked := 0
	for _, e := range evs {
		if e.Err != "" {
			t.Errorf("round %d: %s", e.Round, e.Err)
		}
		if e.Masked {
			masked++
			if e.Clients != sim+1 {
				t.Errorf("round %d: %d clients in its secure aggregation, want %d", e.Round, e.Clients, sim+1)
			}
		}
	}
	if masked < 3 || c.Sent().MaskedRounds != masked {
		t.Fatalf("%d masked rounds answered, %d masked vectors sent: %+v", masked, c.Sent().MaskedRounds, evs)
	}
	if got := r.f.Published(); got != int64(masked) {
		t.Errorf("the front-end published %d masked vectors; the page sent %d, all through it", got, masked)
	}
	led, err := r.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	rounds := 0
	for _, e := range led {
		t.Logf("round %d (%s): %d masked vectors of %d participants, skipped %q", e.Round, e.Phase, e.Uploads, e.Participants, e.Skipped)
		if e.Phase == "final" {
			continue
		}
		rounds++
		if e.Skipped != "" || e.Uploads != sim+1 || e.Participants != sim+1 {
			t.Errorf("round %d: %d masked vectors, %d participants, skipped %q; want every one of the %d clients'", e.Round, e.Uploads, e.Participants, e.Skipped, sim+1)
		}
	}
	if rounds < masked {
		t.Errorf("%d rounds in the ledger, the page answered %d masked ones", rounds, masked)
	}
	if len(res.Recs) != 10 {
		t.Fatalf("%d recommendations", len(res.Recs))
	}
	for _, rc := range res.Recs {
		for _, j := range rated {
			if rc.Item == j {
				t.Errorf("recommends item %d, which the person rated", j)
			}
		}
	}
	pub, err := model.ReadModel(bytes.NewReader(r.srv.Model()))
	if err != nil {
		t.Fatal(err)
	}
	switch c.Config().(type) {
	case *dpease.Config:
		f, err := pub.FoldIn("me", sortedInts32(rated), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := f.Recommend(0, 10, sortedInts32(rated))
		if !res.Ranking || len(want) != len(res.Recs) {
			t.Fatalf("dp-ease: ranking %v, %d recommendations; the published model's fold-in gives %d", res.Ranking, len(res.Recs), len(want))
		}
		for k, rc := range res.Recs {
			if rc.Rating != nil || rc.Item != int(want[k].Item) || rc.Score != want[k].Score {
				t.Errorf("dp-ease recommendation %d: %+v; the published model's fold-in: %+v", k, rc, want[k])
			}
		}
	case *dpals.Config:
		// A page that did not see the final round folds its ratings into
		// the published model (GetModel, through the front-end too): the
		// same list as the final round's solve.
		again, err := webclient.New(clientTransport{r.front, r.hc}, hello)
		if err != nil {
			t.Fatal(err)
		}
		again.AllowInsecure()
		again.SetCredential(cred)
		if err := again.Remember(nil, &memStore{}); err != nil {
			t.Fatal(err)
		}
		folded, err := again.Train(ctx, rs, 10, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(folded.Recs) != len(res.Recs) {
			t.Fatalf("%d recommendations from the fold-in, %d from the final round's solve", len(folded.Recs), len(res.Recs))
		}
		for k := range res.Recs {
			got, want := folded.Recs[k], res.Recs[k]
			if got.Item != want.Item || math.Abs(float64(got.Score-want.Score)) > 1e-3 {
				t.Errorf("recommendation %d from the fold-in: item %d, score %.4f; from the final round's solve: item %d, %.4f",
					k, got.Item, got.Score, want.Item, want.Score)
			}
		}
	}
	r.stop()
	for s := range r.aggDone {
		if r.aggDone[s] != masked || r.aggAborted[s] != 0 {
			t.Errorf("aggregator %d: %d shard rounds done, %d aborted; the page answered %d masked rounds", s, r.aggDone[s], r.aggAborted[s], masked)
		}
	}
}
