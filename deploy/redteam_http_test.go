package deploy

// Red-team tests of the server's door: strangers without a credential,
// idle and silent connections, one credential holding many long polls,
// and crowds enrolling. Each runs the attack against the real server over
// TLS on 127.0.0.1 and asserts that it fails. No test asserts on a
// deadline that load can miss: waits are bounded loops with generous
// limits, and timing figures are only logged.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
)

// gzipBomb returns a gzip stream of mib MiB of zeros: mib gzip members of
// 1 MiB each, about 1 KB apiece (Go's gzip reader reads the members as
// one stream).
func gzipBomb(t testing.TB, mib int) []byte {
	t.Helper()
	var one bytes.Buffer
	zw, err := gzip.NewWriterLevel(&one, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(one.Bytes(), mib)
}

// rawCall posts body to procedure proc as a Connect unary call (gzip when
// gz) and returns the HTTP status and the Connect error code of the
// answer ("" for none).
func rawCall(ctx context.Context, hc *http.Client, url, proc, cred string, body []byte, gz bool) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+proc, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Code, nil
}

// statusBytes returns a field of /proc/self/status in bytes (its kB
// figure).
func statusBytes(field string) (int64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	v, ok := statusField(raw, field)
	if !ok {
		return 0, errors.New("/proc/self/status has no " + field)
	}
	return v, nil
}

// procKB is statusBytes for the test's goroutine: it skips the test
// where /proc/self/status is not there.
func procKB(t testing.TB, field string) int64 {
	t.Helper()
	v, err := statusBytes(field)
	if err != nil {
		t.Skipf("resident set size: %v", err)
	}
	return v
}

// measureRSS starts measuring the process's peak resident set (this test
// binary is the server) and returns the function that stops it: the
// resident set before, the peak, and whether the peak is exact — VmHWM
// of /proc/self/status, reset first by writing 5 to
// /proc/self/clear_refs, the kernel's own high-water mark, which misses
// no short spike — or, where the reset is not allowed, VmRSS sampled
// every 2 ms.
func measureRSS(t testing.TB) func() (before, peak int64, exact bool) {
	t.Helper()
	debug.FreeOSMemory()
	exact := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	before := procKB(t, "VmRSS")
	var sampled atomic.Int64
	sampled.Store(before)
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v, err := statusBytes("VmRSS"); err == nil && v > sampled.Load() {
					sampled.Store(v)
				}
			}
		}
	})
	return func() (int64, int64, bool) {
		close(stop)
		sampler.Wait()
		peak := sampled.Load()
		if exact {
			peak = max(peak, procKB(t, "VmHWM"))
		}
		return before, peak, exact
	}
}

// enrolOne enrols one client with the token and a secret of its own
// (tag tells the secrets apart) and returns its credential and the ID
// the server assigned it.
func enrolOne(t testing.TB, api federationv1connect.FederationServiceClient, tag int) (string, uint32) {
	t.Helper()
	resp, err := api.Enroll(context.Background(), connect.NewRequest(&fedv1.EnrollRequest{Token: testToken,
		Secrets: []string{"secret-of-client-" + strconv.Itoa(tag)}}))
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Msg.GetCredentials()[0]
	return c.GetToken(), c.GetClientId()
}

