package deploy

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/web"
)

// Mux returns the server's HTTP routes: the federation service, /healthz,
// /ledger, the person's page at / (package web) and, with a gatherer,
// Prometheus /metrics.
func (s *Server) Mux(g prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	path, h := s.Handler()
	mux.Handle(path, h)
	mux.Handle("/"+federationv1connect.FrontServiceName+"/", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		state, round := s.state, s.round
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "ok %s round %d\n", state, round)
	})
	mux.Handle("/", web.Handler())
	if g != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	// The ledger is public like /metrics: counts and ε per round, nothing
	// about any client. It is readable while the server holds the state.
	mux.HandleFunc("GET /ledger", func(w http.ResponseWriter, r *http.Request) {
		led, err := s.Ledger()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(led)
	})
	return mux
}

// The HTTP layer ahead of the Connect handlers (gate) refuses, before a
// request's body is read: a call that needs a credential (GetRound,
// Upload, SecAgg, GetModel, and FrontService's ShardTicket and
// Published) without a valid one; a GetRound beyond the
// credential's MaxPolls waiting at once; an Enroll beyond the rate
// limit; a compressed Connect GET; and a body larger than its call's
// cap. The caps bound the body on the wire (http.MaxBytesReader) and
// decompressed: the gate gunzips a Connect-protocol gzip body itself, up
// to the cap; gRPC's compressed messages are bounded by
// connect.WithReadMaxBytes (which applies to the decompressed message,
// TestConnectReadMaxBytesIsDecompressed) at the handler's size class,
// under 4 times the cap. The caps are:
//
//	Hello, GetRound, GetModel, FrontService   smallBytes
//	Enroll                                    enrolBytes
//	Upload                                    the open round's items × (4·dim + 20) + roundSlack
//	SecAgg                                    the open round's words × 4 + 512 × clients + roundSlack
//
// (Upload and SecAgg a third more in Connect's JSON encoding, whose bytes
// are base64)
//
// all at most ServerConfig.MaxUploadBytes. The handlers check the
// credential again.
const (
	smallBytes = 16 << 10
	enrolBytes = 1 << 20
	roundSlack = 64 << 10
)

// gate is the federation service's HTTP handler: the limits above, then
// the Connect handler of the call's size.
type gate struct {
	s     *Server
	ew    *connect.ErrorWriter
	path  string
	small http.Handler // Hello, GetRound, GetModel and unknown calls
	front http.Handler // the front-ends' FrontService
	enrol http.Handler
	sized []sizedHandler // Upload and SecAgg, by decompressed cap, increasing
	rate  *bucket        // Enroll calls whose credential holds
	fails *failBucket    // failed Enroll calls, by source address
	hello helloCache
	gz    *gzipCache // the answers' gzip, kept for large ones

	mu    sync.Mutex
	polls map[uint32]int // GetRound calls waiting, by client
}

type sizedHandler struct {
	max int64
	h   http.Handler
}

func newGate(s *Server) *gate {
	g := &gate{s: s, ew: connect.NewErrorWriter(), rate: newBucket(s.cfg.EnrollRate, s.cfg.EnrollBurst),
		fails: newFailBucket(failRate, failBurst), polls: map[uint32]int{}, gz: newGzipCache()}
	opts := func(max int) []connect.HandlerOption {
		// Compress only what gains from it: gzip's per-message setup cost
		// more than the small upload answers save (12% of a loaded
		// server's CPU in the profile).
		// Large answers (a round's broadcast, the model) are the same for
		// many clients: gzipped once (gzipcache.go).
		return []connect.HandlerOption{connect.WithCompressMinBytes(4 << 10), connect.WithReadMaxBytes(max), g.gz.compression()}
	}
	g.path, g.small = federationv1connect.NewFederationServiceHandler(s, opts(smallBytes)...)
	_, g.enrol = federationv1connect.NewFederationServiceHandler(s, opts(enrolBytes)...)
	_, g.front = federationv1connect.NewFrontServiceHandler(s, opts(smallBytes)...)
	// Connect's read cap is fixed per handler: one handler per size
	// class, a factor 4 apart, so a call is decompressed to at most 4
	// times its cap.
	top := s.cfg.MaxUploadBytes
	for c := 256 << 10; ; c *= 4 {
		c = min(c, top)
		_, h := federationv1connect.NewFederationServiceHandler(s, opts(c)...)
		g.sized = append(g.sized, sizedHandler{int64(c), h})
		if c == top {
			break
		}
	}
	return g
}

