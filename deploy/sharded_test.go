package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/privrec/privrec/eval"
	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/shard"
)

// startNATS runs an embedded NATS server (127.0.0.1, random port,
// JetStream file store in a temporary directory) until the test ends and
// returns a connection to it.
func startNATS(t testing.TB) *nats.Conn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// runAggregators runs the run's aggregators in process, one per shard,
// through its rounds 1, 2, … (skipping aborted ones) until the test ends,
// as `privrec aggregate` does, and returns how many rounds each
// completed and aborted (to read once the test is done with them).
func runAggregators(t testing.TB, nc *nats.Conn, run string) func() ([]int, []int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	c, err := shard.LoadConfig(lctx, js, run)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done, aborted := make([]int, c.Shards), make([]int, c.Shards)
	for s := range c.Shards {
		ag, err := shard.NewAggregator(js, c, s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for r := uint64(1); ctx.Err() == nil; r++ {
				_, err := ag.Round(ctx, r)
				switch {
				case errors.Is(err, shard.ErrAborted):
					aborted[s]++
				case err != nil:
					if ctx.Err() == nil {
						t.Errorf("aggregator %d, round %d: %v", s, r, err)
					}
					return
				default:
					done[s]++
				}
			}
		})
	}
	stop := func() ([]int, []int) {
		cancel()
		wg.Wait()
		return done, aborted
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestShardedServe: a served masked HDPMF run (test mode, TLS loopback)
// whose rounds are aggregated by two in-process aggregators over an
// embedded NATS JetStream (privrec serve --nats) gives the same final
// model, bit for bit, as the same run aggregated in the server's
// process; every masked round is one shard round that both aggregators
// complete, none aborted.
func TestShardedServe(t *testing.T) {
	d, spl := smallCatalog(t, 30, 120)
	params := map[string]string{"epochs": "2", "secagg": "masked"}
	_, cfg := configure(t, "hdpmf", params)
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir()}, "127.0.0.1:0")
	want, _ := runClients(t, h.dial(t, true, 4), spl.Train, 4)

	nc := startNATS(t)
	_, cfg = configure(t, "hdpmf", params)
	hs := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "same", Shards: 2}}}, "127.0.0.1:0")
	stop := runAggregators(t, nc, "same")
	got, _ := runClients(t, hs.dial(t, true, 4), spl.Train, 4)
	if k := firstDiff(got.V, want.V); k >= 0 {
		t.Fatalf("V[%d] = %v with sharded aggregation, %v in the server's process", k, got.V[k], want.V[k])
	}
	led, err := hs.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	checkShardRounds(t, hs.srv, stop, len(led))
}

// checkShardRounds stops the aggregators and checks that each completed
// every shard round the server opened, at least one a masked round in
// its ledger, and aborted none.
func checkShardRounds(t *testing.T, s *Server, stop func() ([]int, []int), ledger int) {
	t.Helper()
	done, aborted := stop()
	opened, err := s.st.metaUint(keyShardRound)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 || opened == 0 || opened > uint64(ledger) {
		t.Fatalf("%d aggregators, %d shard rounds opened, %d rounds in the ledger", len(done), opened, ledger)
	}
	for s := range done {
		if uint64(done[s]) != opened || aborted[s] != 0 {
			t.Errorf("aggregator %d: %d rounds done, %d aborted; the server opened %d", s, done[s], aborted[s], opened)
		}
	}
}

// dropMasked fails the first masked-vector call of a training round, as
// a device going offline after its keys and shares and before its masked
// vector: its pairwise masks must be removed from the sum.
type dropMasked struct {
	next  http.RoundTripper
	mu    sync.Mutex
	round int32 // the round it dropped a client from, -1 before
}

func (d *dropMasked) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/SecAgg") && r.Body != nil && r.Header.Get("Content-Encoding") == "" {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m fedv1.SecAggRequest
		if proto.Unmarshal(body, &m) == nil && m.GetMasked() != nil && m.GetRound() >= 1 {
			d.mu.Lock()
			drop := d.round < 0
			if drop {
				d.round = m.GetRound()
			}
			d.mu.Unlock()
			if drop {
				return nil, errors.New("the device went offline before sending its masked vector")
			}
		}
	}
	return d.next.RoundTrip(r)
}