// TestRedTeamGzipBombs: 20 concurrent gzip bodies of 256 MiB (about 260
// KB on the wire) to the calls that need a credential, sent without one
// over HTTP/2, and 10 more over HTTP/1.1 connections of their own, are
// all refused as unauthenticated before their bodies are read; 10 with a
// valid credential to Upload and 10 to Enroll are refused as too large
// after at most their cap is decompressed; and the process (this test
// binary is the server) stays under 300 MB of resident memory.
//
// The figure is the process's peak resident set, VmHWM of
// /proc/self/status, reset before the attack by writing 5 to
// /proc/self/clear_refs: the kernel's own high-water mark, which misses no
// short spike, and RSS, not the Go heap, is what the issue measured and
// what the kernel kills on. Where the reset is not allowed, the peak of
// VmRSS sampled every 2 ms stands in.
func TestRedTeamGzipBombs(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
		MinClients: 1000}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	api := federationv1connect.NewFederationServiceClient(hc, h.url)
	cred, _ := enrolOne(t, api, 1)
	h1 := &http.Client{Transport: hc.Transport.(*http.Transport).Clone()}
	h1.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	h1.Transport.(*http.Transport).TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	h1.Transport.(*http.Transport).DisableKeepAlives = true
	h1.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	bomb := gzipBomb(t, 256)
	t.Logf("bomb: %d bytes of gzip, %d MiB decompressed", len(bomb), 256)

	peakRSS := measureRSS(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type result struct {
		what, proc string
		status     int
		code       string
		err        error
	}
	results := make(chan result, 50)
	var wg sync.WaitGroup
	authed := []string{federationv1connect.FederationServiceGetRoundProcedure, federationv1connect.FederationServiceUploadProcedure,
		federationv1connect.FederationServiceSecAggProcedure, federationv1connect.FederationServiceGetModelProcedure}
	for k := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc := authed[k%len(authed)]
			status, code, err := rawCall(ctx, hc, h.url, proc, "", bomb, true)
			results <- result{"no credential", proc, status, code, err}
		}()
	}
	for k := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc := authed[k%len(authed)]
			status, code, err := rawCall(ctx, h1, h.url, proc, "", bomb, true)
			results <- result{"no credential, HTTP/1.1", proc, status, code, err}
		}()
	}
	for k := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc, c := federationv1connect.FederationServiceUploadProcedure, cred
			if k%2 == 1 {
				proc, c = federationv1connect.FederationServiceEnrollProcedure, ""
			}
			status, code, err := rawCall(ctx, hc, h.url, proc, c, bomb, true)
			results <- result{"too large", proc, status, code, err}
		}()
	}
	wg.Wait()
	before, peak, exact := peakRSS()
	close(results)
	for r := range results {
		switch {
		case r.err != nil && r.what == "no credential, HTTP/1.1" &&
			(strings.Contains(r.err.Error(), "broken pipe") || strings.Contains(r.err.Error(), "connection reset") ||
				strings.HasSuffix(r.err.Error(), ": EOF")):
			// The server answered and closed the connection before the
			// client had written its body: refused all the same.
			t.Logf("%s to %s: %v", r.what, r.proc, r.err)
		case r.err != nil:
			t.Errorf("%s to %s: %v", r.what, r.proc, r.err)
		case strings.HasPrefix(r.what, "no credential") && (r.status != http.StatusUnauthorized || r.code != "unauthenticated"):
			t.Errorf("%s to %s: HTTP %d %q, want 401 unauthenticated", r.what, r.proc, r.status, r.code)
		case r.what == "too large" && r.proc == federationv1connect.FederationServiceEnrollProcedure &&
			(r.code == "resource_exhausted" || r.code == "invalid_argument"):
			// Enroll reads its body as a stream (enrolgate.go): the
			// zeros are refused at the first byte, which is no field of
			// an EnrollRequest, before the cap.
		case r.what == "too large" && r.code != "resource_exhausted":
			t.Errorf("%s to %s: HTTP %d %q, want resource_exhausted", r.what, r.proc, r.status, r.code)
		}
	}
	const limit = 300 << 20
	t.Logf("resident set: %.1f MB before the attack, peak %.1f MB during it (%s)", float64(before)/1e6, float64(peak)/1e6,
		map[bool]string{true: "VmHWM after clear_refs", false: "VmRSS sampled every 2 ms"}[exact])
	if peak >= limit {
		t.Fatalf("peak resident set %.1f MB under 50 gzip bombs, want under %d MB", float64(peak)/1e6, limit>>20)
	}
	// The server still serves.
	if _, err := api.Hello(ctx, connect.NewRequest(&fedv1.HelloRequest{})); err != nil {
		t.Fatalf("hello after the attack: %v", err)
	}
}

// TestConnectReadMaxBytesIsDecompressed checks the library property the
// handlers' size classes rest on for gRPC's per-message compression:
// connect.WithReadMaxBytes bounds the decompressed message, not the
// compressed body. A 64 MiB gzip bomb of 64 KB is refused by a handler
// capped at 1 MiB, with connect's own message-size error.
func TestConnectReadMaxBytesIsDecompressed(t *testing.T) {
	_, h := federationv1connect.NewFederationServiceHandler(federationv1connect.UnimplementedFederationServiceHandler{},
		connect.WithReadMaxBytes(1<<20))
	ts := httptest.NewServer(h)
	defer ts.Close()
	bomb := gzipBomb(t, 64)
	status, code, err := rawCall(context.Background(), ts.Client(), ts.URL, federationv1connect.FederationServiceEnrollProcedure, "", bomb, true)
	if err != nil {
		t.Fatal(err)
	}
	if code != "resource_exhausted" {
		t.Fatalf("a %d-byte gzip body of 64 MiB: HTTP %d %q, want resource_exhausted", len(bomb), status, code)
	}
}

