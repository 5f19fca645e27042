package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/privrec/privrec/deploy/deploytest"
)

const chromium = "/usr/bin/chromium"

// TestBrowserEndToEnd: headless Chromium loads the page from a served
// masked dp-als run over ml-latest-small's catalog, rates 20 movies,
// takes part in every masked round alongside 12 simulated Go clients,
// gets recommendations, keeps its ratings over a reload, forgets them;
// the server never received a rating or a rated-item list from it. It
// measures the page's download (gzipped bytes) and its masked rounds'
// time. With the recommendations shown it runs axe-core's WCAG 2 A and
// AA rules at desktop and phone width and fails on any violation.
// PRIVREC_WEB_SHOTS=DIR writes desktop and phone screenshots there.
func TestBrowserEndToEnd(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + ": install Debian's chromium and chromium-driver (.ci/run does) to run the browser test")
	}
	if testing.Short() {
		t.Skip("a browser and a served run: skipped in -short")
	}
	const sim = 12
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := deploytest.NewServer(ctx, t, deploytest.Config{Simulated: sim, RoundTimeout: 2 * time.Minute})
	url := run.URL

	br := newTab(ctx, t)
	bctx, eval, waitFor := br.ctx, br.eval, br.waitFor
	ready := "!!(window.privrecPage && window.privrecPage.ready)"
	if _, err := chromedp.Run(bctx, chromedp.Navigate(url+"/?insecure=1&code="+run.Code)); err != nil {
		t.Fatal(err)
	}
	waitFor("the page is ready", ready, time.Minute)
	// Where the run is, and who takes part, before joining.
	var runStatus string
	eval(`document.getElementById("run-status").textContent`, &runStatus)
	if want := fmt.Sprintf("%d of the %d clients it waits for are enrolled", sim, sim+1); !strings.Contains(runStatus, want) {
		t.Errorf("before joining the page says %q, want %q", runStatus, want)
	}
	// Everything the page downloaded to be ready: the document, its
	// scripts and style, the wasm and the catalog (Hello), as bytes on
	// the wire (gzipped).
	var download float64
	eval(`performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).reduce((s, e) => s + e.encodedBodySize, 0)`, &download)
	if download <= 1e5 || download > 2e6 {
		t.Errorf("the page downloads %.0f bytes gzipped; the budget is 2 MB", download)
	}
	t.Logf("the page downloads %.0f bytes (gzipped)", download)

	// Rate 20 movies through the page's controls.
	eval(`(async () => {
		const s = document.getElementById("search");
		s.value = "star"; s.dispatchEvent(new Event("input"));
		const sels = Array.from(document.querySelectorAll("#results select")).slice(0, 20);
		sels.forEach((sel, k) => { sel.value = String(sel.options[1 + k % (sel.options.length - 1)].value); sel.dispatchEvent(new Event("change")); });
		return sels.length;
	})()`, nil)
	// The page enables Join once the ratings are saved in IndexedDB.
	waitFor("20 ratings saved", `window.privrecPage.ratings.size === 20 && document.getElementById("count").textContent === "20" && !document.getElementById("join").disabled`, 30*time.Second)
	var rated []string
	eval(`Array.from(window.privrecPage.ratings.keys())`, &rated)
	shoot(t, bctx, "desktop-rated")
	checkAligned(t, eval, "desktop")

	eval(`document.getElementById("join").click()`, nil)
	// Enrolled: the spent code leaves the field and the address.
	waitFor("the code is cleared once spent", `window.privrecPage.identity !== null && document.getElementById("code").value === "" && !location.search.includes("code")`, time.Minute)
	waitFor("the run ends in the browser", "window.privrecPage.trained === true", 2*time.Minute)
	run.Wait(t, time.Minute)
	var status [2]string
	eval(`[document.getElementById("run-status").textContent, JSON.stringify(window.privrecPage.events.map((e) => e.clients))]`, &status)
	if status[0] != "The run is over." || !strings.Contains(status[1], fmt.Sprint(sim+1)) {
		t.Errorf("after the run the page says %q; the rounds' participants %s, want %d", status[0], status[1], sim+1)
	}
	var evs []struct {
		Round     int
		Phase     string
		Masked    bool
		TookMS    float64 `json:"tookMs"`
		ComputeMS float64 `json:"computeMs"`
		Words     int
		Err       string
	}
	var evText string
	eval(`JSON.stringify(window.privrecPage.events)`, &evText)
	if err := json.Unmarshal([]byte(evText), &evs); err != nil {
		t.Fatal(err)
	}
	masked, worst, worstCompute, words := 0, 0.0, 0.0, 0
	for _, e := range evs {
		if e.Err != "" {
			t.Errorf("round %d: %s", e.Round, e.Err)
		}
		if e.Masked {
			masked++
			if e.TookMS > worst {
				worst, words = e.TookMS, e.Words
			}
			worstCompute = max(worstCompute, e.ComputeMS)
		}
	}
	if masked < 3 {
		t.Fatalf("%d masked rounds in the browser: %s", masked, evText)
	}
	if worst > 2000 {
		t.Errorf("a masked round took %.0f ms in the browser; the budget is 2 s", worst)
	}
	t.Logf("%d masked rounds in the browser; the longest %.0f ms (%d words over %d items), the browser's own computation at most %.0f ms",
		masked, worst, words, len(run.Train.ItemIDs), worstCompute)
	var nrecs int
	eval(`document.querySelectorAll("#recs li").length`, &nrecs)
	if nrecs != 10 {
		var res any
		eval(`window.privrecPage.result`, &res)
		t.Errorf("%d recommendations shown; the result %v", nrecs, res)
	}
	shoot(t, bctx, "desktop")
	axeCheck(t, bctx, "desktop (1280 px)")
	if _, err := chromedp.Run(bctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	shoot(t, bctx, "phone")
	axeCheck(t, bctx, "phone (390 px)")
	checkAligned(t, eval, "phone")
	// The privacy panel's values take the panel's width at 390 px, not a
	// word per line beside their labels.
	var narrow []string
	eval(`Array.from(document.querySelectorAll("#privacy dd")).filter((dd) => dd.getBoundingClientRect().width < 0.8 * dd.parentElement.getBoundingClientRect().width).map((dd) => dd.id)`, &narrow)
	if len(narrow) > 0 {
		t.Errorf("at 390 px the privacy values %v are narrower than 80%% of the panel", narrow)
	}
	if _, err := chromedp.Run(bctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

	// A reload keeps the ratings; forget me deletes them and the identity.
	if _, err := chromedp.Run(bctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitFor("the page is ready again", ready, time.Minute)
	waitFor("20 ratings after a reload", "window.privrecPage.ratings.size === 20 && window.privrecPage.identity !== null", 10*time.Second)
	eval(`document.getElementById("forget").click()`, nil)
	waitFor("forgotten", "window.privrecPage.ratings.size === 0 && window.privrecPage.identity === null", 10*time.Second)
	// Forgetting clears the screen too, not only the storage.
	var shown [4]string
	eval(`[document.getElementById("eps-so-far").textContent, String(document.querySelectorAll("#recs li").length),
		document.getElementById("rounds").textContent, document.getElementById("code").value]`, &shown)
	if shown != [4]string{"0", "0", "0", ""} {
		t.Errorf("after forgetting the page shows ε %q, %s recommendations, %s rounds, code %q", shown[0], shown[1], shown[2], shown[3])
	}
	if _, err := chromedp.Run(bctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitFor("the page is ready after forgetting", ready, time.Minute)
	waitFor("nothing stored after forgetting", "window.privrecPage.ratings.size === 0 && window.privrecPage.identity === null && window.privrecPage.result === null", 10*time.Second)
	// Only the memory of the rounds answered is kept (no rating): the
	// run's one plan, its setup and last round, saved before each answer.
	var mem struct {
		Plans map[string]struct{ Setup, Last int }
	}
	var memText string
	eval(`kvGet("memory").then((m) => m || "")`, &memText)
	if err := json.Unmarshal([]byte(memText), &mem); err != nil || len(mem.Plans) != 1 {
		t.Fatalf("the page's memory after forgetting: %q (%v), want one plan", memText, err)
	}
	for _, pm := range mem.Plans {
		if pm.Setup != 0 || pm.Last < 5 {
			t.Errorf("the page remembers setup round %d and last round %d; want 0 and at least the 5 masked rounds' last", pm.Setup, pm.Last)
		}
	}

	// What the server received from the browser: only the federation
	// calls' allowed fields, never a rating or an item list.
	allowed := map[string]string{"Hello": "", "GetRound": "after boot session", "GetModel": "", "Upload": "round meta",
		"Enroll": "code secrets", "SecAgg": "round session commit keys shares check masked consistency reveal"}
	calls := 0
	for _, q := range run.Requests() {
		proc := q.Path[strings.LastIndex(q.Path, "/")+1:]
		if !strings.HasPrefix(q.Path, "/privrec.") || !bytes.HasPrefix(q.Body, []byte("{")) {
			continue // the page's assets; the Go clients' protobuf calls
		}
		calls++
		var m map[string]json.RawMessage
		if err := json.Unmarshal(q.Body, &m); err != nil {
			t.Fatalf("%s: %v", proc, err)
		}
		for k := range m {
			if !strings.Contains(" "+allowed[proc]+" ", " "+k+" ") {
				t.Errorf("%s: the browser sent field %q", proc, k)
			}
		}
		if proc == "Upload" && m["sparse"] != nil || proc == "SecAgg" && m["masked"] == nil && bytes.Contains(q.Body, []byte(`"items"`)) {
			t.Errorf("%s: the browser sent statistics in the clear: %.200s", proc, q.Body)
		}
	}
	if calls < 5*masked {
		t.Errorf("%d JSON calls recorded for %d masked rounds", calls, masked)
	}
	_ = rated
}

// axeViolation is one failed rule of axe-core's report.
type axeViolation struct {
	ID     string
	Impact string
	Help   string
	Nodes  []struct{ Target []any }
}

// axeCheck injects the vendored axe-core (testdata/axe) into the loaded
// page and runs its WCAG 2 A and AA rules; every violation fails the
// test with its rule, impact and the elements it concerns.
func axeCheck(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](string(src)+"\n;true")); err != nil {
		t.Fatalf("injecting axe-core: %v", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa"]}, resultTypes: ["violations"]})
		.then((r) => JSON.stringify({version: axe.version, passes: r.passes.length, violations: r.violations}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	var rep struct {
		Version    string
		Passes     int
		Violations []axeViolation
	}
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		t.Fatalf("axe.run: %.300s: %v", raw, err)
	}
	for _, v := range rep.Violations {
		var targets []string
		for _, n := range v.Nodes {
			targets = append(targets, fmt.Sprint(n.Target...))
		}
		t.Errorf("axe-core %s, %s: %s (%s): %s", rep.Version, what, v.ID, v.Impact, strings.Join(targets, "; "))
	}
	if rep.Passes == 0 {
		t.Errorf("axe-core %s, %s: no rule passed: did it run?", rep.Version, what)
	}
	t.Logf("axe-core %s, %s: wcag2a+wcag2aa, %d rules passed, %d violated", rep.Version, what, rep.Passes, len(rep.Violations))
}

// checkAligned fails the test when the rating selects of a list of
// movies do not line up (a title's length moved them).
func checkAligned(t *testing.T, eval func(string, any), width string) {
	t.Helper()
	for _, list := range []string{"#results", "#mine"} {
		var xs []float64
		eval(`Array.from(document.querySelectorAll("`+list+` select")).map((s) => Math.round(s.getBoundingClientRect().left))`, &xs)
		if len(xs) < 2 {
			t.Errorf("%s at %s: %d selects", list, width, len(xs))
			continue
		}
		for _, x := range xs {
			if x != xs[0] {
				t.Errorf("%s at %s: the rating selects start at x = %v, not one column", list, width, xs)
				break
			}
		}
	}
}

// shoot writes a full-page screenshot to $PRIVREC_WEB_SHOTS/name.png.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("PRIVREC_WEB_SHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
