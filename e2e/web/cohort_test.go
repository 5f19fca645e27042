package web_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/privrec/privrec/deploy/deploytest"
)

// TestBrowserCohortRun: headless Chromium takes part in a served masked
// dp-als run over cohorts (of 7: 6 simulated privrec clients and the
// page) with participation limits (2 training rounds a client, 2 apart).
// The page joins the cohorts its limits allow, answers training rounds 1
// and 3 only, keeps them in its IndexedDB memory, and once spent shows
// its list from the interim release after round 3 (7 users) and says so
// while the run goes on; its Join button stays on, and pressed again
// after the run it answers nothing more and shows the list from the
// final model. Nothing it sent carries a rating.
func TestBrowserCohortRun(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + ": install Debian's chromium and chromium-driver (.ci/run does) to run the browser test")
	}
	if testing.Short() {
		t.Skip("a browser and a served run: skipped in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := deploytest.NewServer(ctx, t, deploytest.Config{Method: "dp-als", Simulated: 6, RoundTimeout: 2 * time.Second,
		Params: map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "1", "init-items": "0",
			"cohort": "7", "rounds-per-user": "2", "min-gap": "2"}})
	br := newTab(ctx, t)
	eval, waitFor := br.eval, br.waitFor
	if _, err := chromedp.Run(br.ctx, chromedp.Navigate(run.URL+"/?insecure=1&code="+run.Code)); err != nil {
		t.Fatal(err)
	}
	waitFor("the page is ready", "!!(window.privrecPage && window.privrecPage.ready)", time.Minute)
	eval(`(async () => {
		const s = document.getElementById("search");
		s.value = "star"; s.dispatchEvent(new Event("input"));
		const sels = Array.from(document.querySelectorAll("#results select")).slice(0, 20);
		sels.forEach((sel, k) => { sel.value = String(sel.options[1 + k % (sel.options.length - 1)].value); sel.dispatchEvent(new Event("change")); });
		return sels.length;
	})()`, nil)
	waitFor("20 ratings saved", `window.privrecPage.ratings.size === 20 && !document.getElementById("join").disabled`, 30*time.Second)
	eval(`document.getElementById("join").click()`, nil)
	waitFor("the page leaves with a release", "window.privrecPage.trained === true", 2*time.Minute)

	var got struct {
		Release *struct{ Round, Users int }
		Trained []int
		Rounds  []int
		Recs    int
		Train   string
		Recs2   string
		Join    bool
		Memory  string
	}
	eval(`(async () => ({release: window.privrecPage.result.release || null, trained: window.privrecPage.result.trained || [],
		rounds: window.privrecPage.events.map((e) => e.round), recs: document.querySelectorAll("#recs li").length,
		train: document.getElementById("train-status").textContent, recs2: document.getElementById("recs-status").textContent,
		join: !document.getElementById("join").disabled, memory: (await kvGet("memory")) || ""}))()`, &got)
	t.Logf("the page left: %q", got.Train)
	if got.Release == nil || got.Release.Round != 3 || got.Release.Users != 7 {
		t.Errorf("the page left with release %+v, want the interim release after round 3, of 7 users", got.Release)
	}
	if !slices.Equal(got.Rounds, []int{0, 1, 3}) || !slices.Equal(got.Trained, []int{1, 3}) {
		t.Errorf("the page answered rounds %v, training rounds %v; want [0 1 3] and [1 3]", got.Rounds, got.Trained)
	}
	if got.Recs != 10 || !strings.Contains(got.Recs2, "release after round 3, which covers 7 users") ||
		!strings.Contains(got.Train, "participation limits") || !got.Join {
		t.Errorf("the page shows %d recommendations, says %q and %q, Join enabled %v; want 10, the release, and Join on",
			got.Recs, got.Train, got.Recs2, got.Join)
	}
	var mem struct {
		Plans map[string]struct{ Trained []int }
	}
	if err := json.Unmarshal([]byte(got.Memory), &mem); err != nil || len(mem.Plans) != 1 {
		t.Fatalf("the page's memory: %q (%v)", got.Memory, err)
	}
	for _, pm := range mem.Plans {
		if !slices.Equal(pm.Trained, []int{1, 3}) {
			t.Errorf("the page's memory holds training rounds %v, want [1 3]", pm.Trained)
		}
	}

	// After the run: Join again answers nothing and shows the final
	// model's list.
	run.Wait(t, 2*time.Minute)
	eval(`document.getElementById("join").click()`, nil)
	waitFor("the list from the final model", `window.privrecPage.result && !window.privrecPage.result.release && document.getElementById("join").disabled`, time.Minute)
	var after struct {
		Rounds int
		Recs   int
		Run    string
	}
	eval(`({rounds: window.privrecPage.events.length, recs: document.querySelectorAll("#recs li").length,
		run: document.getElementById("run-status").textContent})`, &after)
	if after.Rounds != 3 || after.Recs != 10 || after.Run != "The run is over." {
		t.Errorf("after the run: %d rounds answered, %d recommendations, %q; want 3, 10, the run is over", after.Rounds, after.Recs, after.Run)
	}

	// What the server received from the browser: only the federation
	// calls' allowed fields; the page joined cohorts and asked for the
	// interim release.
	allowed := map[string]string{"Hello": "", "GetRound": "after boot session join", "GetModel": "interim", "Upload": "round meta",
		"Enroll": "code secrets", "SecAgg": "round session commit keys shares check masked consistency reveal"}
	joins, interim := 0, 0
	for _, q := range run.Requests() {
		proc := q.Path[strings.LastIndex(q.Path, "/")+1:]
		if !strings.HasPrefix(q.Path, "/privrec.") || !strings.HasPrefix(string(q.Body), "{") {
			continue // the page's assets; the Go clients' protobuf calls
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(q.Body, &m); err != nil {
			t.Fatalf("%s: %v", proc, err)
		}
		for k := range m {
			if !slices.Contains(strings.Fields(allowed[proc]), k) {
				t.Errorf("%s: the browser sent field %q", proc, k)
			}
		}
		if string(m["join"]) == "true" {
			joins++
		}
		if string(m["interim"]) == "true" {
			interim++
		}
	}
	if joins != 3 || interim != 1 {
		t.Errorf("the browser asked to join %d cohorts and for %d interim releases; want 3 (rounds 0, 1, 3) and 1", joins, interim)
	}
}