// TestRedTeamCompressedOverCap: a compressible message within the wire
// cap and beyond the decompressed cap is refused as too large, sent
// gzipped by a Connect client; from a gRPC client (per-message
// compression) Enroll is refused outright (it takes the Connect
// protocol's unary POST only, enrolgate.go); the same credential's small
// calls still pass.
func TestRedTeamCompressedOverCap(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
		MinClients: 1000}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", 8<<20) // 8 MiB: beyond Enroll's 1 MiB, a few KB gzipped
	for _, tc := range []struct {
		name string
		opts []connect.ClientOption
		want connect.Code
	}{
		{"connect", []connect.ClientOption{connect.WithSendGzip()}, connect.CodeResourceExhausted},
		{"grpc", []connect.ClientOption{connect.WithGRPC(), connect.WithSendGzip()}, connect.CodeUnimplemented},
	} {
		api := federationv1connect.NewFederationServiceClient(hc, h.url, tc.opts...)
		_, err := api.Enroll(context.Background(), connect.NewRequest(&fedv1.EnrollRequest{Token: testToken,
			Secrets: []string{big}}))
		if connect.CodeOf(err) != tc.want {
			t.Errorf("%s: an 8 MiB enrolment, gzipped: %v, want %v", tc.name, err, tc.want)
		}
		if _, err := api.Hello(context.Background(), connect.NewRequest(&fedv1.HelloRequest{})); err != nil {
			t.Errorf("%s: hello: %v", tc.name, err)
		}
	}
	// A Connect GET whose message in the URL is compressed is refused.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(make([]byte, 1<<20))
	_ = zw.Close()
	u := h.url + federationv1connect.FederationServiceHelloProcedure + "?connect=v1&encoding=proto&base64=1&compression=gzip&message=" +
		base64.RawURLEncoding.EncodeToString(z.Bytes())
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("a compressed GET message: %s", resp.Status)
	}
}

// TestRedTeamIdleConnections: connections that sit idle after a request
// (HTTP/1.1 and HTTP/2) or never send a byte are closed by the server
// after its idle and header timeouts; the HTTP/2 server announces its
// stream limit. Each wait is bounded at 60 s, far above the 300 ms
// timeouts, so load cannot fail it; the times are logged.
func TestRedTeamIdleConnections(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	const streams = 7
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
		MinClients: 1000, IdleTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 300 * time.Millisecond, MaxStreams: streams},
		"127.0.0.1:0")
	addr := strings.TrimPrefix(h.url, "https://")
	dial := func(proto string) *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// closed waits until the server closes c and returns how long it took.
	closed := func(c net.Conn, r io.Reader) time.Duration {
		t.Helper()
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(time.Minute))
		_, err := io.Copy(io.Discard, r)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after %v", time.Since(start))
		}
		return time.Since(start)
	}

	t.Run("http1-idle", func(t *testing.T) {
		c := dial("http/1.1")
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: privrec\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: %s", resp.Status)
		}
		t.Logf("closed %v after the answer", closed(c, br))
	})
	t.Run("silent", func(t *testing.T) {
		var wg sync.WaitGroup
		var slowest atomic.Int64
		for range 20 {
			c := dial("http/1.1")
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				d := closed(c, c)
				for v := slowest.Load(); int64(d) > v && !slowest.CompareAndSwap(v, int64(d)); v = slowest.Load() {
				}
			}()
		}
		wg.Wait()
		t.Logf("20 silent connections closed, the last after %v", time.Duration(slowest.Load()))
	})
	t.Run("http2-idle", func(t *testing.T) {
		c := dial("h2")
		defer c.Close()
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("negotiated %q, want h2", p)
		}
		// The client preface and an empty SETTINGS frame, then nothing.
		preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)
		if _, err := c.Write(preface); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(time.Minute))
		br := bufio.NewReader(c)
		maxStreams, goaway := -1, false
		for {
			var hdr [9]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the HTTP/2 connection was still open after %v", time.Since(start))
				}
				break
			}
			n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
			payload := make([]byte, n)
			if _, err := io.ReadFull(br, payload); err != nil {
				break
			}
			switch typ, flags := hdr[3], hdr[4]; {
			case typ == 4 && flags&1 == 0: // SETTINGS, not an ACK
				for k := 0; k+6 <= n; k += 6 {
					if binary.BigEndian.Uint16(payload[k:]) == 3 { // MAX_CONCURRENT_STREAMS
						maxStreams = int(binary.BigEndian.Uint32(payload[k+2:]))
					}
				}
				_, _ = c.Write([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0}) // ACK
			case typ == 7: // GOAWAY
				goaway = true
			}
		}
		t.Logf("closed after %v (GOAWAY %v)", time.Since(start), goaway)
		if maxStreams != streams {
			t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", maxStreams, streams)
		}
	})
}

