package web_test

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/privrec/privrec/deploy/deploytest"
	"github.com/privrec/privrec/secagg"
)

// authority serves the enrolment authority's API (package authority's,
// faked with secagg.Certify) over TLS on 127.0.0.1, allowing any origin
// (CORS), as the page reaches it from the aggregator's origin.
func authority(t *testing.T, key ed25519.PrivateKey, run string, roster int) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/authority", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"key": base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)), "run": run, "roster": roster})
	})
	mux.HandleFunc("POST /v1/certify", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Code   string `json:"code"`
			Client uint32 `json:"client"`
			Key    string `json:"key"`
		}
		pub, err := []byte(nil), json.NewDecoder(r.Body).Decode(&req)
		if err == nil {
			pub, err = base64.StdEncoding.DecodeString(req.Key)
		}
		if err != nil || len(pub) != ed25519.PublicKeySize || req.Code == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		cert := secagg.Certify(key, run, req.Client, uint32(roster), pub)
		json.NewEncoder(w).Encode(map[string]string{"certificate": base64.StdEncoding.EncodeToString(cert.Marshal())})
	})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBrowserActiveProtocol: opened from the authority's link (code,
// authority URL and pinned key in the address), the page in headless
// Chromium draws its identity key, has it certified by the authority
// (a cross-origin fetch), keeps key, certificate and pinned authority in
// IndexedDB, and answers every masked round of a served dp-ease run with
// secagg's active protocol alongside 8 simulated clients certified by
// the same authority. Before, the page refused every active plan.
func TestBrowserActiveProtocol(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + ": install Debian's chromium and chromium-driver (.ci/run does) to run the browser test")
	}
	if testing.Short() {
		t.Skip("a browser and a served run: skipped in -short")
	}
	const sim, run = 8, "e2e-active"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, key, _ := ed25519.GenerateKey(crand.Reader)
	auth := authority(t, key, run, sim+1)
	srv := deploytest.NewServer(ctx, t, deploytest.Config{Method: "dp-ease", Params: map[string]string{"secagg": "masked", "top-items": "60"},
		Simulated: sim, Authority: key, Run: run})

	// The authority's certificate is self-signed: this test's browser
	// accepts it (a deployment's authority has a real one).
	br := newTab(ctx, t, chromedp.Flag("ignore-certificate-errors", true))
	pin := base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	addr := srv.URL + "/?code=" + url.QueryEscape(srv.Code) + "&authority=" + url.QueryEscape(auth.URL) + "&authority-key=" + url.QueryEscape(pin)
	if _, err := chromedp.Run(br.ctx, chromedp.Navigate(addr)); err != nil {
		t.Fatal(err)
	}
	br.waitFor("the page is ready", "!!(window.privrecPage && window.privrecPage.ready)", time.Minute)
	br.eval(`(() => { const ids = window.privrecPage.plan.catalog.itemIds;
		[3, 40, 77, 120, 300].forEach((j, k) => window.privrecPage.ratings.set(ids[j], 1 + k)); renderMine(); return true; })()`, nil)
	br.eval(`document.getElementById("join").click()`, nil)
	br.waitFor("the run ends in the browser", "window.privrecPage.trained === true", 3*time.Minute)
	srv.Wait(t, time.Minute)

	var evs []struct {
		Round   int
		Masked  bool
		Clients int
		Err     string
	}
	var text string
	br.eval(`JSON.stringify(window.privrecPage.events)`, &text)
	if err := json.Unmarshal([]byte(text), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Errorf("%d rounds answered, want dp-ease's 3: %s", len(evs), text)
	}
	for _, e := range evs {
		if !e.Masked || e.Clients != sim+1 || e.Err != "" {
			t.Errorf("round %d: masked %v with %d clients, error %q", e.Round, e.Masked, e.Clients, e.Err)
		}
	}
	// The identity kept: credential, key, certificate, pinned authority.
	var ident struct {
		Cred      string
		Key, Cert string
		Authority struct{ AuthorityURL, AuthorityKey string } `json:"authority"`
		Code      string
	}
	br.eval(`kvGet("identity").then((v) => JSON.stringify(v))`, &text)
	if err := json.Unmarshal([]byte(text), &ident); err != nil {
		t.Fatal(err)
	}
	if ident.Cred == "" || ident.Key == "" || ident.Cert == "" || ident.Code != "" || ident.Authority.AuthorityKey != pin || ident.Authority.AuthorityURL != auth.URL {
		t.Errorf("the identity kept: %s", text)
	}
	cb, _ := base64.StdEncoding.DecodeString(ident.Cert)
	cert, err := secagg.ParseCertificate(cb)
	if err != nil || cert.Verify(key.Public().(ed25519.PublicKey)) != nil || cert.Run != run {
		t.Errorf("the certificate kept: %v", err)
	}
	// The active protocol's steps left the browser.
	steps := map[string]int{}
	for _, q := range srv.Requests() {
		if !strings.HasSuffix(q.Path, "/SecAgg") || q.Auth != "Bearer "+ident.Cred {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(q.Body, &m); err != nil {
			t.Fatal(err)
		}
		for s := range m {
			steps[s]++
		}
	}
	if steps["commit"] != 3 || steps["consistency"] != 3 || steps["masked"] != 3 {
		t.Errorf("SecAgg steps the browser sent: %v; want a commitment, a masked vector and a consistency signature in each of 3 rounds", steps)
	}
}

