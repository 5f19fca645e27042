package webclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
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

// TestConfigMatchesRegistry: the page's parser of dp-als's plan reads
// every field of the method registry's list as method.Configure does.
func TestConfigMatchesRegistry(t *testing.T) {
	for _, name := range []string{"dp-als", "dp-biases"} {
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
		want["eps"], want["delta"], want["bias-rounds"], want["reg-user"] = "2.5", "1e-7", "3", "7"
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
		got := c.Config()
		if !reflect.DeepEqual(&got, typed.(*dpals.Config)) {
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

// recorder keeps every request body the server received, by credential.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	path, auth string
	body       []byte
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		body, _ := io.ReadAll(q.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{q.URL.Path, q.Header.Get("Authorization"), body})
		r.mu.Unlock()
		q.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, q)
	})
}

// Run is a served dp-als run, masked, over ml-latest-small's catalog,
// with simulated Go clients; tests add one browser-like client with a
// one-time code.
type Run struct {
	URL   string
	Code  string
	Rec   *recorder
	Srv   *deploy.Server
	Train *ratings.Dataset
	done  chan error
}

func startRun(t *testing.T, sim int) *Run {
	t.Helper()
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{Catalog: true})
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for k, u := range d.Users {
		if int(u) < sim {
			idx = append(idx, k)
		}
	}
	train := d.Subset(idx)
	spec, err := method.Lookup("dp-als")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := spec.Configure(map[string]string{"secagg": "masked", "bias-rounds": "2", "init-items": "20"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	codes, err := deploy.IssueCodes(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := deploy.NewServer(deploy.ServerConfig{Method: "dp-als", Config: cfg, StateDir: dir, Token: "tok-0123456789abcdef",
		Catalog:    deploy.Catalog{ItemIDs: d.ItemIDs, Titles: d.ItemTitles, Scale: d.Scale},
		MinClients: sim + 1, EnrollQuiet: 300 * time.Millisecond, RoundTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rec := &recorder{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &http.Server{Handler: rec.wrap(srv.Mux(nil))}
	go hs.Serve(ln)
	r := &Run{URL: "http://" + ln.Addr().String(), Code: codes[0], Rec: rec, Srv: srv, Train: train, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); hs.Close() })

	// The simulated clients enrol first (ids 0..sim-1), then wait for
	// the browser.
	sess, err := deploy.Dial(ctx, deploy.ClientConfig{URL: r.URL, Token: "tok-0123456789abcdef", Retry: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cls, err := spec.NewClients(cfg, train, 1)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := sess.Run(ctx, cls.List)
		if err != nil && ctx.Err() == nil {
			t.Errorf("simulated clients: %v", err)
		}
	}()
	for deadline := time.Now().Add(time.Minute); srv.Parties() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the simulated clients did not enrol")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// Wait waits for the server's run to end.
func (r *Run) Wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the run did not end")
	}
}

// CheckNoRatings asserts that nothing the client with credential prefix
// sent carries a rating or its rated-item list: no Upload with a
// payload, and no SecAgg step but keys, shares, checks, masked vectors
// and reveals.
func (r *Run) CheckNoRatings(t *testing.T, cred string, rated []int) (calls int) {
	t.Helper()
	r.Rec.mu.Lock()
	defer r.Rec.mu.Unlock()
	for _, q := range r.Rec.reqs {
		browserEnrol := strings.HasSuffix(q.path, "/Enroll") && bytes.HasPrefix(q.body, []byte("{")) // the Go clients send protobuf
		if q.auth != "Bearer "+cred && !browserEnrol {
			continue
		}
		calls++
		var m map[string]json.RawMessage
		if err := json.Unmarshal(q.body, &m); err != nil {
			t.Fatalf("%s: a body that is not JSON: %v", q.path, err)
		}
		proc := q.path[strings.LastIndex(q.path, "/")+1:]
		allowed := map[string][]string{
			"Hello": {}, "GetRound": {"after", "boot", "session"}, "GetModel": {}, "Upload": {"round", "meta"},
			"Enroll": {"code", "secrets"},
			"SecAgg": {"round", "session", "keys", "shares", "check", "masked", "reveal"},
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
// dp-als run over ml-latest-small's catalog with simulated clients,
// answers every round through secure aggregation only, and gets
// recommendations that leave out what it rated.
func TestClientJoinsMaskedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a served run: skipped in -short")
	}
	r := startRun(t, 12)
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
	res, err := c.Train(ctx, rs, 10, func(e webclient.Event) { evs = append(evs, e) })
	if err != nil {
		t.Fatalf("%v; rounds seen: %+v", err, evs)
	}
	r.Wait(t)
	masked := 0
	for _, e := range evs {
		if e.Err != "" {
			t.Errorf("round %d: %s", e.Round, e.Err)
		}
		if e.Masked {
			masked++
		}
	}
	if masked < 3 || c.Sent().MaskedRounds != masked {
		t.Fatalf("%d masked rounds answered, %d masked vectors sent: %+v", masked, c.Sent().MaskedRounds, evs)
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
	if !(res.EpsTotal > 0 && res.EpsTotal <= c.Config().Eps*1.0001) {
		t.Errorf("ε %v published, the config's %v", res.EpsTotal, c.Config().Eps)
	}
	if n := r.CheckNoRatings(t, cred, rated); n < 5*masked {
		t.Errorf("%d calls recorded for %d masked rounds", n, masked)
	}
}