// TestRedTeamLongPollCap: one credential holds at most MaxPolls GetRound
// calls waiting; the next is refused with ResourceExhausted at once, and
// the ones admitted go on and answer when the run starts.
func TestRedTeamLongPollCap(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	const polls = 2
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
		MinClients: 2, MaxPolls: polls, Poll: time.Minute}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	api := federationv1connect.NewFederationServiceClient(hc, h.url)
	cred, id := enrolOne(t, api, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errs := make(chan error, polls)
	got := make(chan *fedv1.GetRoundResponse, polls)
	for range polls {
		go func() {
			r, err := api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: -1}, cred))
			if err == nil {
				got <- r.Msg
			}
			errs <- err
		}()
	}
	for k := 0; h.srv.gate.waiting(id) < polls; k++ {
		if k == 3000 {
			t.Fatalf("%d of %d polls waiting after 30 s", h.srv.gate.waiting(id), polls)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		_, err := api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: -1}, cred))
		if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("poll %d of one credential: %v, want resource_exhausted", polls+1, err)
		}
	}
	// A second client starts the run: the waiting polls answer.
	enrolOne(t, api, 2)
	opened := 0
	for range polls {
		if err := <-errs; err != nil {
			t.Fatalf("an admitted poll: %v", err)
		}
	}
	for range polls {
		if (<-got).GetBroadcast() != nil {
			opened++
		}
	}
	t.Logf("%d of %d admitted polls answered with the first round's broadcast", opened, polls)
	// The gate releases a slot just after the answer is written.
	for k := 0; h.srv.gate.waiting(id) != 0; k++ {
		if k == 3000 {
			t.Fatalf("%d polls still counted 30 s after they answered", h.srv.gate.waiting(id))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: -1}, cred)); err != nil {
		t.Fatalf("a poll after the others answered: %v", err)
	}
}

