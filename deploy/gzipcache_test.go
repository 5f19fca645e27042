package deploy

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/protobuf/proto"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
)

// openRound opens round 1 of s with a broadcast of an items × (dim+1)
// table (ML-1M's dp-als: 3,706 × 11, 163 KB) and enrols clients 1 to
// n, whose credentials it returns.
func openRound(s *Server, items, dim, n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, items*(dim+1))
	for k := range v {
		v[k] = float32(r.NormFloat64() * 0.1)
	}
	creds := make([]string, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range creds {
		secret := fmt.Sprintf("client-secret-%04d", k)
		s.enrolled[uint32(k+1)] = hashToken(secret)
		creds[k] = fmt.Sprintf("%d.%s", k+1, secret)
	}
	s.round, s.open = 1, true
	s.wire = &fedv1.Broadcast{Round: 1, Phase: "train", Dim: int32(dim), NumItems: int32(items), V: v}
	s.notify()
	return creds
}

// getRound calls GetRound on h as client cred does (proto, gzip
// accepted) and returns the answer.
func getRound(tb testing.TB, h http.Handler, cred string) *httptest.ResponseRecorder {
	tb.Helper()
	body, err := proto.Marshal(&fedv1.GetRoundRequest{After: 0})
	if err != nil {
		tb.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, federationv1connect.FederationServiceGetRoundProcedure, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/proto")
	r.Header.Set("Connect-Protocol-Version", "1")
	r.Header.Set("Accept-Encoding", "gzip")
	r.Header.Set("Authorization", "Bearer "+cred)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// decodeRound gunzips and decodes a GetRound answer.
func decodeRound(tb testing.TB, w *httptest.ResponseRecorder) *fedv1.GetRoundResponse {
	tb.Helper()
	if w.Code != http.StatusOK || w.Header().Get("Content-Encoding") != "gzip" {
		tb.Fatalf("GetRound: status %d, encoding %q: %s", w.Code, w.Header().Get("Content-Encoding"), w.Body.String())
	}
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	var resp fedv1.GetRoundResponse
	if err := proto.Unmarshal(raw, &resp); err != nil {
		tb.Fatal(err)
	}
	return &resp
}

// TestGzipCachedAnswers: the clients of a round get the same gzipped
// bytes, compressed once, which decode to the round's broadcast; a new
// broadcast is answered with its own bytes, never a kept answer of
// another; and a small answer is compressed as before.
func TestGzipCachedAnswers(t *testing.T) {
	s := helloServer(t)
	_, h := s.Handler()
	creds := openRound(s, 3706, 10, 3, 1)
	first := getRound(t, h, creds[0])
	for _, cred := range creds[1:] {
		if w := getRound(t, h, cred); !bytes.Equal(w.Body.Bytes(), first.Body.Bytes()) {
			t.Errorf("client %s got %d bytes, the first client %d: want the same gzip", cred[:2], w.Body.Len(), first.Body.Len())
		}
	}
	got := decodeRound(t, first)
	if !proto.Equal(got.GetBroadcast(), s.wire) {
		t.Fatal("the answer's broadcast differs from the round's")
	}
	if n := len(s.gate.gz.entries); n != 1 {
		t.Errorf("%d answers kept after one round's answers, want 1", n)
	}
	creds = openRound(s, 3706, 10, 3, 2) // a new table
	if got := decodeRound(t, getRound(t, h, creds[0])); !proto.Equal(got.GetBroadcast(), s.wire) {
		t.Fatal("after a new broadcast, the answer is not the new one")
	}
	creds = openRound(s, 400, 10, 1, 3) // 18 KB: compressed each time
	before := len(s.gate.gz.entries)
	if got := decodeRound(t, getRound(t, h, creds[0])); !proto.Equal(got.GetBroadcast(), s.wire) || len(s.gate.gz.entries) != before {
		t.Errorf("a small answer: broadcast equal %v, answers kept %d → %d", proto.Equal(got.GetBroadcast(), s.wire), before, len(s.gate.gz.entries))
	}
}

// TestGzipCacheBound: the cache keeps at most max compressed bytes,
// dropping the oldest answers first, and an answer dropped is
// compressed again, equal.
func TestGzipCacheBound(t *testing.T) {
	c := newGzipCache()
	c.max = 200 << 10
	r := rand.New(rand.NewPCG(1, 2))
	srcs := make([][]byte, 8)
	outs := make([][]byte, len(srcs))
	for k := range srcs {
		srcs[k] = make([]byte, 64<<10) // incompressible: about 64 KB of gzip each
		for i := range srcs[k] {
			srcs[k][i] = byte(r.Uint32())
		}
		out, err := c.gzip(srcs[k])
		if err != nil {
			t.Fatal(err)
		}
		outs[k] = out
		if c.bytes > c.max || len(c.entries) != len(c.order) {
			t.Fatalf("after %d answers: %d bytes kept (bound %d), %d entries, %d in order", k+1, c.bytes, c.max, len(c.entries), len(c.order))
		}
	}
	if _, ok := c.entries[sha256Of(srcs[0])]; ok {
		t.Error("the oldest answer is still kept")
	}
	if _, ok := c.entries[sha256Of(srcs[len(srcs)-1])]; !ok {
		t.Error("the newest answer is not kept")
	}
	again, err := c.gzip(srcs[0])
	if err != nil || !bytes.Equal(again, outs[0]) {
		t.Errorf("the oldest answer compressed again differs (%v)", err)
	}
}

// BenchmarkGetRoundBroadcast is the server's cost of one client's
// GetRound answer carrying ML-1M's dp-als table (3,706 × 11 words), its
// gzip kept for every client (cached) or made for each (each).
func BenchmarkGetRoundBroadcast(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(map[bool]string{false: "cached", true: "each"}[off], func(b *testing.B) {
			s := helloServer(b)
			_, h := s.Handler()
			s.gate.gz.off = off
			creds := openRound(s, 3706, 10, 64, 1)
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if w := getRound(b, h, creds[k%len(creds)]); w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
				k++
			}
		})
	}
}

func sha256Of(b []byte) [32]byte { return sha256.Sum256(b) }
