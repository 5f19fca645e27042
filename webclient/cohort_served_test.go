package webclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/deploy/deploytest"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/webclient"
)

// TestClientJoinsCohortRun: the web client, natively, takes part in a
// served masked run over cohorts (of 7: the 6 simulated clients and the
// page) with participation limits (2 training rounds a client, 2 apart)
// beside simulated privrec clients: dp-als (--rounds-per-user 2
// --min-gap 2) and dp-ease (--cohort-rounds 2: its own limits, one
// round of the counts and one of the Gram). It joins the cohorts its
// limits allow, answers training rounds 1 and 3 only (the rounds
// between, which no client may answer, are skipped by the server),
// keeps them in its memory before its answers leave, and leaves once
// spent with the interim release after round 3, which covers the 7
// users, and its list from it while the run goes on. Reloaded with that
// memory after the run, it answers nothing more and gets the final
// model, whose fold-in of the person's ratings its list is. Its status
// says that it sits round 2 out by its limits.
func TestClientJoinsCohortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("served runs: skipped in -short")
	}
	for _, tc := range []struct {
		method string
		params map[string]string
	}{
		{"dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "1", "init-items": "0",
			"cohort": "7", "rounds-per-user": "2", "min-gap": "2"}},
		{"dp-ease", map[string]string{"secagg": "masked", "top-items": "60", "cohort": "7", "cohort-rounds": "2"}},
	} {
		t.Run(tc.method, func(t *testing.T) { joinCohortRun(t, tc.method, tc.params) })
	}
}

func joinCohortRun(t *testing.T, method string, params map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := deploytest.NewServer(ctx, t, deploytest.Config{Method: method, Simulated: 6, RoundTimeout: 2 * time.Second, Params: params})
	ranking := method == "dp-ease"
	c, err := webclient.New(httpTransport{r.URL}, hello(t, r.URL))
	if err != nil {
		t.Fatal(err)
	}
	c.AllowInsecure()
	store := &memStore{}
	if err := c.Remember(nil, store); err != nil {
		t.Fatal(err)
	}
	cred, err := c.Enroll(ctx, r.Code)
	if err != nil {
		t.Fatal(err)
	}
	var rs []webclient.Rating
	var rated []int
	for k := range 20 {
		rs = append(rs, webclient.Rating{Item: 11 * k, Value: float32(1 + k%5)})
		rated = append(rated, 11*k)
	}
	var evs []webclient.Event
	var out []webclient.SitOut
	res, err := c.Train(ctx, rs, 10, func(e webclient.Event) { evs = append(evs, e) }, func(s webclient.Status) {
		if s.SatOut != nil {
			out = append(out, *s.SatOut)
		}
	})
	if err != nil {
		t.Fatalf("%v; rounds seen: %+v", err, evs)
	}
	var answered []int
	for _, e := range evs {
		answered = append(answered, e.Round)
		if e.Err != "" {
			t.Errorf("round %d: %s", e.Round, e.Err)
		}
	}
	if !slices.Equal(answered, []int{0, 1, 3}) || !slices.Equal(res.Trained, []int{1, 3}) {
		t.Errorf("answered rounds %v, training rounds %v; want [0 1 3] and [1 3]", answered, res.Trained)
	}
	// Round 2 is too close to round 1 for its limits: the status said so.
	if len(out) != 1 || out[0].Round != 2 || out[0].Why != "limits" || !slices.Equal(out[0].Trained, []int{1}) ||
		out[0].MaxRounds != 2 || out[0].MinGap != 2 {
		t.Errorf("statuses of rounds sat out %+v, want round 2 by the limits (2 rounds, 2 apart) after round 1", out)
	}
	if res.Release == nil || res.Release.Round != 3 || res.Release.Users != 7 {
		t.Errorf("left with release %+v, want the interim release after round 3, of 7 users", res.Release)
	}
	if len(res.Recs) != 10 {
		t.Errorf("%d recommendations, want 10", len(res.Recs))
	}
	for _, rc := range res.Recs {
		if slices.Contains(rated, rc.Item) || (rc.Rating == nil) != ranking {
			t.Errorf("recommendation %+v: rated by the person, or a predicted rating where the model ranks (%v)", rc, ranking)
		}
	}
	var mem webclient.Memory
	if err := json.Unmarshal(store.bytes(), &mem); err != nil {
		t.Fatal(err)
	}
	if pm := mem.Plans[c.PlanDigest()]; pm == nil || !slices.Equal(pm.Trained, []int{1, 3}) {
		t.Errorf("the memory saved: %s, want training rounds [1 3]", store.bytes())
	}
	// Only the rounds it answered got anything from it; the run went on.
	for _, q := range r.Requests() {
		if q.Auth != "Bearer "+cred || !strings.HasSuffix(q.Path, "/SecAgg") {
			continue
		}
		var m struct{ Round int }
		if err := json.Unmarshal(q.Body, &m); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains([]int{0, 1, 3}, m.Round) {
			t.Errorf("a SecAgg step of round %d", m.Round)
		}
	}
	r.Wait(t, 2*time.Minute)
	led, err := r.Srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range led {
		t.Logf("round %d (%s): cohort %d, %d masked inputs, skipped %q", e.Round, e.Phase, e.Cohort, e.Uploads, e.Skipped)
	}

	// Reloaded with its memory after the run: nothing more answered,
	// the final model.
	again, err := webclient.New(httpTransport{r.URL}, hello(t, r.URL))
	if err != nil {
		t.Fatal(err)
	}
	again.AllowInsecure()
	if err := again.Remember(store.bytes(), &memStore{}); err != nil {
		t.Fatal(err)
	}
	again.SetCredential(cred)
	var more []webclient.Event
	final, err := again.Train(ctx, rs, 10, func(e webclient.Event) { more = append(more, e) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(more) != 0 || final.Release != nil || len(final.Recs) != 10 || !slices.Equal(final.Trained, []int{1, 3}) {
		t.Errorf("again: rounds %+v, release %+v, %d recommendations, training rounds %v; want none, the final model, 10, [1 3]",
			more, final.Release, len(final.Recs), final.Trained)
	}
	// Its list is the published model's fold-in of the person's ratings
	// on the catalog's scale (privrec recommend --model --ratings).
	pub, err := model.ReadModel(bytes.NewReader(r.Srv.Model()))
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b webclient.Rating) int { return a.Item - b.Item })
	var items []int32
	var values []float32
	for _, x := range sorted {
		items, values = append(items, int32(x.Item)), append(values, x.Value)
	}
	if ranking {
		values = nil // a ranking model folds in the history alone
	}
	f, err := pub.FoldIn("me", items, values, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := f.Recommend(0, 10, items)
	for k := range min(len(want), len(final.Recs)) {
		if got := final.Recs[k]; got.Item != int(want[k].Item) || math.Abs(float64(got.Score)-float64(want[k].Score)) > 1e-3 {
			t.Errorf("recommendation %d: item %d, score %.4f; the published model's fold-in: item %d, %.4f", k, got.Item, got.Score, want[k].Item, want[k].Score)
		}
	}
}