// TestShardedServeDropout: with sharded aggregation, a client that drops
// out of a training round after sharing its keys and before its masked
// vector does not stop the round: it closes at its deadline with the
// others' vectors (above the 70% floor), the aggregators remove the
// dropped client's pairwise masks, and the run ends with a model.
func TestShardedServeDropout(t *testing.T) {
	d, spl := smallCatalog(t, 20, 80)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: time.Second, MinParticipants: 0.7,
		Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "drop", Shards: 2}}}, "127.0.0.1:0")
	stop := runAggregators(t, nc, "drop")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	drop := &dropMasked{next: hc.Transport, round: -1}
	hc.Transport = drop
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: 4, Insecure: true,
		Logger: quietLog(), Retry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := runClients(t, sess, spl.Train, 4)
	if rmse := eval.Rating(m, spl.Test).RMSE; math.IsNaN(rmse) || math.IsInf(rmse, 0) {
		t.Fatalf("RMSE %v", rmse)
	}
	if drop.round < 0 {
		t.Fatal("no client dropped")
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range led {
		if e.Round != int(drop.round) {
			continue
		}
		found = true
		if e.Skipped != "" || e.Participants != e.Enrolled-1 {
			t.Errorf("round %d: %d of %d took part, skipped %q; want all but the dropped client, released", e.Round, e.Participants, e.Enrolled, e.Skipped)
		}
	}
	if !found {
		t.Errorf("round %d is not in the ledger", drop.round)
	}
	checkShardRounds(t, h.srv, stop, len(led))
}

// BenchmarkServedMaskedRound times a served masked HDPMF run's training
// rounds (TLS loopback, every client in one process) from the opening of
// the masked step to the unmasked sum — the masked vectors' upload, their
// aggregation and the unmasking, the part sharding moves — with the
// aggregation in the server's process ("local") and on an embedded NATS
// JetStream with S = 1, 2, 4 in-process aggregators. It reports the
// masked vectors and megabytes a second of that span.
func BenchmarkServedMaskedRound(b *testing.B) {
	d, spl := smallCatalog(b, 100, 2000)
	for _, shards := range []int{0, 1, 2, 4} {
		name := "local"
		if shards > 0 {
			name = fmt.Sprintf("S=%d", shards)
		}
		b.Run(name, func(b *testing.B) {
			var nc *nats.Conn
			if shards > 0 {
				nc = startNATS(b)
			}
			var span time.Duration
			var vectors, words int
			for i := 0; b.Loop(); i++ {
				_, cfg := configure(b, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
				sc := ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d), StateDir: b.TempDir()}
				run := fmt.Sprintf("bench%d", i)
				if shards > 0 {
					sc.Sharded = &Sharded{Conn: nc, Config: shard.Config{Run: run, Shards: shards}}
				}
				h := startServer(b, sc, "127.0.0.1:0")
				var stop func() ([]int, []int)
				if shards > 0 {
					stop = runAggregators(b, nc, run)
				}
				var mu sync.Mutex
				var opened time.Time
				h.srv.testHook = func(event string, round int, sum []uint32) {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case round == 0: // the setup round: one word an item
					case event == "masked":
						opened = time.Now()
					case event == "sum":
						span += time.Since(opened)
						words += len(sum)
					}
				}
				runClients(b, h.dial(b, true, 4), spl.Train, 4)
				led, err := h.srv.Ledger()
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range led {
					if e.Phase == "train" && e.Skipped == "" {
						vectors += e.Participants
					}
				}
				if stop != nil {
					stop()
				}
			}
			if vectors == 0 {
				b.Fatal("no training round released")
			}
			rounds := words / (len(d.ItemIDs) * 11)
			b.ReportMetric(float64(vectors)/span.Seconds(), "vectors/s")
			b.ReportMetric(float64(vectors)*float64(words/max(1, rounds))*4/1e6/span.Seconds(), "MB/s")
			b.ReportMetric(span.Seconds()/float64(max(1, rounds)), "s/round")
		})
	}
}

