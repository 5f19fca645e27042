package authority

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newKey returns a fresh Ed25519 key pair.
func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// authorityUnderTest serves an authority of roster 8 with codes c0..c4
// and the ledger at ledger on 127.0.0.1 until closed.
func authorityUnderTest(t *testing.T, key ed25519.PrivateKey, ledger string, mod func(*Config)) (*httptest.Server, *Ledger) {
	t.Helper()
	l, err := OpenLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Key: key, Run: "run-1", Roster: 8, Ledger: l, AllowOrigin: "https://app.example"}
	for k := range 5 {
		cfg.Codes = append(cfg.Codes, HashCode(fmt.Sprintf("c%d", k)))
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(s)
	t.Cleanup(func() { ts.Close(); l.Close() })
	return ts, l
}

// post sends body to /v1/certify and returns the status and body.
func post(t *testing.T, ts *httptest.Server, ctype, body string) (int, string) {
	t.Helper()
	resp, err := ts.Client().Post(ts.URL+"/v1/certify", ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("refusal %d with Content-Type %q, want text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(b)
}

func req(code string, client int64, key ed25519.PublicKey) string {
	return fmt.Sprintf(`{"code":%q,"client":%d,"key":%q}`, code, client, base64.StdEncoding.EncodeToString(key))
}

// TestAuthorityService: the service certifies one identity per code and
// one key per client ID, with the fixed API's statuses — 403 for an
// unknown or used code, 409 for a second key of an ID, 400 for a
// malformed request (bad JSON, unknown field, bad key, ID outside the
// roster, another content type, a body over 4 KiB), 429 past the rate —
// and the refusals hold after a restart from the ledger. A retry of the
// same identity gets its certificate again.
func TestAuthorityService(t *testing.T) {
	authPub, authKey := newKey(t)
	ledger := filepath.Join(t.TempDir(), "certified.txt")
	ts, _ := authorityUnderTest(t, authKey, ledger, nil)

	info, pub, err := Fetch(context.Background(), ts.Client(), ts.URL)
	if err != nil || !pub.Equal(authPub) || info.Run != "run-1" || info.Roster != 8 {
		t.Fatalf("GET /v1/authority: %+v, %v", info, err)
	}
	k1, _ := newKey(t)
	k2, _ := newKey(t)
	c, err := Request(context.Background(), ts.Client(), ts.URL, "c0", 3, k1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(authPub); err != nil || c.Client != 3 || !c.Key.Equal(k1) || c.Run != "run-1" || c.Roster != 8 {
		t.Fatalf("certificate %+v, %v", c, err)
	}
	big := `{"code":"c1","client":1,"key":"` + strings.Repeat("A", MaxBody) + `"}`
	cases := []struct {
		name, ctype, body string
		want              int
	}{
		{"retry of the same identity", "application/json", req("c0", 3, k1), 200},
		{"unknown code", "application/json", req("nope", 4, k2), 403},
		{"reused code, another key", "application/json", req("c0", 3, k2), 403},
		{"reused code, another ID", "application/json", req("c0", 4, k1), 403},
		{"second key for an ID", "application/json", req("c1", 3, k2), 409},
		{"not JSON", "application/json", "code=c1", 400},
		{"unknown field", "application/json", `{"code":"c1","client":1,"key":"x","extra":1}`, 400},
		{"bad key", "application/json", `{"code":"c1","client":1,"key":"AAAA"}`, 400},
		{"negative ID", "application/json", `{"code":"c1","client":-1,"key":"` + base64.StdEncoding.EncodeToString(k2) + `"}`, 400},
		{"ID outside the roster", "application/json", req("c1", 8, k2), 400},
		{"no code", "application/json", req("", 1, k2), 400},
		{"text body", "text/plain", req("c1", 1, k2), 400},
		{"body over 4 KiB", "application/json", big, 400},
	}
	for _, tc := range cases {
		if got, body := post(t, ts, tc.ctype, tc.body); got != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, got, body, tc.want)
		}
	}
	// The malformed requests spent no code: c1 still certifies.
	if _, err := Request(context.Background(), ts.Client(), ts.URL, "c1", 1, k2); err != nil {
		t.Fatalf("c1 after malformed requests: %v", err)
	}
	var se *StatusError
	if _, err := Request(context.Background(), ts.Client(), ts.URL, "c2", 1, k1); !errors.As(err, &se) || se.Status != 409 {
		t.Fatalf("a second key for client 1: %v, want a 409", err)
	}

	// A restart from the ledger: the same refusals.
	ts.Close()
	ts2, _ := authorityUnderTest(t, authKey, ledger, nil)
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"reused code after restart", req("c0", 5, k2), 403},
		{"second key for an ID after restart", req("c3", 3, k2), 409},
		{"retry after restart", req("c1", 1, k2), 200},
		{"fresh code after restart", req("c4", 6, k1), 200},
	} {
		if got, body := post(t, ts2, "application/json", tc.body); got != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, got, body, tc.want)
		}
	}

	// A torn last line (a crash in an append, never answered) is cut.
	f, err := os.OpenFile(ledger, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("- 7 AAA")
	f.Close()
	l, err := OpenLedger(ledger)
	if err != nil {
		t.Fatalf("a torn last line: %v", err)
	}
	if l.Len() != 3 {
		t.Fatalf("%d clients in the ledger, want 3", l.Len())
	}
	l.Close()
	if err := os.WriteFile(ledger, []byte("- x AAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLedger(ledger); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Fatalf("a bad ledger line: %v, want an error naming line 1", err)
	}
}

// TestAuthorityRateAndCORS: past its rate the service answers 429; the
// one allowed page origin gets CORS headers and its preflight, another
// origin none.
func TestAuthorityRateAndCORS(t *testing.T) {
	_, authKey := newKey(t)
	ts, _ := authorityUnderTest(t, authKey, filepath.Join(t.TempDir(), "l.txt"), func(c *Config) { c.Rate, c.Burst = 0.01, 1 })
	k, _ := newKey(t)
	if got, _ := post(t, ts, "application/json", req("c0", 0, k)); got != 200 {
		t.Fatalf("first request: %d", got)
	}
	if got, _ := post(t, ts, "application/json", req("c1", 1, k)); got != 429 {
		t.Fatalf("second request at once: %d, want 429", got)
	}
	for _, tc := range []struct {
		origin, want string
	}{{"https://app.example", "https://app.example"}, {"https://evil.example", ""}} {
		r, _ := http.NewRequest(http.MethodOptions, ts.URL+"/v1/certify", nil)
		r.Header.Set("Origin", tc.origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := ts.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tc.want {
			t.Errorf("origin %s: Access-Control-Allow-Origin %q, want %q", tc.origin, got, tc.want)
		}
		if tc.want != "" && (resp.StatusCode != 204 || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Content-Type")) {
			t.Errorf("preflight: %d, headers %v", resp.StatusCode, resp.Header)
		}
	}
	resp, err := ts.Client().Get(ts.URL + "/v1/authority")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/authority: %v, %q", err, resp.Header.Get("Content-Type"))
	}
}

// TestLedgerShared: the service and a batch certification may hold one
// ledger at once (two handles, as two processes do): each sees what the
// other appended before it records (a second key for an ID is refused
// across them), and no record overwrites another. (Before, the second
// handle wrote at its own offset, over the first's records.)
func TestLedgerShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "certified.txt")
	a, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k1, _ := newKey(t)
	k2, _ := newKey(t)
	h := HashCode("c0")
	for id := range uint32(3) {
		if err := a.Record(nil, id, k1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Record(&h, 7, k2); err != nil {
		t.Fatal(err)
	}
	if err := b.Record(nil, 1, k2); !errors.Is(err, ErrClientHasKey) {
		t.Fatalf("a second key for client 1 through the other handle: %v", err)
	}
	if err := a.Record(&h, 8, k1); !errors.Is(err, ErrCodeUsed) {
		t.Fatalf("code c0 again through the first handle: %v", err)
	}
	c, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() != 4 {
		raw, _ := os.ReadFile(path)
		t.Fatalf("%d identities in the ledger, want 4:\n%s", c.Len(), raw)
	}
}

// TestAuthorityFloodFromOneSource: a stranger with no code floods the
// certify endpoint from one address; a device with a valid code, from
// another address, is still certified, and the stranger is limited.
// Before, one bucket over all callers took the stranger's calls, so the
// device got 429 (the flaw issue 44 found in Enroll).
func TestAuthorityFloodFromOneSource(t *testing.T) {
	_, authKey := newKey(t)
	l, err := OpenLedger(filepath.Join(t.TempDir(), "l.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := New(Config{Key: authKey, Run: "run-1", Roster: 8, Ledger: l, Codes: [][32]byte{HashCode("good")}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(from, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/v1/certify", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.RemoteAddr = from
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code
	}
	k, _ := newKey(t)
	limited := 0
	for i := range 200 {
		switch call("203.0.113.9:4000", req(fmt.Sprintf("guess-%d", i), 1, k)) {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusForbidden:
		default:
			t.Fatalf("a guessed code got another answer than 403 or 429")
		}
	}
	if got := call("198.51.100.7:5000", req("good", 0, k)); got != http.StatusOK {
		t.Fatalf("the device's valid code after the flood: %d, want 200", got)
	}
	if limited == 0 {
		t.Fatal("200 guessed codes from one address, none limited")
	}
	t.Logf("of 200 guessed codes from one address, %d limited; the device from another address certified", limited)
}
