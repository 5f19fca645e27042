package deploy

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Traffic counts the bytes a simulating client process exchanges with the
// server, by client: each request is the client's whose credential
// (Authorization: Bearer ID.secret) it carries, else the session's own
// (hello, enrolment). Counted are the HTTP bodies as they cross the
// transport (compressed when the server compresses) and the header
// fields, before HTTP/2's header compression and TLS; Wire counts, on
// the connections themselves, everything that crossed them, TLS and
// framing included. Made by CountTraffic; safe for concurrent use.
type Traffic struct {
	mu       sync.Mutex
	byClient map[uint32]*[2]int64 // sent, received
	session  [2]int64
	wire     [2]atomic.Int64
}

// CountTraffic returns hc with its transport wrapped so that every
// request's bytes are counted by client, and the Traffic that counts
// them. An *http.Transport's connections are counted too (Wire).
func CountTraffic(hc *http.Client) (*http.Client, *Traffic) {
	t := &Traffic{byClient: map[uint32]*[2]int64{}}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if tr, ok := base.(*http.Transport); ok {
		tr = tr.Clone()
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countedConn{Conn: c, t: t}, nil
		}
		base = tr
	}
	out := *hc
	out.Transport = &countingTransport{base: base, t: t}
	return &out, t
}

// countedConn counts a connection's bytes into Traffic.wire.
type countedConn struct {
	net.Conn
	t *Traffic
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.wire[1].Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.t.wire[0].Add(int64(n))
	return n, err
}

// countingTransport counts each request's bytes by the client of its
// credential.
type countingTransport struct {
	base http.RoundTripper
	t    *Traffic
}

// headerBytes is the size of h's fields as name: value lines.
func headerBytes(h http.Header) int64 {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return int64(n)
}

// clientOf returns the client ID of req's credential.
func clientOf(req *http.Request) (uint32, bool) {
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, false
	}
	id, _, ok := strings.Cut(tok, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(id, 10, 32)
	return uint32(n), err == nil
}

// counter returns where a request of client id (ok: it has one) counts.
func (t *Traffic) counter(id uint32, ok bool) *[2]int64 {
	if !ok {
		return &t.session
	}
	c := t.byClient[id]
	if c == nil {
		c = new([2]int64)
		t.byClient[id] = c
	}
	return c
}

func (t *Traffic) add(id uint32, ok bool, dir int, n int64) {
	t.mu.Lock()
	t.counter(id, ok)[dir] += n
	t.mu.Unlock()
}

func (ct *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id, ok := clientOf(req)
	ct.t.add(id, ok, 0, headerBytes(req.Header)+int64(len(req.Method)+len(req.URL.RequestURI())))
	if req.Body != nil && req.Body != http.NoBody {
		r := req.Clone(req.Context())
		r.Body = &countedBody{ReadCloser: req.Body, add: func(n int64) { ct.t.add(id, ok, 0, n) }}
		req = r
	}
	resp, err := ct.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ct.t.add(id, ok, 1, headerBytes(resp.Header)+headerBytes(resp.Trailer))
	if resp.Body != nil {
		resp.Body = &countedBody{ReadCloser: resp.Body, add: func(n int64) { ct.t.add(id, ok, 1, n) }}
	}
	return resp, nil
}

// countedBody counts the bytes read through it.
type countedBody struct {
	io.ReadCloser
	add func(int64)
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.add(int64(n))
	}
	return n, err
}

// TrafficSummary is what a Traffic counted: the clients that exchanged
// anything, their bytes sent and received (mean, median, 99th
// percentile, most), the session's own and the connections' totals.
type TrafficSummary struct {
	Clients                       int
	SentMean, SentMedian, SentP99 float64
	SentMax                       int64
	RecvMean, RecvMedian, RecvP99 float64
	RecvMax                       int64
	SessionSent, SessionRecv      int64
	ClientsSent, ClientsRecv      int64
	WireSent, WireRecv            int64
}

// Summary summarises the counts so far. The lead client, which polls
// the server for the session, is among the clients: its count holds the
// polls (Max shows it).
func (t *Traffic) Summary() TrafficSummary {
	t.mu.Lock()
	var sent, recv []int64
	s := TrafficSummary{SessionSent: t.session[0], SessionRecv: t.session[1]}
	for _, c := range t.byClient {
		sent, recv = append(sent, c[0]), append(recv, c[1])
		s.ClientsSent += c[0]
		s.ClientsRecv += c[1]
	}
	t.mu.Unlock()
	s.WireSent, s.WireRecv = t.wire[0].Load(), t.wire[1].Load()
	s.Clients = len(sent)
	if s.Clients == 0 {
		return s
	}
	slices.Sort(sent)
	slices.Sort(recv)
	q := func(xs []int64, f float64) float64 { return float64(xs[min(len(xs)-1, int(f*float64(len(xs))))]) }
	s.SentMean, s.RecvMean = float64(s.ClientsSent)/float64(s.Clients), float64(s.ClientsRecv)/float64(s.Clients)
	s.SentMedian, s.RecvMedian = q(sent, 0.5), q(recv, 0.5)
	s.SentP99, s.RecvP99 = q(sent, 0.99), q(recv, 0.99)
	s.SentMax, s.RecvMax = sent[len(sent)-1], recv[len(recv)-1]
	return s
}