// TestShardedRunState: a server restarted after a crash in shard round 2
// aborts that round when it opens the next (3), so the aggregators go on;
// a run name belongs to one state directory: a new state refuses a run
// already on the cluster, and a state refuses another run name.
func TestShardedRunState(t *testing.T) {
	nc := startNATS(t)
	d, _ := smallCatalog(t, 10, 20)
	state := t.TempDir()
	newServer := func(state, run string) (*Server, error) {
		_, cfg := configure(t, "hdpmf", map[string]string{"secagg": "masked"})
		return NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 1, TestMode: true, Catalog: catalogOf(d), StateDir: state,
			Token: testToken, Logger: quietLog(), Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: run, Shards: 2}}})
	}
	s, err := newServer(state, "st")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// As if an incarnation had opened shard rounds 1 and 2, then died.
	if err := s.st.putMetaUint(keyShardRound, 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	co, round, err := s.openShard(ctx, secagg.Params{N: 3, K: 2, T: 2, Bits: 24, Len: 10})
	if err != nil {
		t.Fatal(err)
	}
	if round != 3 || co.Config().Len != 10 || co.Config().Clients != 3 {
		t.Errorf("opened shard round %d of %d words and %d clients, want round 3 of 10 and 3", round, co.Config().Len, co.Config().Clients)
	}
	_ = co.Abort(ctx, errors.New("test over"))
	js, _ := jetstream.New(nc)
	c, err := shard.LoadConfig(ctx, js, "st")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []uint64{2, 3} { // left open by the crash; aborted here
		ag, err := shard.NewAggregator(js, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ag.Round(ctx, r); !errors.Is(err, shard.ErrAborted) {
			t.Errorf("aggregator in shard round %d: %v", r, err)
		}
	}
	if _, err := newServer(t.TempDir(), "st"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a new state on an existing run: %v", err)
	}
	s.Close()
	if _, err := newServer(state, "other"); !errors.Is(err, ErrState) {
		t.Errorf("a state on another run: %v", err)
	}
}

// TestShardedServeActive: secagg's active protocol (certified, signed
// keys, the consistency round between the masked vectors and the
// unmasking) runs with sharded aggregation too: every masked round is
// released with all clients' vectors, and both aggregators complete
// every shard round.
func TestShardedServeActive(t *testing.T) {
	d, spl := smallCatalog(t, 20, 60)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 3, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 5 * time.Second, ActiveSecAgg: true,
		Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "active", Shards: 2}}}, "127.0.0.1:0")
	stop := runAggregators(t, nc, "active")
	sess := h.dial(t, true, 3)
	_, certifier, _ := ed25519.GenerateKey(crand.Reader)
	sess.cfg.Certifier, sess.cfg.Authority, sess.cfg.Run = certifier, certifier.Public().(ed25519.PublicKey), "test-run"
	runClients(t, sess, spl.Train, 3)
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range led {
		if e.Phase != "final" && (e.Skipped != "" || e.Uploads != spl.Train.NumUsers()) {
			t.Errorf("round %d: %d masked vectors of %d, skipped %q", e.Round, e.Uploads, spl.Train.NumUsers(), e.Skipped)
		}
	}
	checkShardRounds(t, h.srv, stop, len(led))
}

