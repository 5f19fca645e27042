package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/privrec/privrec/web/internal/srchash"
)

// TestArtifactNotStale: the committed wasm was built from the sources
// as they are (go generate ./web rebuilds it).
func TestArtifactNotStale(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the sources")
	}
	got, err := srchash.Of("..")
	if err != nil {
		t.Fatal(err)
	}
	rec, _, _ := strings.Cut(Source(), "\n")
	if rec != got {
		t.Fatalf("static/client.wasm.gz was built from sources %s; they are now %s: run go generate ./web and commit it", rec, got)
	}
}

// pageBudget is the page's download budget (gzipped bytes before it is
// ready), and catalogAllowance what it leaves for the run's catalog
// (the Hello answer: ml-latest-small's 9,742 titles take about 140 KB
// gzipped). TestBrowserEndToEnd (e2e/web) measures the whole download
// in a browser; this test checks the part this package serves.
const (
	pageBudget       = 2_000_000
	catalogAllowance = 150_000
)

// TestWasmBudget: the wasm client and the page's other assets, gzipped
// as served, fit the page's budget with room for the catalog.
func TestWasmBudget(t *testing.T) {
	once.Do(load)
	total := 0
	for name, a := range assets {
		total += len(a.gz)
		t.Logf("%s: %d bytes gzipped", name, len(a.gz))
	}
	if total > pageBudget-catalogAllowance {
		t.Fatalf("the page's assets are %d bytes gzipped; with %d for the catalog the budget is %d", total, catalogAllowance, pageBudget)
	}
}

func TestHandler(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, enc string
		status    int
		ctype     string
	}{
		{"/", "gzip", 200, "text/html; charset=utf-8"},
		{"/", "", 200, "text/html; charset=utf-8"},
		{"/app.js", "gzip", 200, "text/javascript; charset=utf-8"},
		{"/client.wasm", "gzip, br", 200, "application/wasm"},
		{"/client.wasm", "", 200, "application/wasm"},
		{"/client.src", "", 404, ""},
		{"/x/app.js", "", 404, ""},
		{"/nothing", "", 404, ""},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		if tc.enc != "" {
			r.Header.Set("Accept-Encoding", tc.enc)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.path, w.Code, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != tc.ctype {
			t.Errorf("%s: Content-Type %q", tc.path, ct)
		}
		body, _ := io.ReadAll(w.Body)
		gz := w.Header().Get("Content-Encoding") == "gzip"
		if gz != (tc.enc != "") {
			t.Errorf("%s with Accept-Encoding %q: gzipped %v", tc.path, tc.enc, gz)
		}
		if tc.path == "/client.wasm" && !gz && !strings.HasPrefix(string(body), "\x00asm") {
			t.Errorf("the wasm served plain does not start with its magic")
		}
	}
	_ = os.Getenv
	_ = http.MethodGet
}