// Handler returns the HTTP handler of the federation service, with its
// limits (gate); it serves the front-ends' FrontService too (its
// procedures are under "/privrec.federation.v1.FrontService/").
func (s *Server) Handler() (string, http.Handler) { return s.gate.path, s.gate }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	h, limit := g.small, int64(smallBytes)
	switch p := r.URL.Path; p {
	case federationv1connect.FederationServiceEnrollProcedure:
		// The credential first (enrolgate.go), then the shared bucket:
		// strangers do not use the enrolments of callers with a token.
		src, now := source(r, s.cfg.FrontToken), time.Now()
		if !g.fails.allowed(src, now) {
			s.met.reject("enrol-rate")
			g.refuse(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New("too many failed enrolments from this address; retry later")))
			return
		}
		limit := int64(enrolBytes)
		if r.Header.Get("Content-Type") == "application/json" {
			limit = smallBytes // the browser's: a code and at most one secret
		}
		if g.tooLarge(w, r, limit) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if err := g.gateEnrol(r, limit); err != nil {
			if c := connect.CodeOf(err); c == connect.CodeUnauthenticated || c == connect.CodeInvalidArgument {
				g.fails.fail(src, now)
				s.met.reject("enrol-token")
			} else {
				s.met.reject("size")
			}
			g.refuse(w, r, err)
			return
		}
		if !g.rate.allow(now) {
			s.met.reject("enrol-rate")
			g.refuse(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New("too many enrolments at once; retry later")))
			return
		}
		g.enrol.ServeHTTP(w, r)
		return
	case federationv1connect.FederationServiceGetRoundProcedure, federationv1connect.FederationServiceGetModelProcedure,
		federationv1connect.FederationServiceUploadProcedure, federationv1connect.FederationServiceSecAggProcedure,
		federationv1connect.FrontServiceShardTicketProcedure, federationv1connect.FrontServicePublishedProcedure:
		id, err := s.authenticate(r.Header)
		if err != nil {
			s.met.reject("auth")
			g.refuse(w, r, err)
			return
		}
		switch p {
		case federationv1connect.FederationServiceGetRoundProcedure:
			if !g.poll(id) {
				s.met.reject("polls")
				g.refuse(w, r, connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("client %d already has %d calls to GetRound waiting", id, s.cfg.MaxPolls)))
				return
			}
			defer g.unpoll(id)
		case federationv1connect.FrontServiceShardTicketProcedure, federationv1connect.FrontServicePublishedProcedure:
			h = g.front
		case federationv1connect.FederationServiceUploadProcedure, federationv1connect.FederationServiceSecAggProcedure:
			limit = s.roundBytes(p == federationv1connect.FederationServiceSecAggProcedure, jsonCall(r))
			h = g.sized[len(g.sized)-1].h
			for _, c := range g.sized {
				if c.max >= limit {
					h = c.h
					break
				}
			}
		}
	}
	if c := r.URL.Query().Get("compression"); r.Method == http.MethodGet && c != "" && c != "identity" {
		// A Connect GET carries its message in the URL; privrec's clients
		// never compress it, and a compressed one would be inflated past
		// the cap to its end.
		s.met.reject("size")
		g.refuse(w, r, connect.NewError(connect.CodeUnimplemented, errors.New("compressed GET messages are not accepted; use POST")))
		return
	}
	if r.URL.Path == federationv1connect.FederationServiceHelloProcedure && connectUnary(r) &&
		r.Header.Get("Content-Encoding") == "" && r.ContentLength <= 2 {
		g.hello.serve(s, h, w, r)
		return
	}
	if g.tooLarge(w, r, limit) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if connectUnary(r) {
		if err := inflate(r, limit); err != nil {
			s.met.reject("size")
			g.refuse(w, r, err)
			return
		}
	}
	h.ServeHTTP(w, r)
}

// tooLarge refuses r, and says so, when it announces a body of more than
// limit bytes.
func (g *gate) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) bool {
	if r.ContentLength <= limit {
		return false
	}
	g.s.met.reject("size")
	g.refuse(w, r, connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("a request of %d bytes; this call takes at most %d", r.ContentLength, limit)))
	return true
}