// TestShardedKill9: the server process (the test binary re-executed,
// aggregating on an embedded NATS with 2 in-process aggregators) is
// SIGKILLed in the first training round as soon as the first masked
// vector was admitted (shard round 2), and started again on the same
// state: that round is skipped for good (never re-aggregated), the
// restarted server aborts shard round 2 so the aggregators go on, and
// the run completes with every other round released.
func TestShardedKill9(t *testing.T) {
	const seed, users = 5, 30
	nc := startNATS(t)
	_, spl := testData(t, users)
	state := t.TempDir()
	spec := childSpec{Method: "hdpmf", Params: map[string]string{"epochs": "3", "secagg": "masked"}, Users: users, Seed: seed,
		State: state, Addr: freeAddr(t), NATS: nc.ConnectedUrl(), Run: "kill"}
	start := childStarter(t, spec)
	admitted := make(chan struct{}, 1)
	sub, err := nc.Subscribe("privrec.kill.ctl.2.admit", func(*nats.Msg) {
		select {
		case admitted <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	child := start()
	defer func() { child.Process.Kill(); child.Wait() }()
	ca := childCert(t, state)
	stop := runAggregators(t, nc, "kill")
	done := runAsync((&harness{url: "https://" + spec.Addr, ca: ca}).dial(t, true, seed), spl.Train, seed)
	select {
	case <-admitted:
	case r := <-done:
		t.Fatalf("the run ended before the kill: %v", r.err)
	case <-time.After(3 * time.Minute):
		t.Fatal("no masked vector admitted in shard round 2 within 3 minutes")
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	child = start()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	st, err := openStore(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	led, err := st.ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(led) != 5 { // setup, 3 training rounds, final
		t.Fatalf("the ledger holds %d rounds, want 5", len(led))
	}
	for k, e := range led {
		if skip := e.Skipped != ""; e.Round != k || skip != (k == 1) {
			t.Errorf("ledger entry %d: round %d skipped %q; want round 1 alone skipped", k, e.Round, e.Skipped)
		}
	}
	opened, err := st.metaUint(keyShardRound)
	if err != nil {
		t.Fatal(err)
	}
	finished, aborted := stop()
	for s := range finished {
		// Shard rounds: the setup, the killed one (aborted), 2 more.
		if opened != 4 || finished[s] != 3 || aborted[s] != 1 {
			t.Errorf("aggregator %d: %d shard rounds done, %d aborted; the server opened %d, want 3, 1 and 4", s, finished[s], aborted[s], opened)
		}
	}
}

// TestShardedUploadOnce: a client whose sharded upload failed (here its
// call was cancelled before the first piece) is out of the round: a
// second masked vector from it is refused as a duplicate, and so is one
// after a successful upload.
func TestShardedUploadOnce(t *testing.T) {
	nc := startNATS(t)
	d, _ := smallCatalog(t, 10, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"secagg": "masked"})
	s, err := NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 1, TestMode: true, Catalog: catalogOf(d), StateDir: t.TempDir(),
		Token: testToken, Logger: quietLog(), Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "once", Shards: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := secagg.Params{N: 3, K: 2, T: 2, Bits: 24, Len: 10}
	co, round, err := s.openShard(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Abort(ctx, errors.New("test over"))
	// Every position takes the steps before the masked vector.
	ses := secagg.NewSession(co.Server(), co)
	sa := &saRound{p: p, ses: ses, co: co, shardRound: round}
	clients := make([]*secagg.Client, p.N)
	msgs := make([]secagg.Message, p.N)
	for u := range p.N {
		clients[u], _ = secagg.NewClient(uint32(u), p, crand.Reader)
		msgs[u], _ = clients[u].Start(make([]uint32, p.Len))
	}
	for ses.Open() < secagg.StepMasked {
		for _, m := range msgs {
			if err := ses.Add(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		st, err := ses.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ses.Release()
		for u := range msgs {
			r, err := ses.Reply(ctx, st, uint32(u))
			if err != nil {
				t.Fatal(err)
			}
			msgs[u], _ = clients[u].Next(r)
		}
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	y := make([]uint32, p.Len)
	for _, tc := range []struct {
		ctx  context.Context
		me   uint32
		want string // in the error, "" for none
	}{
		{gone, 0, "out of this round"},
		{ctx, 0, "duplicate"},
		{ctx, 1, ""},
		{ctx, 1, "duplicate"},
	} {
		err := s.addStep(tc.ctx, sa, tc.me, &secagg.MaskedInput{From: tc.me, Y: y})
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("position %d: %v, want %q", tc.me, err, tc.want)
		}
	}
	if ses.Inputs() != 1 || co.Admitted() != 1 {
		t.Errorf("%d vectors taken, %d admitted; want 1 and 1", ses.Inputs(), co.Admitted())
	}
}
