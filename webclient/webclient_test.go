package webclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/deploy/deploytest"
	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/webclient"
)

// httpTransport is the Transport of the tests: net/http, where the page
// uses the browser's fetch.
type httpTransport struct{ base string }

func (h httpTransport) Post(ctx context.Context, path string, header map[string]string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// TestConfigMatchesRegistry: the page's parsers of dp-als's and
// dp-ease's plans read every field of the method registry's list as
// method.Configure does.
func TestConfigMatchesRegistry(t *testing.T) {
	for _, name := range []string{"dp-als", "dp-biases", "dp-ease"} {
		spec, err := method.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		// Every field, at a value other than its default where that
		// still validates, so that a field the page ignores shows.
		want := spec.Text(spec.New())
		for _, f := range spec.Fields(spec.New()) {
			switch f.Value.String() {
			case "true":
				want[f.Name] = "false"
			case "false":
				want[f.Name] = "true"
			}
		}
		want["secagg"] = "masked"
		want["eps"], want["delta"] = "2.5", "1e-7"
		if name == "dp-ease" {
			want["top-items"], want["lambda"], want["cap"] = "40", "3", "7"
		} else {
			want["bias-rounds"], want["reg-user"] = "3", "7"
		}
		typed, err := spec.Configure(want)
		if err != nil {
			t.Fatal(err)
		}
		hello, _ := json.Marshal(map[string]any{"method": name, "config": want, "aggregation": "masked",
			"catalog": map[string]any{"itemIds": []string{"1"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
		c, err := webclient.New(nil, hello)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := c.Config(); !reflect.DeepEqual(got, typed) {
			t.Errorf("%s: the page reads %+v, the registry %+v", name, got, typed)
		}
	}
}

// TestRefusesUnmaskedPlans: the page takes part only where the server
// sees sums.
func TestRefusesUnmaskedPlans(t *testing.T) {
	for _, tc := range []struct{ method, agg, secagg string }{
		{"dp-als", "sum", "ideal"}, {"dp-als", "plain", "off"}, {"hdpmf", "masked", "masked"},
	} {
		hello, _ := json.Marshal(map[string]any{"method": tc.method, "config": map[string]string{"secagg": tc.secagg},
			"aggregation": tc.agg, "scale": map[string]any{"min": 1, "max": 5}})
		if _, err := webclient.New(nil, hello); err == nil {
			t.Errorf("%+v: accepted", tc)
		}
	}
}

// checkNoRatings asserts that nothing the client with credential prefix
// sent carries a rating or its rated-item list: no Upload with a
// payload, and no SecAgg step but keys, shares, checks, masked vectors
// and reveals.
func checkNoRatings(t *testing.T, r *deploytest.Server, cred string, rated []int) (calls int) {
	t.Helper()
	for _, q := range r.Requests() {
		browserEnrol := strings.HasSuffix(q.Path, "/Enroll") && bytes.HasPrefix(q.Body, []byte("{")) // the Go clients send protobuf
		if q.Auth != "Bearer "+cred && !browserEnrol {
			continue
		}
		calls++
		var m map[string]json.RawMessage
		if err := json.Unmarshal(q.Body, &m); err != nil {
			t.Fatalf("%s: a body that is not JSON: %v", q.Path, err)
		}
		proc := q.Path[strings.LastIndex(q.Path, "/")+1:]
		allowed := map[string][]string{
			"Hello": {}, "GetRound": {"after", "boot", "session", "join"}, "GetModel": {"interim"}, "Upload": {"round", "meta"},
			"Enroll": {"code", "secrets"},
			"SecAgg": {"round", "session", "commit", "keys", "shares", "check", "masked", "consistency", "reveal"},
		}[proc]
		for k := range m {
			ok := false
			for _, a := range allowed {
				ok = ok || a == k
			}
			if !ok {
				t.Errorf("%s: the browser sent field %q", proc, k)
			}
		}
		if proc == "SecAgg" && m["masked"] != nil {
			var mu struct{ Data []byte }
			if err := json.Unmarshal(m["masked"], &mu); err != nil {
				t.Fatal(err)
			}
			if len(mu.Data)%4 != 0 || len(mu.Data) == 0 {
				t.Errorf("a masked vector of %d bytes", len(mu.Data))
			}
		}
	}
	return calls
}

// TestClientJoinsMaskedRun: the web client, natively, joins a masked
// dp-ease or dp-als run over ml-latest-small's catalog with simulated
// clients, answers every round through secure aggregation only, and gets
// recommendations that leave out what it rated: dp-ease's ranked without
// a rating, the list privrec recommend --model --ratings gives from the
// published model; dp-als's with its predicted rating on the scale.
func TestClientJoinsMaskedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a served run: skipped in -short")
	}
	for _, tc := range []struct {
		method string
		params map[string]string
	}{
		{"dp-ease", map[string]string{"secagg": "masked", "top-items": "400"}}, // the Gram round: 80,201 words, past the cap without base64
		{"dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "init-items": "20"}},
	} {
		t.Run(tc.method, func(t *testing.T) { joinMaskedRun(t, tc.method, tc.params) })
	}
}

func joinMaskedRun(t *testing.T, name string, params map[string]string) {
	r := deploytest.NewServer(context.Background(), t, deploytest.Config{Method: name, Params: params, Simulated: 12})
	resp, err := http.Post(r.URL+webclient.Service+"Hello", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	hello, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c, err := webclient.New(httpTransport{r.URL}, hello)
	if err != nil {
		t.Fatal(err)
	}
	c.AllowInsecure() // the run is the honest-but-curious protocol
	if err := c.Remember(nil, &memStore{}); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Plan().Catalog.ItemIDs); n != 9742 {
		t.Fatalf("a catalog of %d items", n)
	}
	// Bounded: a run that stalls fails here, with the rounds seen, rather
	// than at the package's test timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cred, err := c.Enroll(ctx, r.Code)
	if err != nil {
		t.Fatal(err)
	}
	var rs []webclient.Rating
	var rated []int
	for k := range 20 {
		rs = append(rs, webclient.Rating{Item: 7 * k, Value: float32(1 + k%5)})
		rated = append(rated, 7*k)
	}
	var evs []webclient.Event
	var sts []webclient.Status
	res, err := c.Train(ctx, rs, 10, func(e webclient.Event) { evs = append(evs, e) }, func(s webclient.Status) { sts = append(sts, s) })
	if err != nil {
		t.Fatalf("%v; rounds seen: %+v", err, evs)
	}
	r.Wait(t, 5*time.Minute)
	masked := 0
	for _, e := range evs {
		if e.Err != "" {
			t.Errorf("round %d: %s", e.Round, e.Err)
		}
		if e.Masked {
			masked++
		}
	}
	if masked < 3 || c.Sent().MaskedRounds != masked || (name == "dp-ease" && c.Sent().EmptyUploads != 0) {
		t.Fatalf("%d masked rounds answered, %d masked vectors sent: %+v", masked, c.Sent().MaskedRounds, evs)
	}
	for _, e := range evs {
		if e.Masked && e.Clients != 13 {
			t.Errorf("round %d: %d clients in its secure aggregation, want the 12 simulated and this one", e.Round, e.Clients)
		}
	}
	if len(sts) == 0 || sts[len(sts)-1].State != "done" || sts[len(sts)-1].Enrolled != 13 || sts[len(sts)-1].MinClients != 13 {
		t.Errorf("the last status %+v of %d, want done with 13 of 13 enrolled", sts[len(sts)-1:], len(sts))
	}
	if len(res.Recs) != 10 {
		t.Fatalf("%d recommendations", len(res.Recs))
	}
	for _, rc := range res.Recs {
		for _, j := range rated {
			if rc.Item == j {
				t.Errorf("recommends item %d, which the person rated", j)
			}
		}
	}
	eps := 0.0
	switch cfg := c.Config().(type) {
	case *dpals.Config:
		eps = cfg.Eps
		// A page that did not see the final round (one that left a
		// cohort run, or reloaded) solves its vector against the
		// published model, on the catalog's scale (model.Model.FoldIn),
		// rather than against the final broadcast, on the internal
		// one: the same list.
		again, err := webclient.New(httpTransport{r.URL}, hello)
		if err != nil {
			t.Fatal(err)
		}
		again.AllowInsecure()
		again.SetCredential(cred)
		if err := again.Remember(nil, &memStore{}); err != nil {
			t.Fatal(err)
		}
		folded, err := again.Train(ctx, rs, 10, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(folded.Recs) != len(res.Recs) {
			t.Errorf("%d recommendations from the fold-in, %d from the final round's solve", len(folded.Recs), len(res.Recs))
		}
		for k := range min(len(folded.Recs), len(res.Recs)) {
			got, want := folded.Recs[k], res.Recs[k]
			if got.Item != want.Item || math.Abs(float64(got.Score-want.Score)) > 1e-3 || math.Abs(float64(*got.Rating-*want.Rating)) > 1e-3 {
				t.Errorf("recommendation %d from the fold-in: item %d, score %.4f, rating %.4f; from the final round's solve: item %d, %.4f, %.4f",
					k, got.Item, got.Score, *got.Rating, want.Item, want.Score, *want.Rating)
			}
		}
		for _, rc := range res.Recs {
			if res.Ranking || rc.Rating == nil || *rc.Rating < 0.5 || *rc.Rating > 5 {
				t.Errorf("dp-als recommendation %+v (ranking %v): want a predicted rating on the scale", rc, res.Ranking)
			}
		}
	case *dpease.Config:
		eps = cfg.Eps
		pub, err := model.ReadModel(bytes.NewReader(r.Srv.Model()))
		if err != nil {
			t.Fatal(err)
		}
		f, err := pub.FoldIn("me", sortedInts32(rated), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := f.Recommend(0, 10, sortedInts32(rated))
		if !res.Ranking || len(want) != len(res.Recs) {
			t.Fatalf("dp-ease: ranking %v, %d recommendations; the published model's fold-in gives %d", res.Ranking, len(res.Recs), len(want))
		}
		for k, rc := range res.Recs {
			if rc.Rating != nil || rc.Item != int(want[k].Item) || rc.Score != want[k].Score {
				t.Errorf("dp-ease recommendation %d: %+v; the published model's fold-in: %+v, no rating", k, rc, want[k])
			}
		}
		// 13 people are far too few for the budget: the served run takes
		// its roster from the enrolled count and lists DP popularity, and
		// the result says so (the page tells the person).
		if !res.Popular || pub.Personalised() {
			t.Errorf("13 enrolled: popular %v, published model personalised %v; want the popular list, said", res.Popular, pub.Personalised())
		}
	}
	if !(res.EpsTotal > 0 && res.EpsTotal <= eps*1.0001) {
		t.Errorf("ε %v published, the config's %v", res.EpsTotal, eps)
	}
	if n := checkNoRatings(t, r, cred, rated); n < 5*masked {
		t.Errorf("%d calls recorded for %d masked rounds", n, masked)
	}
}

// silentTransport is a server that does not answer (the network fails),
// or, with status, answers every call with that HTTP status and body.
type silentTransport struct {
	status int
	body   string
}

func (s silentTransport) Post(ctx context.Context, _ string, _ map[string]string, _ []byte) (int, []byte, error) {
	if s.status == 0 {
		return 0, nil, errors.New("connection refused")
	}
	return s.status, []byte(s.body), nil
}

// TestLostServer: a client whose server stops answering says so while it
// retries, and gives up with ErrLost after LostAfter (before, the page
// waited forever); a server that answers "not yet" is alive, and the
// client keeps waiting on it.
func TestLostServer(t *testing.T) {
	hello, _ := json.Marshal(map[string]any{"method": "dp-als", "config": map[string]string{"secagg": "masked"}, "aggregation": "masked",
		"catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	for _, tc := range []struct {
		name string
		tr   silentTransport
		lost bool
	}{
		{"network fails", silentTransport{}, true},
		{"a proxy answers 502", silentTransport{502, "<html>bad gateway</html>"}, true},
		{"the server says not yet", silentTransport{503, `{"code":"unavailable","message":"round 3 is not open yet"}`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := webclient.New(tc.tr, hello)
			if err != nil {
				t.Fatal(err)
			}
			c.LostAfter = 300 * time.Millisecond
			c.SetCredential("7.secret-secret-secret")
			if err := c.Remember(nil, &memStore{}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var silent int
			_, err = c.Train(ctx, []webclient.Rating{{Item: 0, Value: 4}}, 10, nil, func(s webclient.Status) {
				if s.Unreachable {
					silent++
				}
			})
			switch {
			case tc.lost && !errors.Is(err, webclient.ErrLost):
				t.Errorf("Train: %v, want ErrLost", err)
			case tc.lost && silent == 0:
				t.Error("no status said the server does not answer")
			case !tc.lost && (errors.Is(err, webclient.ErrLost) || ctx.Err() == nil || silent != 0):
				t.Errorf("Train: %v after %d silent statuses; want it still waiting at the deadline", err, silent)
			}
		})
	}
}

// sortedInts32 returns xs as sorted int32s.
func sortedInts32(xs []int) []int32 {
	out := make([]int32, len(xs))
	for k, x := range xs {
		out[k] = int32(x)
	}
	slices.Sort(out)
	return out
}
