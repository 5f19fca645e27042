// Package deploytest starts served runs for tests, as net/http/httptest
// starts HTTP servers: a deploy.Server listening on plain HTTP at
// 127.0.0.1, its run going in the background, simulated Go clients
// already enrolled and taking part, one one-time enrolment code left for
// the client under test (a browser, package webclient), every request
// the server receives recorded, and all of it stopped when the test ends.
// The run's rounds close at a deadline, so nothing waits for ever.
package deploytest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// token is the simulated clients' vendor token.
const token = "tok-0123456789abcdef"

// Request is one request the server received.
type Request struct {
	Path string // the URL path: /privrec.federation.v1.Federation/Upload, ...
	Auth string // the Authorization header
	Body []byte
}

// Config says what run NewServer starts; its zero value is a masked
// dp-als run (two bias rounds, 20 initial items) over ml-latest-small,
// with every user of it simulated, whose rounds close within a minute.
type Config struct {
	// Data is a dataset datasets.Open finds; "" is ml-latest-small.
	Data string
	// Method is the registered method to serve and Params its
	// configuration (method.Spec.Configure's parameters); "" is dp-als,
	// with nil Params masked, two bias rounds and 20 initial items.
	Method string
	Params map[string]string
	// Simulated is the number of simulated clients (the dataset's first
	// users); 0 or less simulates them all.
	Simulated int
	// Pages is the number of clients under test the run waits for, each
	// with its own enrolment code (Server.Codes); 0 means 1.
	Pages int
	// RoundTimeout closes a round at the latest; 0 is a minute.
	RoundTimeout time.Duration
	// Authority, when set, runs the masked rounds with secagg's active
	// protocol (deploy.ServerConfig.ActiveSecAgg): the simulated clients
	// pin this enrolment authority's public key and certify their own
	// identities with it, for run Run and a roster of every simulated
	// client and the client under test, which must get its certificate
	// from the same authority (a fake of it in tests: secagg.Certify).
	Authority ed25519.PrivateKey
	Run       string
}

// Server is a served run under way.
type Server struct {
	URL   string           // the server's base URL
	Code  string           // a one-time enrolment code for the client under test
	Codes []string         // one per client under test (Config.Pages); Code is Codes[0]
	Srv   *deploy.Server   // the server
	Train *ratings.Dataset // the simulated clients' ratings

	mu   sync.Mutex
	reqs []Request
	done chan error
}

// NewServer serves the run c describes until ctx ends or the test does:
// the simulated clients enrol and take part, and the server waits for
// Config.Pages more parties (one by default), the clients under test,
// which enrol with s.Codes (s.Code for the first).
func NewServer(ctx context.Context, t testing.TB, c Config) *Server {
	t.Helper()
	data, name, params, sim, roundTimeout := c.Data, c.Method, c.Params, c.Simulated, c.RoundTimeout
	if data == "" {
		data = "ml-latest-small"
	}
	if name == "" {
		name = "dp-als"
		if params == nil {
			params = map[string]string{"secagg": "masked", "bias-rounds": "2", "init-items": "20"}
		}
	}
	if roundTimeout <= 0 {
		roundTimeout = time.Minute
	}
	d, _, err := datasets.Open(data, ratings.LoadOptions{Catalog: true})
	if err != nil {
		t.Fatal(err)
	}
	if sim <= 0 || sim > d.NumUsers() {
		sim = d.NumUsers()
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
	dir := t.TempDir()
	pages := max(c.Pages, 1)
	codes, err := deploy.IssueCodes(dir, pages)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := deploy.NewServer(deploy.ServerConfig{Method: served(t, name), Config: cfg, StateDir: dir, Token: token,
		Catalog:    deploy.Catalog{ItemIDs: d.ItemIDs, Titles: d.ItemTitles, Scale: d.Scale},
		MinClients: sim + pages, EnrollQuiet: 300 * time.Millisecond, RoundTimeout: roundTimeout, Logger: quiet,
		ActiveSecAgg: c.Authority != nil})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Server{URL: "http://" + ln.Addr().String(), Code: codes[0], Codes: codes, Srv: srv, Train: train, done: make(chan error, 1)}
	hs := &http.Server{Handler: r.record(srv.Mux(nil))}
	go hs.Serve(ln)
	go func() { r.done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); hs.Close() })

	// The simulated clients enrol first (ids 0..sim-1), then wait for
	// the client under test.
	ccfg := deploy.ClientConfig{URL: r.URL, Methods: method.Protocol, Token: token, Retry: time.Minute, Logger: quiet}
	if c.Authority != nil {
		ccfg.Certifier, ccfg.Run, ccfg.Roster = c.Authority, c.Run, sim+pages
	} else {
		// Without an authority the run is the honest-but-curious
		// protocol, which clients take part in only when told to.
		ccfg.Insecure = true
	}
	sess, err := deploy.Dial(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	cls, err := spec.NewClients(cfg, train, 1)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if _, err := sess.Run(ctx, cls.List); err != nil && ctx.Err() == nil {
			t.Errorf("simulated clients: %v", err)
		}
	}()
	for deadline := time.Now().Add(time.Minute); srv.Parties() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the simulated clients did not enrol")
		}
	}
	return r
}

// record wraps h to keep every request it receives.
func (r *Server) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		body, _ := io.ReadAll(q.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, Request{q.URL.Path, q.Header.Get("Authorization"), body})
		r.mu.Unlock()
		q.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, q)
	})
}

// Requests returns the requests received so far, in order.
func (r *Server) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// Wait waits up to limit for the server's run to end, and fails the test
// if it does not or ends with an error.
func (r *Server) Wait(t testing.TB, limit time.Duration) {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(limit):
		t.Fatal("the server's run did not end")
	}
}

// served returns the method name as deploy serves it.
func served(t testing.TB, name string) protocol.Method {
	m, err := method.Protocol(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
