package deploy

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/shard"
)

// startFront runs a front-end of h's server (its own NATS connection to
// natsURL, run run) on 127.0.0.1 until the test ends, serving TLS with
// the server's dev certificate pair, and returns it and its URL.
func startFront(t testing.TB, h *harness, natsURL, run string) (*Front, string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFront(FrontConfig{Coordinator: h.url, HTTP: hc, Conn: nc, Run: run, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ServerTLS(filepath.Join(h.dir, "tls", "cert.pem"), filepath.Join(h.dir, "tls", "key.pem"), false, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln, tc) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f, "https://" + ln.Addr().String()
}

// dialURL connects a vendor client (as harness.dial) to url, through
// the round tripper wrap makes of the TLS transport (nil: none).
func dialURL(t testing.TB, url, ca string, seed uint64, wrap func(http.RoundTripper) http.RoundTripper) *Session {
	t.Helper()
	hc, err := HTTPClient(ca)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		hc.Transport = wrap(hc.Transport)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: url, HTTP: hc, Token: testToken, Seeded: true, Seed: seed, Insecure: true,
		Logger: quietLog(), Retry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// frontRun is a masked HDPMF run of 30 users (test mode), served and
// aggregated in the server's process: the model a sharded run through
// front-ends must reproduce bit for bit.
func frontRun(t *testing.T) (d *ratings.Dataset, spl ratings.Split, params map[string]string, want []float32) {
	t.Helper()
	d, spl = smallCatalog(t, 30, 120)
	params = map[string]string{"epochs": "2", "secagg": "masked"}
	_, cfg := configure(t, "hdpmf", params)
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir()}, "127.0.0.1:0")
	m, _ := runClients(t, h.dial(t, true, 4), spl.Train, 4)
	return d, spl, params, m.V
}

// checkFrontLedger checks that every masked round of s released every
// client's vector, and returns how many masked vectors the rounds took.
func checkFrontLedger(t *testing.T, s *Server, users int) (int, int) {
	t.Helper()
	led, err := s.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	vectors := 0
	for _, e := range led {
		if e.Phase == "final" {
			continue
		}
		if e.Skipped != "" || e.Uploads != users || e.Participants != users {
			t.Errorf("round %d: %d masked vectors, %d participants of %d, skipped %q", e.Round, e.Uploads, e.Participants, users, e.Skipped)
		}
		vectors += e.Uploads
	}
	return vectors, len(led)
}

// TestFrontEnds: a sharded masked run whose clients call two front-ends
// (privrec front), never the server, gives the same model bit for bit as
// the run aggregated in the server's process; every masked vector went
// through a front-end (each carried some), none through the server; the
// aggregators complete every shard round.
func TestFrontEnds(t *testing.T) {
	d, spl, params, want := frontRun(t)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", params)
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "fe", Shards: 2}}}, "127.0.0.1:0")
	stop := runAggregators(t, nc, "fe")
	f1, u1 := startFront(t, h, nc.ConnectedUrl(), "fe")
	f2, u2 := startFront(t, h, nc.ConnectedUrl(), "fe")
	got, _ := runClients(t, dialURL(t, u1+","+u2, h.ca, 4, nil), spl.Train, 4)
	if k := firstDiff(got.V, want); k >= 0 {
		t.Fatalf("V[%d] = %v through front-ends, %v in the server's process", k, got.V[k], want[k])
	}
	vectors, rounds := checkFrontLedger(t, h.srv, spl.Train.NumUsers())
	if p1, p2 := f1.Published(), f2.Published(); p1 == 0 || p2 == 0 || p1+p2 != int64(vectors) {
		t.Errorf("front-ends published %d and %d masked vectors; the rounds took %d, want all through the front-ends, some through each", p1, p2, vectors)
	}
	checkShardRounds(t, h.srv, stop, rounds)
}

// strangerFirst is a round tripper that, before the first masked vector
// of a training round leaves, sends a stranger's masked vector of the
// same round, session and length to the same front-end — without a
// credential, and with the credential of the vector's client (its ID)
// and a forged secret — and records the answers. A front-end that
// published before the server checked the credential would store the
// stranger's pieces under the client's message ids: JetStream's
// duplicate window would then drop the client's real pieces, and the
// aggregators refuse pieces whose digest is not the committed one.
type strangerFirst struct {
	next http.RoundTripper
	mu   sync.Mutex
	done bool
	errs []error
}

func (s *strangerFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/SecAgg") || r.Body == nil || r.Header.Get("Content-Encoding") != "" {
		return s.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m fedv1.SecAggRequest
	if proto.Unmarshal(body, &m) != nil || m.GetMasked() == nil || m.GetRound() < 1 {
		return s.next.RoundTrip(r)
	}
	s.mu.Lock()
	first := !s.done
	s.done = true
	s.mu.Unlock()
	if first {
		id, _, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), ".")
		forged := proto.Clone(&m).(*fedv1.SecAggRequest)
		data := make([]byte, len(m.GetMasked().GetData()))
		crand.Read(data)
		forged.GetMasked().Data = data
		base := r.URL.Scheme + "://" + r.URL.Host
		api := federationv1connect.NewFederationServiceClient(&http.Client{Transport: s.next}, base)
		for _, auth := range []string{"", "Bearer " + id + ".forged-secret"} {
			req := connect.NewRequest(forged)
			if auth != "" {
				req.Header().Set("Authorization", auth)
			}
			_, err := api.SecAgg(r.Context(), req)
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	}
	return s.next.RoundTrip(r)
}

// TestFrontStrangerFirst: a stranger who sends a masked vector in a
// client's name to a front-end before the client does — with no
// credential, or with the client's ID and a forged secret — is refused
// as unauthenticated before anything is published, and the run gives
// the same model bit for bit as without it, every client's vector in
// every round.
func TestFrontStrangerFirst(t *testing.T) {
	d, spl, params, want := frontRun(t)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", params)
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "stranger", Shards: 2}}}, "127.0.0.1:0")
	stop := runAggregators(t, nc, "stranger")
	f, u := startFront(t, h, nc.ConnectedUrl(), "stranger")
	st := &strangerFirst{}
	got, _ := runClients(t, dialURL(t, u, h.ca, 4, func(rt http.RoundTripper) http.RoundTripper {
		st.next = rt
		return st
	}), spl.Train, 4)
	if len(st.errs) != 2 {
		t.Fatalf("the stranger sent %d vectors, want 2", len(st.errs))
	}
	for k, err := range st.errs {
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("stranger's vector %d: %v, want unauthenticated", k, err)
		}
	}
	if k := firstDiff(got.V, want); k >= 0 {
		t.Fatalf("V[%d] = %v after the stranger's vectors, %v without", k, got.V[k], want[k])
	}
	vectors, rounds := checkFrontLedger(t, h.srv, spl.Train.NumUsers())
	if f.Published() != int64(vectors) {
		t.Errorf("the front-end published %d masked vectors; the rounds took %d", f.Published(), vectors)
	}
	checkShardRounds(t, h.srv, stop, rounds)
}
