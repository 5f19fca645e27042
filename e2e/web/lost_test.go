package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/web"
	"github.com/privrec/privrec/webclient"
)

// fakeRun is a server that serves the page and a dp-als run that never
// starts (enrolling, 3 then 4 of 611 clients), and that can die: from
// then on every call to the federation service gets its connection
// closed, as when the server process has exited.
type fakeRun struct {
	hello []byte
	dead  atomic.Bool
}

func (f *fakeRun) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proc, ok := strings.CutPrefix(r.URL.Path, webclient.Service)
	if !ok {
		web.Handler().ServeHTTP(w, r)
		return
	}
	if f.dead.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		http.Error(w, "gone", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch proc {
	case "Hello":
		w.Write(f.hello)
	case "Enroll":
		var req struct{ Secrets []string }
		json.NewDecoder(r.Body).Decode(&req)
		if len(req.Secrets) != 1 {
			http.Error(w, `{"code":"invalid_argument"}`, http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"credentials": []any{map[string]any{"clientId": 3, "token": "3." + req.Secrets[0]}}})
	case "GetRound":
		time.Sleep(200 * time.Millisecond) // a short long poll
		w.Write([]byte(`{"state":"RUN_STATE_ENROLLING","boot":"b","enrolled":4,"minClients":611}`))
	default:
		http.Error(w, `{"code":"unimplemented"}`, http.StatusNotFound)
	}
}

// TestBrowserLosesServer: the page says where the run is and who takes
// part (3 of the 611 clients it waits for, then 4 once it joined), that
// the server does not answer within seconds of its exit, and that it
// lost the server after the client's bounded retries, with Join enabled
// again. Before, it showed "Waiting for the next round…" forever.
func TestBrowserLosesServer(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + ": install Debian's chromium and chromium-driver (.ci/run does) to run the browser test")
	}
	if testing.Short() {
		t.Skip("a browser that waits out the client's retries: skipped in -short")
	}
	spec, err := method.Lookup("dp-als")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := spec.Configure(map[string]string{"secagg": "masked"})
	if err != nil {
		t.Fatal(err)
	}
	hello, err := json.Marshal(map[string]any{"method": "dp-als", "config": spec.Text(cfg), "aggregation": "masked",
		"catalog": map[string]any{"itemIds": []string{"1", "2", "3"}, "titles": []string{"Heat (1995)", "Alien (1979)", "Fargo (1996)"}},
		"scale":   map[string]any{"min": 0.5, "max": 5, "step": 0.5}, "state": "RUN_STATE_ENROLLING", "enrolled": 3, "minClients": 611})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRun{hello: hello}
	srv := httptest.NewServer(f)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	br := newTab(ctx, t)
	bctx, waitFor := br.ctx, br.waitFor
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("`+id+`").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := chromedp.Run(bctx, chromedp.Navigate(srv.URL+"/?insecure=1&code=pr1-AAAABBBBCCCCDDDD")); err != nil {
		t.Fatal(err)
	}
	waitFor("the page is ready", "!!(window.privrecPage && window.privrecPage.ready)", time.Minute)
	if got, want := text("run-status"), "The run has not started: 3 of the 611 clients it waits for are enrolled."; !strings.HasPrefix(got, want) {
		t.Errorf("the page says %q, want %q", got, want)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => {
		const s = document.getElementById("search");
		s.value = "alien"; s.dispatchEvent(new Event("input"));
		const sel = document.querySelector("#results select");
		sel.value = "4"; sel.dispatchEvent(new Event("change"));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	waitFor("Join enabled", `!document.getElementById("join").disabled`, 30*time.Second)
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("join").click(), true`)); err != nil {
		t.Fatal(err)
	}
	waitFor("joined, the count from the server", `document.getElementById("run-status").textContent.includes("4 of the 611 clients") &&
		document.getElementById("code").value === "" && !location.search.includes("code")`, 30*time.Second)

	f.dead.Store(true)
	began := time.Now()
	waitFor("the page says the server does not answer", `/(does not answer|has not answered for)/.test(document.getElementById("run-status").textContent)`, 20*time.Second)
	t.Logf("%.1f s after the server died the page says %q", time.Since(began).Seconds(), text("run-status"))
	waitFor("the page says it lost the server", `document.getElementById("run-status").textContent.startsWith("Lost the server") &&
		document.getElementById("train-status").textContent.includes("has not answered for") &&
		!document.getElementById("join").disabled`, 2*time.Minute)
	t.Logf("%.1f s after the server died the page says %q", time.Since(began).Seconds(), text("train-status"))
}