// TestBrowserOneTab: two tabs of the page in one browser share its
// IndexedDB, so each would keep its own copy of the memory of the rounds
// answered and the last to save would win. One tab takes part at a
// time (the Web Locks API): while the first waits for the run to start,
// the second's Join is refused and says why. Before, both took part.
func TestBrowserOneTab(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + ": install Debian's chromium and chromium-driver (.ci/run does) to run the browser test")
	}
	if testing.Short() {
		t.Skip("a browser and a served run: skipped in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Two clients under test: the run waits for a second page that never
	// comes, so the first tab keeps taking part (waiting) throughout.
	srv := deploytest.NewServer(ctx, t, deploytest.Config{Method: "dp-ease", Params: map[string]string{"secagg": "masked", "top-items": "60"},
		Simulated: 4, Pages: 2})
	a := newTab(ctx, t)
	ready := "!!(window.privrecPage && window.privrecPage.ready)"
	rate := `(() => { const ids = window.privrecPage.plan.catalog.itemIds;
		[3, 40, 77].forEach((j) => window.privrecPage.ratings.set(ids[j], 4)); renderMine(); return true; })()`
	if _, err := chromedp.Run(a.ctx, chromedp.Navigate(srv.URL+"/?insecure=1&code="+url.QueryEscape(srv.Codes[0]))); err != nil {
		t.Fatal(err)
	}
	a.waitFor("the first tab is ready", ready, time.Minute)
	a.eval(rate, nil)
	// A second tab of the same browser (same profile, same origin).
	bctx, bcancel := chromedp.NewContext(a.ctx)
	defer bcancel()
	b := &tab{t: t, ctx: bctx}
	if _, err := chromedp.Run(b.ctx, chromedp.Navigate(srv.URL+"/?insecure=1&code="+url.QueryEscape(srv.Codes[1]))); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the second tab is ready", ready, time.Minute)
	b.eval(rate, nil)
	a.eval(`document.getElementById("join").click()`, nil)
	a.waitFor("the first tab enrolled and waits for the run", `window.privrecPage.identity !== null && /not started/.test(document.getElementById("run-status").textContent)`, time.Minute)
	b.eval(`document.getElementById("join").click()`, nil)
	b.waitFor("the second tab is refused", `/another tab/.test(document.getElementById("train-status").textContent)`, 30*time.Second)
	var enrolled bool
	b.eval(`window.privrecPage.identity !== null`, &enrolled)
	if enrolled {
		t.Error("the second tab enrolled while the first took part")
	}
}