// TestRedTeamEnrolmentFlood: one-time codes enrol one client each, once
// (a retry with the same secret excepted), unknown and spent codes are
// refused; the identity cap holds for codes and the vendor token alike;
// the vendor's clients count as one party; and a flood of Enroll calls
// is cut by the rate limit.
func TestRedTeamEnrolmentFlood(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	dir := t.TempDir()
	codes, err := IssueCodes(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: dir,
		MinClients: 1000, MaxClients: 4}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	api := federationv1connect.NewFederationServiceClient(hc, h.url)
	enrol := func(req *fedv1.EnrollRequest) (string, connect.Code) {
		resp, err := api.Enroll(context.Background(), connect.NewRequest(req))
		if err != nil {
			return "", connect.CodeOf(err)
		}
		return resp.Msg.GetCredentials()[0].GetToken(), 0
	}
	const s1, s2, s3, s4, s5 = "device-secret-0001", "device-secret-0002", "vendor-secret-0003", "vendor-secret-0004", "device-secret-0005"
	steps := []struct {
		name    string
		req     *fedv1.EnrollRequest
		want    connect.Code
		parties int
	}{
		{"unknown code", &fedv1.EnrollRequest{Code: CodePrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAA", Secrets: []string{s1}}, connect.CodeUnauthenticated, 0},
		{"code", &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{s1}}, 0, 1},
		{"code retry", &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{s1}}, 0, 1},
		{"code reused, other secret", &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{s2}}, connect.CodePermissionDenied, 1},
		{"code as token", &fedv1.EnrollRequest{Token: codes[1], Secrets: []string{s2}}, connect.CodeUnauthenticated, 1},
		{"code for two", &fedv1.EnrollRequest{Code: codes[1], Secrets: []string{s2, s3}}, connect.CodeInvalidArgument, 1},
		{"vendor, a device's secret", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{s1, s3}}, connect.CodeAlreadyExists, 1},
		{"vendor", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{s3, s4}}, 0, 2},
		{"second code", &fedv1.EnrollRequest{Code: codes[1], Secrets: []string{s2}}, 0, 3},
		{"code over the cap", &fedv1.EnrollRequest{Code: codes[2], Secrets: []string{s5}}, connect.CodeFailedPrecondition, 3},
		{"vendor over the cap", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{s5}}, connect.CodeFailedPrecondition, 3},
		{"vendor retry at the cap", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{s3, s4}}, 0, 3},
	}
	var first string
	for _, st := range steps {
		cred, code := enrol(st.req)
		if code != st.want {
			t.Errorf("%s: %v, want %v", st.name, code, st.want)
		}
		switch st.name {
		case "code":
			first = cred
		case "code retry":
			if cred != first {
				t.Errorf("code retry: credential %q, first %q", cred, first)
			}
		}
		if p := h.srv.Parties(); p != st.parties {
			t.Errorf("%s: %d parties, want %d", st.name, p, st.parties)
		}
	}
	// A code's credential works; the code refused at the cap is unspent.
	if _, err := api.GetModel(context.Background(), withCred(&fedv1.GetModelRequest{}, first)); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("a code's credential: %v, want unavailable (the run is not done)", err)
	}
	if issued, spent, err := h.srv.st.codeCounts(); err != nil || issued != 3 || spent != 2 {
		t.Errorf("codes issued %d, spent %d (%v); want 3, 2", issued, spent, err)
	}
	// A crowd with the token fills the cap and no more.
	var wg sync.WaitGroup
	var taken atomic.Int32
	for k := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, code := enrol(&fedv1.EnrollRequest{Token: testToken, Secrets: []string{"crowd-secret-" + strconv.Itoa(1000+k)}}); code == 0 {
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	h.srv.mu.Lock()
	n := len(h.srv.enrolled)
	h.srv.mu.Unlock()
	if taken.Load() != 0 || n != 4 {
		t.Errorf("%d of a crowd of 50 enrolled at the cap; %d clients, cap 4", taken.Load(), n)
	}

	t.Run("rate", func(t *testing.T) {
		// A limiter that refills once in 1,000 s: after the burst, every
		// call of the flood is refused, however slow the machine.
		h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
			MinClients: 1000, EnrollRate: 0.001, EnrollBurst: 5}, "127.0.0.1:0")
		hc, err := HTTPClient(h.ca)
		if err != nil {
			t.Fatal(err)
		}
		api := federationv1connect.NewFederationServiceClient(hc, h.url)
		codes := map[connect.Code]int{}
		for k := range 40 {
			_, err := api.Enroll(context.Background(), connect.NewRequest(&fedv1.EnrollRequest{Token: testToken,
				Secrets: []string{"flood-secret-" + strconv.Itoa(1000+k)}}))
			if err != nil {
				codes[connect.CodeOf(err)]++
			} else {
				codes[0]++
			}
		}
		if codes[connect.CodeResourceExhausted] < 34 || codes[connect.CodeUnknown] != 0 {
			t.Errorf("40 enrolments at a burst of 5: %v, want at least 34 resource_exhausted", codes)
		}
		t.Logf("40 enrolments at a burst of 5: %v", codes)
	})
}

// TestEnrolmentCodesSurviveRestart: a spent code stays spent, and the
// parties stay counted, across a restart of the server on its state.
func TestEnrolmentCodesSurviveRestart(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	dir := t.TempDir()
	codes, err := IssueCodes(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	open := func() *Server {
		s, err := NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: dir, Token: testToken,
			Seed: 1, TestMode: true, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	enrol := func(s *Server, req *fedv1.EnrollRequest) connect.Code {
		if _, err := s.Enroll(context.Background(), connect.NewRequest(req)); err != nil {
			return connect.CodeOf(err)
		}
		return 0
	}
	s := open()
	for _, req := range []*fedv1.EnrollRequest{
		{Code: codes[0], Secrets: []string{"device-secret-0005"}},
		{Token: testToken, Secrets: []string{"vendor-secret-001", "vendor-secret-002"}},
	} {
		if c := enrol(s, req); c != 0 {
			t.Fatalf("enrol %v: %v", req, c)
		}
	}
	s.Close()
	s = open()
	defer s.Close()
	if p := s.Parties(); p != 2 {
		t.Errorf("%d parties after the restart, want 2", p)
	}
	if c := enrol(s, &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{"device-secret-0005"}}); c != 0 {
		t.Errorf("a retry with the spent code after the restart: %v", c)
	}
	if c := enrol(s, &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{"device-secret-0006"}}); c != connect.CodePermissionDenied {
		t.Errorf("the spent code for another client after the restart: %v, want permission_denied", c)
	}
	if c := enrol(s, &fedv1.EnrollRequest{Code: codes[1], Secrets: []string{"device-secret-0007"}}); c != 0 {
		t.Errorf("the second code: %v", c)
	}
	if p := s.Parties(); p != 3 {
		t.Errorf("%d parties, want 3", p)
	}
}
