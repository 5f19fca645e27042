package deploy

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	return startFrontToken(t, h, natsURL, run, "")
}

// startFrontToken is startFront with the coordinator's front token.
func startFrontToken(t testing.TB, h *harness, natsURL, run, token string) (*Front, string) {
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
	f, err := NewFront(FrontConfig{Coordinator: h.url, HTTP: hc, Conn: nc, Run: run, Token: token, Logger: quietLog()})
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
// and a forged secret — then, with the client's own credential, one
// larger than the server's cap for the call and one a word short, and
// records the answers. A front-end that
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
		real := r.Header.Get("Authorization")
		id, _, _ := strings.Cut(strings.TrimPrefix(real, "Bearer "), ".")
		n := len(m.GetMasked().GetData())
		base := r.URL.Scheme + "://" + r.URL.Host
		api := federationv1connect.NewFederationServiceClient(&http.Client{Transport: s.next}, base)
		for _, a := range []struct {
			auth  string
			bytes int
		}{
			{"", n}, {"Bearer " + id + ".forged-secret", n}, // strangers
			{real, n + 4*roundSlack}, {real, n - 4}, // the client itself: beyond the cap, one word short
		} {
			forged := proto.Clone(&m).(*fedv1.SecAggRequest)
			data := make([]byte, a.bytes)
			crand.Read(data)
			forged.GetMasked().Data = data
			req := connect.NewRequest(forged)
			if a.auth != "" {
				req.Header().Set("Authorization", a.auth)
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
// as unauthenticated before anything is published; a vector of the
// client itself larger than the server's cap for the call is refused
// before it is read (resource exhausted), and one a word short as
// malformed, before its digest is pinned. The run gives the same model
// bit for bit as without them, every client's vector in every round.
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
	wantCodes := []connect.Code{connect.CodeUnauthenticated, connect.CodeUnauthenticated, connect.CodeResourceExhausted, connect.CodeInvalidArgument}
	if len(st.errs) != len(wantCodes) {
		t.Fatalf("%d vectors sent first, want %d", len(st.errs), len(wantCodes))
	}
	for k, err := range st.errs {
		if connect.CodeOf(err) != wantCodes[k] {
			t.Errorf("vector %d sent first: %v, want %v", k, err, wantCodes[k])
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

// frontSpec is what a child front-end serves (TestFrontKill9).
type frontSpec struct {
	Coordinator string `json:"coordinator"`
	CA          string `json:"ca"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	NATS        string `json:"nats"`
	Run         string `json:"run"`
	Addr        string `json:"addr"`
}

// runFrontChild serves a front-end until killed.
func runFrontChild(fs *frontSpec) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	nc, err := nats.Connect(fs.NATS)
	if err != nil {
		return fail(err)
	}
	hc, err := HTTPClient(fs.CA)
	if err != nil {
		return fail(err)
	}
	f, err := NewFront(FrontConfig{Coordinator: fs.Coordinator, HTTP: hc, Conn: nc, Run: fs.Run, Logger: quietLog()})
	if err != nil {
		return fail(err)
	}
	tc, err := ServerTLS(fs.Cert, fs.Key, false, "")
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", fs.Addr)
	if err != nil {
		return fail(err)
	}
	if err := f.Serve(context.Background(), ln, tc); err != nil {
		return fail(err)
	}
	return 0
}

// stepCalls is a round tripper that records, for each client
// (credential), round and step, the hosts its SecAgg call was sent to,
// and signals first once a shares call of round 1 is sent to host
// watch. It holds the first shares call of round 1 to host hold back for
// 700 ms, so that the step stays open that long.
type stepCalls struct {
	next        http.RoundTripper
	watch, hold string
	// step names the step whose first call of round 1 to watch signals
	// first. When catch is not nil, that call's answer is held until
	// catch is closed (the front-end killed) and then lost, so at least
	// that client sends the step again through the other front-end,
	// however fast or loaded the machine.
	step   string
	first  chan struct{}
	catch  chan struct{}
	caught bool
	held   bool
	mu     sync.Mutex
	hosts  map[string]map[string]bool // "round step credential" → hosts
}

// stepName names the step of a SecAgg request.
func stepName(m *fedv1.SecAggRequest) string {
	switch {
	case m.GetMasked() != nil:
		return "masked"
	case m.GetShares() != nil:
		return "shares"
	case m.GetKeys() != nil:
		return "keys"
	}
	return "other"
}

func (c *stepCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/SecAgg") && r.Body != nil && r.Header.Get("Content-Encoding") == "" {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m fedv1.SecAggRequest
		if proto.Unmarshal(body, &m) == nil {
			k := fmt.Sprint(m.GetRound(), " ", stepName(&m), " ", r.Header.Get("Authorization"))
			c.mu.Lock()
			if c.hosts[k] == nil {
				c.hosts[k] = map[string]bool{}
			}
			c.hosts[k][r.URL.Host] = true
			c.mu.Unlock()
			c.mu.Lock()
			catch := c.catch != nil && !c.caught && m.GetRound() == 1 && stepName(&m) == c.step && r.URL.Host == c.watch
			c.caught = c.caught || catch
			c.mu.Unlock()
			if m.GetRound() == 1 && stepName(&m) == c.step && r.URL.Host == c.watch {
				select {
				case c.first <- struct{}{}:
				default:
				}
			}
			c.mu.Lock()
			hold := m.GetRound() == 1 && stepName(&m) == "shares" && r.URL.Host == c.hold && !c.held
			c.held = c.held || hold
			c.mu.Unlock()
			if hold {
				time.Sleep(700 * time.Millisecond)
			}
			if catch {
				resp, err := c.next.RoundTrip(r)
				<-c.catch
				if err == nil {
					resp.Body.Close()
				}
				return nil, errors.New("the front-end was killed before its answer arrived")
			}
		}
	}
	return c.next.RoundTrip(r)
}

// moved counts the clients whose call of step of round 1 was sent to
// both front-ends.
func (c *stepCalls) moved(step string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, hosts := range c.hosts {
		if strings.HasPrefix(k, "1 "+step+" ") && len(hosts) == 2 {
			n++
		}
	}
	return n
}

// TestFrontKill9: one of two front-ends, a child process, is SIGKILLed
// in the first training round — amid the clients' uploads, as soon as
// the first masked vector of the round was admitted; and, apart, while
// its clients wait for the answer to the shares step they sent through
// it. The clients it held send their calls again through the other
// front-end: a masked vector mid-upload is published under the same
// message ids and committed again, one admitted already is told so, and
// a step the server had taken already is answered as the first call
// would have been (the shares step is held open by one client of the
// other front-end, so that the killed one's clients wait in it). The round completes in its first session with every
// client's vector once (no shard round aborted), and the run gives the
// model of the server's own aggregation bit for bit.
func TestFrontKill9(t *testing.T) {
	d, spl, params, want := frontRun(t)
	for _, tc := range []struct {
		name, step string // the step whose calls move
	}{
		{"amid the uploads", "masked"},
		{"waiting for the shares step", "shares"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := startNATS(t)
			_, cfg := configure(t, "hdpmf", params)
			h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
				StateDir: t.TempDir(), RoundTimeout: 3 * time.Second,
				Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "fekill", Shards: 2}}}, "127.0.0.1:0")
			stop := runAggregators(t, nc, "fekill")
			_, u2 := startFront(t, h, nc.ConnectedUrl(), "fekill")
			addr := freeAddr(t)
			child := childStarter(t, childSpec{Front: &frontSpec{Coordinator: h.url, CA: h.ca, Cert: filepath.Join(h.dir, "tls", "cert.pem"),
				Key: filepath.Join(h.dir, "tls", "key.pem"), NATS: nc.ConnectedUrl(), Run: "fekill", Addr: addr}})()
			defer func() { child.Process.Kill(); child.Wait() }()
			hc, err := HTTPClient(h.ca)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; ; k++ { // the child's front-end up
				resp, err := hc.Get("https://" + addr + "/healthz")
				if err == nil {
					resp.Body.Close()
					break
				}
				if k == 300 {
					t.Fatalf("the child front-end did not come up: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			kill := make(chan struct{}, 1)
			calls := &stepCalls{hosts: map[string]map[string]bool{}, watch: addr, step: tc.step, first: make(chan struct{}, 1)}
			if tc.step == "shares" {
				calls.hold = strings.TrimPrefix(u2, "https://")
				go func() {
					<-calls.first
					time.Sleep(200 * time.Millisecond) // its clients' shares taken, the step held open
					kill <- struct{}{}
				}()
			} else {
				// The first masked vector sent to the child front-end is
				// on its way (its answer held until the kill); the
				// kill comes as the round's first vector is admitted,
				// or 300 ms later at most.
				calls.catch = make(chan struct{})
				admitted := make(chan struct{}, 1)
				sub, err := nc.Subscribe("privrec.fekill.ctl.2.admit", func(*nats.Msg) {
					select {
					case admitted <- struct{}{}:
					default:
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Unsubscribe()
				go func() {
					<-calls.first
					select {
					case <-admitted:
					case <-time.After(300 * time.Millisecond):
					}
					kill <- struct{}{}
				}()
			}
			done := runAsync(dialURL(t, "https://"+addr+","+u2, h.ca, 4, func(rt http.RoundTripper) http.RoundTripper {
				calls.next = rt
				return calls
			}), spl.Train, 4)
			select {
			case <-kill:
			case r := <-done:
				t.Fatalf("the run ended before the kill: %v", r.err)
			case <-time.After(3 * time.Minute):
				t.Fatal("no kill within 3 minutes")
			}
			child.Process.Signal(syscall.SIGKILL)
			child.Wait()
			if calls.catch != nil {
				close(calls.catch)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if k := firstDiff(r.v, want); k >= 0 {
				t.Fatalf("V[%d] = %v after a front-end was killed, %v in the server's process", k, r.v[k], want[k])
			}
			_, rounds := checkFrontLedger(t, h.srv, spl.Train.NumUsers())
			moved := calls.moved(tc.step)
			if moved == 0 {
				t.Errorf("no client sent its %s step of round 1 to both front-ends", tc.step)
			}
			t.Logf("%d clients sent their %s step of round 1 again through the other front-end", moved, tc.step)
			checkShardRounds(t, h.srv, stop, rounds)
		})
	}
}

// pinFirst is a round tripper that, before the first masked vector of
// round 1 leaves for a front-end, has the server pin the digest of
// another vector of the same client (ShardTicket, as a second front-end
// would), then sends the client's vector to the server itself, and
// records the server's answer.
type pinFirst struct {
	next   http.RoundTripper
	server string // the server's URL
	mu     sync.Mutex
	done   bool
	ticket error
	direct error
}

func (p *pinFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/SecAgg") || r.Body == nil || r.Header.Get("Content-Encoding") != "" {
		return p.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m fedv1.SecAggRequest
	if proto.Unmarshal(body, &m) != nil || m.GetMasked() == nil || m.GetRound() != 1 {
		return p.next.RoundTrip(r)
	}
	p.mu.Lock()
	first := !p.done
	p.done = true
	p.mu.Unlock()
	if first {
		auth, data := r.Header.Get("Authorization"), m.GetMasked().GetData()
		other := bytes.Clone(data)
		other[0] ^= 1
		d := sha256.Sum256(other)
		hc := &http.Client{Transport: p.next}
		_, terr := federationv1connect.NewFrontServiceClient(hc, p.server).ShardTicket(r.Context(),
			withAuth(&fedv1.ShardTicketRequest{Round: m.GetRound(), Session: m.GetSession(), Digest: d[:],
				Words: uint32(len(other) / 4), ModulusBits: m.GetMasked().GetModulusBits()}, auth))
		_, derr := federationv1connect.NewFederationServiceClient(hc, p.server).SecAgg(r.Context(), withAuth(proto.Clone(&m).(*fedv1.SecAggRequest), auth))
		p.mu.Lock()
		p.ticket, p.direct = terr, derr
		p.mu.Unlock()
	}
	return p.next.RoundTrip(r)
}

// TestFrontOneVectorPerClient: a client whose other masked vector a
// front-end has had pinned (ShardTicket) and who then sends one to the
// server itself, in a sharded round, is refused there (already exists):
// the server would otherwise publish pieces under the same message ids
// as the front-end, and the aggregators could hold pieces of one vector
// under the other's commit and wait out the round. The client is out of
// that round (it lied); the run goes on with every round released, no
// shard round aborted.
func TestFrontOneVectorPerClient(t *testing.T) {
	d, spl, params, _ := frontRun(t)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", params)
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 3 * time.Second, MinParticipants: 0.9,
		Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "onevec", Shards: 2}}}, "127.0.0.1:0")
	stop := runAggregators(t, nc, "onevec")
	_, u := startFront(t, h, nc.ConnectedUrl(), "onevec")
	pf := &pinFirst{server: h.url}
	runClients(t, dialURL(t, u, h.ca, 4, func(rt http.RoundTripper) http.RoundTripper {
		pf.next = rt
		return pf
	}), spl.Train, 4)
	if pf.ticket != nil {
		t.Fatalf("the other vector's ticket: %v", pf.ticket)
	}
	if connect.CodeOf(pf.direct) != connect.CodeAlreadyExists {
		t.Errorf("the client's vector sent to the server after another was pinned: %v, want already exists", pf.direct)
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	users := spl.Train.NumUsers()
	for _, e := range led {
		want := users
		if e.Round == 1 {
			want = users - 1
		}
		if e.Phase != "final" && (e.Skipped != "" || e.Uploads != want) {
			t.Errorf("round %d: %d masked vectors, skipped %q; want %d", e.Round, e.Uploads, e.Skipped, want)
		}
	}
	checkShardRounds(t, h.srv, stop, len(led))
}

// badEnrolments sends n Enroll calls with a wrong token to url through
// c, each with the headers header(k) and at most 10 s to end, and counts
// their error codes.
func badEnrolments(t *testing.T, c *http.Client, url string, n int, header func(k int) http.Header) map[string]int {
	t.Helper()
	bad, err := proto.Marshal(&fedv1.EnrollRequest{Token: "not-the-token", Secrets: []string{"a-stranger-secret-0001"}})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for k := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+federationv1connect.FederationServiceEnrollProcedure, bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/proto")
		req.Header.Set("Connect-Protocol-Version", "1")
		if header != nil {
			for name, v := range header(k) {
				req.Header[name] = v
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("call %d to %s: %v", k, url, err)
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("call %d to %s: the answer did not end: %v", k, url, err)
		}
		var e struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(raw, &e)
		codes[e.Code]++
	}
	return codes
}

// fromAddr returns a client of hc's TLS roots whose connections come
// from 127.0.0.ip.
func fromAddr(hc *http.Client, ip byte) *http.Client {
	c := &http.Client{Transport: hc.Transport.(*http.Transport).Clone()}
	c.Transport.(*http.Transport).DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).DialContext
	return c
}

// TestFrontRefusalEnds: a call the server refuses before reading its
// body, passed on by a front-end, ends at once. Go's HTTP/2 client stops
// sending a body once answered with a status above 299; the front-end's
// proxy then waited for the rest of that body, and the answer never
// ended until the client gave up (5 of 8 runs of 60 bad enrolments
// hung before the fix).
func TestFrontRefusalEnds(t *testing.T) {
	d, _ := testData(t, 20)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(), MinClients: 1000,
		Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "refusal", Shards: 2}}}, "127.0.0.1:0")
	_, u := startFront(t, h, nc.ConnectedUrl(), "refusal")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	codes := badEnrolments(t, hc, u, 3*failBurst, nil)
	if codes["unauthenticated"]+codes["resource_exhausted"] != 3*failBurst {
		t.Errorf("bad enrolments through a front-end: %v, want each refused", codes)
	}
}

// TestRedTeamFrontEnrolFlood: a stranger flooding Enroll with a wrong
// token through a front-end is limited by its own address, not the
// front-end's: a client with the token enrols through the same
// front-end, from another address, right after. A stranger calling the
// server directly with X-Forwarded-For headers of its choosing is still
// counted by its own address. Before the fix the server counted every
// call through a front-end as the front-end's, so the stranger's 20
// failures shut enrolment through it for everyone.
func TestRedTeamFrontEnrolFlood(t *testing.T) {
	d, _ := testData(t, 20)
	nc := startNATS(t)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(), MinClients: 1000,
		FrontToken: "front-secret", Sharded: &Sharded{Conn: nc, Config: shard.Config{Run: "flood", Shards: 2}}}, "127.0.0.1:0")
	_, u := startFrontToken(t, h, nc.ConnectedUrl(), "flood", "front-secret")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	through := badEnrolments(t, fromAddr(hc, 2), u, 3*failBurst, nil)
	t.Logf("the stranger through the front-end: %v", through)
	if through["resource_exhausted"] == 0 {
		t.Errorf("a stranger's %d failed enrolments through the front-end were never limited: %v", 3*failBurst, through)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := federationv1connect.NewFederationServiceClient(fromAddr(hc, 3), u)
	if _, err := api.Enroll(ctx, connect.NewRequest(&fedv1.EnrollRequest{Token: testToken, Secrets: []string{"the-valid-client-secret"}})); err != nil {
		t.Errorf("a client with the token, through the same front-end from another address, after the flood: %v", err)
	}
	// Directly at the server, forged forwarding headers change nothing.
	direct := badEnrolments(t, fromAddr(hc, 4), h.url, 3*failBurst, func(k int) http.Header {
		return http.Header{"X-Forwarded-For": {fmt.Sprintf("10.0.%d.%d", k/250, k%250)}, "X-Privrec-Front": {"a-guess"}}
	})
	t.Logf("the stranger at the server with forged X-Forwarded-For: %v", direct)
	if direct["resource_exhausted"] == 0 {
		t.Errorf("a stranger rotating X-Forwarded-For at the server was never limited: %v", direct)
	}
}