// inflate replaces a gzip body of r by its content, read up to limit
// bytes: connect would decompress a larger body to its end only to
// report its size.
func inflate(r *http.Request, limit int64) error {
	if r.Header.Get("Content-Encoding") != "gzip" {
		return nil
	}
	body, err := gunzip(r.Body, limit)
	if err != nil {
		return err
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.Header.Del("Content-Encoding")
	r.Header.Del("Content-Length")
	return nil
}

// connectUnary reports whether r is a unary call of the Connect protocol,
// whose Content-Encoding compresses the whole body (gRPC and gRPC-Web
// compress each message; connect caps those at the handler's read cap).
func connectUnary(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return r.Method == http.MethodPost && !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect+")
}

// gunzip returns the decompressed body, refusing one of more than max
// bytes (or more than max bytes on the wire) after reading max+1.
func gunzip(body io.Reader, max int64) ([]byte, error) {
	zr, err := gzip.NewReader(body)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("gzip body: %w", err))
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(zr, max+1))
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb) || n > max:
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("a request of more than %d bytes (decompressed); this call takes at most %d", max, max))
	case err != nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("gzip body: %w", err))
	}
	return buf.Bytes(), nil
}

// refuse answers r with err, in r's protocol, without reading its body:
// on HTTP/1 it closes the connection after the answer.
func (g *gate) refuse(w http.ResponseWriter, r *http.Request, err error) {
	refuseCall(g.ew, w, r, err)
}

// refuseCall answers r with err through ew in r's protocol (Connect,
// gRPC, gRPC-Web), else as plain HTTP, without reading its body: on
// HTTP/1 it closes the connection after the answer.
func refuseCall(ew *connect.ErrorWriter, w http.ResponseWriter, r *http.Request, err error) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	if ew.IsSupported(r) {
		_ = ew.Write(w, r, err)
		return
	}
	status := http.StatusBadRequest
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case connect.CodeResourceExhausted:
		status = http.StatusTooManyRequests
	}
	http.Error(w, err.Error(), status)
}

// poll takes one of client id's GetRound slots, false when none is free.
func (g *gate) poll(id uint32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.polls[id] >= g.s.cfg.MaxPolls {
		return false
	}
	g.polls[id]++
	return true
}

func (g *gate) unpoll(id uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.polls[id]--; g.polls[id] <= 0 {
		delete(g.polls, id)
	}
}

// waiting returns the GetRound calls of client id in progress.
func (g *gate) waiting(id uint32) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.polls[id]
}

// roundBytes returns the cap of an Upload (or, with secagg, a SecAgg)
// body in the latest round: its largest valid message (its rows, and the
// scalars the round announces, protocol.ParamScalars) plus slack.
func (s *Server) roundBytes(secagg, json bool) int64 {
	s.mu.Lock()
	b, n := s.bc, len(s.order)
	s.mu.Unlock()
	limit := int64(roundSlack)
	switch {
	case b == nil: // no round yet: the call is refused as early anyway
	case secagg:
		limit += 4*int64(b.Words) + 512*int64(n)
	default:
		// Items and counts are varints of at most 10 bytes, values
		// floats; scalars (as many as the round announces) are doubles.
		limit += int64(b.NumItems)*(4*int64(max(b.Dim, 1))+20) + 8*int64(b.Scalars())
	}
	if json && b != nil {
		// Connect's JSON encoding (the browser's client) carries a
		// masked vector's bytes in base64: 4 characters for 3 bytes.
		limit += limit/3 + 4
	}
	return min(limit, int64(s.cfg.MaxUploadBytes))
}

// jsonCall reports whether r is a Connect unary call in the JSON
// encoding.
func jsonCall(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
}

// bucket is a token bucket: rate calls a second, bursts of burst.
type bucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
}

func newBucket(rate float64, burst int) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// peek returns the tokens at now, taking none.
func (b *bucket) peek(now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		return b.tokens
	}
	return min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
}

// allow takes a token at now, false when there is none.
func (b *bucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Serve serves the run on ln over TLS (tc) and runs its rounds. It
// returns nil once the run is done and linger has passed (clients fetch
// the final model meanwhile; linger <= 0 serves until ctx ends), and
// ctx's error when ctx ends first: the open round is abandoned, in-flight
// calls get up to five seconds, and a restart on the same state resumes.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tc *tls.Config, g prometheus.Gatherer, linger time.Duration) error {
	c := &s.cfg
	hs := &http.Server{Handler: s.Mux(g), TLSConfig: tc, ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout,
		MaxHeaderBytes: 64 << 10, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: c.MaxStreams}}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			_ = hs.Close() // calls still running after the grace period
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	select {
	case err := <-serveErr:
		s.log.Error("http server stopped", "err", err)
		return err
	case err := <-runErr:
		if err != nil {
			shutdown()
			return err
		}
	}
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	} else {
		<-ctx.Done()
	}
	shutdown()
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
