package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/privrec/privrec/deploy/deploytest"
	"github.com/privrec/privrec/model"
)

// profile is the sample profile of issue 41, by title: Star Wars IV–VI and
// The Lord of the Rings at 5, The Matrix at 4, Notting Hill at 1. ML-1M
// ends in 2000, so its Lord of the Rings is the 1978 film.
func profile(data string) []struct {
	title string
	value string
} {
	lotr := "Lord of the Rings: The Fellowship of the Ring, The (2001)"
	if data == "ml-1m" {
		lotr = "Lord of the Rings, The (1978)"
	}
	return []struct {
		title string
		value string
	}{
		{"Star Wars: Episode IV - A New Hope (1977)", "5"},
		{"Star Wars: Episode V - The Empire Strikes Back (1980)", "5"},
		{"Star Wars: Episode VI - Return of the Jedi (1983)", "5"},
		{lotr, "5"},
		{"Matrix, The (1999)", "4"},
		{"Notting Hill (1999)", "1"},
	}
}

// TestBrowserRanksWithDPEase: the page in headless Chromium joins a
// masked dp-ease run, rated with the sample profile through its
// controls, and shows the ranking model's list: ten titles it did not
// rate, with no predicted stars (the run trained no rating model), the
// very list the published model gives the same history
// (model.Model.FoldInRanking, as privrec recommend --model --ratings).
//
// By default the run has 12 simulated users of ml-latest-small. With
// PRIVREC_WEB_PROFILE=ml-latest-small (ε = 10) or ml-1m (ε = 1, from
// $PRIVREC_DATA), every user of that dataset takes part, the test logs
// the list, and PRIVREC_WEB_SHOTS=DIR writes its screenshot
// profile-DATA.png (the README's).
func TestBrowserRanksWithDPEase(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + ": install Debian's chromium and chromium-driver (.ci/run does) to run the browser test")
	}
	if testing.Short() {
		t.Skip("a browser and a served run: skipped in -short")
	}
	data, sim, limit := "ml-latest-small", 12, 2*time.Minute
	params := map[string]string{"secagg": "masked", "eps": "10", "top-items": "50"}
	if p := os.Getenv("PRIVREC_WEB_PROFILE"); p != "" {
		data, sim, limit = p, -1, 20*time.Minute
		params = map[string]string{"secagg": "masked", "eps": "10"}
		if p == "ml-1m" {
			params["eps"] = "1"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit+3*time.Minute)
	defer cancel()
	run := deploytest.NewServer(ctx, t, deploytest.Config{Data: data, Method: "dp-ease", Params: params, Simulated: sim, RoundTimeout: limit})

	br := newTab(ctx, t)
	bctx, eval, waitFor := br.ctx, br.eval, br.waitFor
	if _, err := chromedp.Run(bctx, chromedp.Navigate(run.URL+"/?insecure=1&code="+run.Code)); err != nil {
		t.Fatal(err)
	}
	waitFor("the page is ready", "!!(window.privrecPage && window.privrecPage.ready)", time.Minute)

	// Rate the profile through the page's search and rating controls.
	var rated []int32
	for _, p := range profile(data) {
		k := slices.Index(run.Train.ItemTitles, p.title)
		if k < 0 {
			t.Fatalf("%s has no %q", data, p.title)
		}
		rated = append(rated, int32(k))
		js, _ := json.Marshal([]string{p.title, p.value})
		var ok bool
		eval(`((tv) => {
			const s = document.getElementById("search");
			s.value = tv[0]; s.dispatchEvent(new Event("input"));
			const li = Array.from(document.querySelectorAll("#results li")).find((li) => li.querySelector("span").textContent === tv[0]);
			if (!li) return false;
			const sel = li.querySelector("select");
			sel.value = tv[1]; sel.dispatchEvent(new Event("change"));
			return true;
		})(`+string(js)+`)`, &ok)
		if !ok {
			t.Fatalf("the page's search does not show %q", p.title)
		}
	}
	slices.Sort(rated)
	n := len(rated)
	waitFor("the profile saved", `window.privrecPage.ratings.size === `+strconv.Itoa(n)+` && !document.getElementById("join").disabled`, 30*time.Second)
	eval(`document.getElementById("search").value = ""; document.getElementById("search").dispatchEvent(new Event("input")); true`, nil)
	eval(`document.getElementById("join").click()`, nil)
	waitFor("the run ends in the browser", "window.privrecPage.trained === true", limit)
	run.Wait(t, time.Minute)

	var shown []string
	eval(`Array.from(document.querySelectorAll("#recs li")).map((li) => li.textContent)`, &shown)
	var status string
	eval(`document.getElementById("recs-status").textContent`, &status)
	pub, err := model.ReadModel(bytes.NewReader(run.Srv.Model()))
	if err != nil {
		t.Fatal(err)
	}
	f, err := pub.FoldIn("me", rated, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range f.Recommend(0, 10, rated) {
		want = append(want, pub.ItemTitles[s.Item])
	}
	if len(want) != 10 || !slices.Equal(shown, want) {
		t.Errorf("the page shows %q; the published model ranks %q for the same history", shown, want)
	}
	for _, s := range shown {
		if strings.Contains(s, "★") {
			t.Errorf("%q: predicted stars from a ranking model", s)
		}
	}
	// A run too small for its budget (the 12 simulated users of the
	// default, at the served roster rule) lists DP popularity, and the
	// note says so instead of "ranked by dp-ease".
	want1 := "dp-ease"
	if !pub.Personalised() {
		want1 = "the popular list"
	}
	if !strings.Contains(status, want1) || !strings.Contains(strings.ToLower(status), "no predicted stars") {
		t.Errorf("the list's note (published model personalised: %v): %q", pub.Personalised(), status)
	}
	t.Logf("%s, dp-ease %v, simulated users %d (-1: all) and the browser: %q", data, params, sim, shown)
	shoot(t, bctx, "profile-"+data)
}
