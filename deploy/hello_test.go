package deploy

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/ratings"
)

// helloServer is a server over ml-latest-small's catalog (9,742 items
// with titles: the 151 KB plan a stranger's Hello gets).
func helloServer(tb testing.TB) *Server {
	tb.Helper()
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{Catalog: true})
	if err != nil {
		tb.Fatal(err)
	}
	_, cfg := configure(tb, "hdpmf", map[string]string{"epochs": "2"})
	s, err := NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: tb.TempDir(),
		Token: testToken, Logger: quietLog()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// hello calls Hello on h as a Connect client does (proto or JSON,
// gzip accepted) and returns the answer.
func hello(h http.Handler, json bool) *httptest.ResponseRecorder {
	ct, body := "application/proto", ""
	if json {
		ct, body = "application/json", "{}"
	}
	r := httptest.NewRequest(http.MethodPost, federationv1connect.FederationServiceHelloProcedure, strings.NewReader(body))
	r.Header.Set("Content-Type", ct)
	r.Header.Set("Connect-Protocol-Version", "1")
	r.Header.Set("Accept-Encoding", "gzip")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// BenchmarkHello is the server's cost of one stranger's Hello: issue 44
// measured 26 ms of CPU a call (the catalog marshalled and gzipped
// each time).
func BenchmarkHello(b *testing.B) {
	s := helloServer(b)
	_, h := s.Handler()
	b.ReportAllocs()
	for b.Loop() {
		if w := hello(h, false); w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// TestHelloCached: Hello's answer is the same bytes call after call,
// in both encodings, and follows the plan's public state (an enrolment
// changes the count it reports).
func TestHelloCached(t *testing.T) {
	s := helloServer(t)
	_, h := s.Handler()
	for _, json := range []bool{false, true} {
		a, b := hello(h, json), hello(h, json)
		if a.Code != http.StatusOK || !bytes.Equal(a.Body.Bytes(), b.Body.Bytes()) || a.Header().Get("Content-Encoding") != b.Header().Get("Content-Encoding") {
			t.Fatalf("json %v: two Hellos differ: %d %d bytes", json, a.Body.Len(), b.Body.Len())
		}
	}
	before := hello(h, true).Body.Bytes()
	s.mu.Lock()
	s.enrolled[7] = [32]byte{}
	s.mu.Unlock()
	if after := hello(h, true).Body.Bytes(); bytes.Equal(before, after) {
		t.Error("Hello answers the same after an enrolment")
	}
}
