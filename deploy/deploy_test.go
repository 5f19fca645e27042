package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

const testToken = "test-token"

// testData returns the train and test parts of a small real dataset: the
// embedded ml-latest-small, cut to its first users so that a run takes
// well under a second.
func testData(t testing.TB, users int) (*ratings.Dataset, ratings.Split) {
	t.Helper()
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keep []int
	for k, u := range d.Users {
		if int(u) < users {
			keep = append(keep, k)
		}
	}
	d = d.Subset(keep)
	// Only the kept users exist: a client per user index would enrol
	// every user of the file, most with nothing to train (and, for
	// LDP-OP's Basic, each with a dense upload over every item).
	d.UserIDs = d.UserIDs[:min(users, len(d.UserIDs))]
	sp, err := ratings.ParseSplit("random:0.9")
	if err != nil {
		t.Fatal(err)
	}
	splits, err := sp.Apply(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d, splits[0]
}

// configure returns method name's config with the given text params.
func configure(t testing.TB, name string, params map[string]string) (method.Spec, any) {
	t.Helper()
	spec, err := method.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := spec.Configure(params)
	if err != nil {
		t.Fatal(err)
	}
	return spec, cfg
}

// harness is a server on loopback with dev TLS, and what clients need to
// reach it.
type harness struct {
	srv    *Server
	url    string
	ca     string
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func quietLog() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("PRIVREC_DEPLOY_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// startServer serves cfg on 127.0.0.1 in dir until the test ends.
func startServer(t testing.TB, cfg ServerConfig, addr string) *harness {
	t.Helper()
	return startServerAt(t, cfg, addr, nil)
}

// startServerWith also serves g's metrics.
func startServerWith(t testing.TB, cfg ServerConfig, g prometheus.Gatherer) *harness {
	t.Helper()
	return startServerAt(t, cfg, "127.0.0.1:0", g)
}

func startServerAt(t testing.TB, cfg ServerConfig, addr string, g prometheus.Gatherer) *harness {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLog()
	}
	if cfg.EnrollQuiet == 0 {
		cfg.EnrollQuiet = 100 * time.Millisecond
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ServerTLS("", "", true, cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{srv: srv, url: "https://" + ln.Addr().String(), ca: filepath.Join(cfg.StateDir, "tls", "cert.pem"),
		dir: cfg.StateDir, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ctx, ln, tc, g, 0)
		if err != nil && ctx.Err() == nil {
			t.Logf("server stopped: %v", err)
		}
		h.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-h.done
		srv.Close()
	})
	return h
}

// dial connects a vendor client. It accepts the ideal functionality
// ("sum") that the bit-exact comparisons run under (Insecure): the
// policy that refuses it is tested on its own (TestAggregationPolicy).
func (h *harness) dial(t testing.TB, seeded bool, seed uint64) *Session {
	t.Helper()
	return h.dialWith(t, seeded, seed, nil)
}

// dialWith is dial with a progress callback.
func (h *harness) dialWith(t testing.TB, seeded bool, seed uint64, progress func(Progress)) *Session {
	t.Helper()
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: seeded, Seed: seed, Insecure: true,
		Logger: quietLog(), Retry: 30 * time.Second, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func catalogOf(d *ratings.Dataset) Catalog {
	return Catalog{ItemIDs: d.ItemIDs, Titles: d.ItemTitles, Scale: d.Scale, Side: d.Side}
}

// federatedCases are the methods the loopback tests run, small: every
// method with a client/server protocol (TestEveryFederatedMethodCovered).
var federatedCases = []struct {
	name   string
	params map[string]string
}{
	{"hdpmf", map[string]string{"epochs": "6"}},
	{"dpmf", map[string]string{"epochs": "4"}},
	{"ldp-op", map[string]string{"epochs": "6"}},
	{"sdmf", map[string]string{"epochs": "4"}},
	{"pdpmf", map[string]string{"epochs": "3"}},
	{"ldp-op-basic", map[string]string{"epochs": "3"}},
	{"rsmf", map[string]string{"epochs": "3"}},
	{"sgld-mf", map[string]string{"epochs": "2"}},
	{"sdmf-alpha-inf", map[string]string{"epochs": "2"}},
	{"bpr-sgld", map[string]string{"epochs": "2"}},
	{"sd-bprmf", map[string]string{"epochs": "2"}},
	{"isgld", map[string]string{"epochs": "2"}},
	{"sd-fm", map[string]string{"epochs": "2", "features": "items"}},
	{"dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "1", "init-items": "10"}},
	{"dp-biases", map[string]string{"bias-rounds": "2"}},
	{"dp-ease", map[string]string{"secagg": "masked", "seeded": "true", "top-items": "20", "eps": "5", "roster": "60"}},
}

// TestLoopbackEqualsInProcess: for a fixed seed in test mode, the final V
// and the test error over loopback equal the in-process run's, bit for
// bit: the same server and client code with the transport swapped.
func TestLoopbackEqualsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: every served method over TLS loopback (46 s); go test without -short runs it")
	}
	d, spl := testData(t, 60)
	const seed = 7
	for _, tc := range federatedCases {
		t.Run(tc.name, func(t *testing.T) {
			spec, cfg := configure(t, tc.name, tc.params)
			// Test mode in process too: methods with secret noise
			// (dp-als) draw it from the seed only then.
			want, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			h := startServer(t, ServerConfig{Method: served(tc.name), Config: cfg, Seed: seed, TestMode: true,
				Catalog: catalogOf(d), StateDir: t.TempDir(), Metrics: NewMetrics(reg)}, "127.0.0.1:0")
			var seen []Progress
			sess := h.dialWith(t, true, seed, func(p Progress) { seen = append(seen, p) })
			got, res := runClients(t, sess, spl.Train, seed)
			if res == nil {
				t.Fatal("no result")
			}
			if d := firstDiff(got.V, want.V); d >= 0 {
				t.Fatalf("V[%d] = %v over loopback, %v in process", d, got.V[d], want.V[d])
			}
			e1, e2 := eval.Rating(got, spl.Test), eval.Rating(want, spl.Test)
			if e1.RMSE != e2.RMSE {
				t.Fatalf("test RMSE %v over loopback, %v in process", e1.RMSE, e2.RMSE)
			}
			led, err := h.srv.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			for k, e := range led {
				if e.Round != k || e.Participants != e.Enrolled {
					t.Fatalf("ledger entry %d: %+v", k, e)
				}
				if e.Phase == "train" && e.Coverage != 0 && e.Coverage != 1 {
					t.Fatalf("round %d: noise coverage %v with every client answering", k, e.Coverage)
				}
			}
			onePrivacyFigure(t, tc.name, led, reg, res)
			pub, err := model.ReadModel(bytes.NewReader(h.srv.Model()))
			if err != nil {
				t.Fatal(err)
			}
			if pub.Privacy.EpsTotal != led[len(led)-1].EpsTotal || pub.Privacy.Delta != led[len(led)-1].Delta {
				t.Errorf("the published model's privacy %+v; the ledger's total %v at %v", pub.Privacy, led[len(led)-1].EpsTotal, led[len(led)-1].Delta)
			}
			// The client's progress shows the ledger's total before each
			// round: the last round (the final one) opened after every
			// training round was folded.
			if len(seen) != len(led) || seen[len(seen)-1].EpsTotal != led[len(led)-2].EpsTotal {
				t.Errorf("progress: %d rounds, the last with ε %v; the ledger has %d rounds, %v before the last",
					len(seen), seen[len(seen)-1].EpsTotal, len(led), led[len(led)-2].EpsTotal)
			}
		})
	}
}

// onePrivacyFigure checks that the ledger's total ε and δ, the /metrics
// gauge and the clients' own report agree for a run where every client
// answered every round, and that every round of a private method that
// released something carries its ε.
func onePrivacyFigure(t *testing.T, name string, led []LedgerEntry, reg *prometheus.Registry, res *method.Result) {
	t.Helper()
	last := led[len(led)-1]
	want, delta := res.Privacy.EpsTotal, res.Privacy.Delta
	if math.IsInf(want, 1) { // no finite ε against the server: the ledger's -1
		if last.EpsTotal != -1 || !math.IsInf(gauge(t, reg, "privrec_epsilon_spent"), 1) {
			t.Errorf("%s: the clients' report has no finite ε; the ledger says %v", name, last.EpsTotal)
		}
		return
	}
	switch name {
	case "dpmf", "pdpmf":
		// Their noise is calibrated on the clients' data (the rating
		// groups' shares), which the server never sees: the ledger counts
		// a rating of weight 1, the largest any rating spends, and the
		// clients' report what their data set, which is at most that. On
		// the integer path even μ is set by the clients' data: the ledger
		// accounts nothing (0).
		if !(want > 0) || last.EpsTotal != 0 && (last.EpsTotal < want || last.Delta != delta) {
			t.Errorf("%s: ledger ε %v at δ %v in total, below the clients' report %v at %v", name, last.EpsTotal, last.Delta, want, delta)
		}
		want = last.EpsTotal
	default:
		if math.Abs(last.EpsTotal-want) > 1e-9*math.Max(1, want) || last.Delta != delta {
			t.Errorf("%s: ledger ε %v at δ %v in total; the clients' report %v at %v", name, last.EpsTotal, last.Delta, want, delta)
		}
	}
	if g := gauge(t, reg, "privrec_epsilon_spent"); g != last.EpsTotal {
		t.Errorf("%s: /metrics privrec_epsilon_spent %v, the ledger's total %v", name, g, last.EpsTotal)
	}
	if want > 0 {
		for _, e := range led {
			if e.Phase == protocol.PhaseTrain && e.Eps <= 0 {
				t.Errorf("%s: training round %d carries ε %v", name, e.Round, e.Eps)
			}
		}
	}
	t.Logf("%s: ε in total %v at δ %v (ledger, /metrics and the clients' report)", name, last.EpsTotal, last.Delta)
	if t.Failed() {
		for _, e := range led {
			t.Logf("%+v", e)
		}
	}
}

// TestLoopbackML100K: the same on ML-100K (PRIVREC_DATA) for HDPMF,
// LDP-OP and SDMF at their default sizes, a few rounds each.
func TestLoopbackML100K(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if os.Getenv("PRIVREC_DATA") == "" {
		t.Skip("PRIVREC_DATA is not set: the ML-100K loopback test needs ml-100k")
	}
	d, _, err := datasets.Open("ml-100k", ratings.LoadOptions{})
	if err != nil {
		t.Skipf("ml-100k: %v", err)
	}
	sp, _ := ratings.ParseSplit("random:0.9")
	splits, err := sp.Apply(d, 3)
	if err != nil {
		t.Fatal(err)
	}
	spl := splits[0]
	for _, name := range []string{"hdpmf", "ldp-op", "sdmf"} {
		t.Run(name, func(t *testing.T) {
			spec, cfg := configure(t, name, map[string]string{"epochs": "5"})
			want, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := startServer(t, ServerConfig{Method: served(name), Config: cfg, Seed: 3, TestMode: true,
				Catalog: catalogOf(d), StateDir: t.TempDir()}, "127.0.0.1:0")
			got, _ := runClients(t, h.dial(t, true, 3), spl.Train, 3)
			if k := firstDiff(got.V, want.V); k >= 0 {
				t.Fatalf("V[%d] = %v over loopback, %v in process", k, got.V[k], want.V[k])
			}
			t.Logf("%s: V bit-identical over loopback (%d values), test RMSE %.4f", name, len(got.V), eval.Rating(got, spl.Test).RMSE)
		})
	}
}

// TestEveryFederatedMethodCovered: the loopback test runs every method
// of the registry that has a client/server protocol.
func TestEveryFederatedMethodCovered(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range federatedCases {
		covered[c.name] = true
	}
	for _, s := range method.All() {
		if s.Federated != nil && !covered[s.Name] {
			t.Errorf("%s has a client/server protocol and no loopback test", s.Name)
		}
	}
}

// runClients builds the clients of train from the session's plan, runs
// them and returns the gathered model.
func runClients(t testing.TB, sess *Session, train *ratings.Dataset, seed uint64) (*model.Model, *method.Result) {
	t.Helper()
	spec, cfg := specOf(t, sess)
	cls, err := spec.NewClients(cfg, train, seed)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pub, err := sess.Run(ctx, cls.List)
	if err != nil {
		t.Fatal(err)
	}
	m, res, err := cls.Finish(pub.V)
	if err != nil {
		t.Fatal(err)
	}
	return m, res
}

func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for k := range a {
		if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
			return k
		}
	}
	return -1
}

// TestSeededUploadRefused: a server not in test mode refuses uploads drawn
// from seeded streams, and a seeded client refuses such a server.
func TestSeededUploadRefused(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir()}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: 1, Logger: quietLog()})
	if err == nil {
		t.Fatal("a seeded client accepted a server not in test mode")
	}
}

// TestStateMismatch: a state directory made for one run refuses another.
func TestStateMismatch(t *testing.T) {
	d, _ := testData(t, 20)
	dir := t.TempDir()
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	s, err := NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: dir, Token: "x", Seed: 1, TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, cfg2 := configure(t, "hdpmf", map[string]string{"epochs": "3"})
	_, err = NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg2, Catalog: catalogOf(d), StateDir: dir, Token: "x", Seed: 1, TestMode: true})
	if !errors.Is(err, ErrState) {
		t.Fatalf("err = %v, want ErrState", err)
	}
}

// TestEnrolIdempotent: the server assigns client IDs, consecutive in the
// order of a call's secrets; a device enrolled with a code before a
// vendor does not collide with it (before, the device got ID 0 and the
// vendor, asking for 0, 1, ..., was refused "client id 0 is already
// enrolled"); a retry with the same secrets gets the same IDs, and any
// other reuse of a secret is refused.
func TestEnrolIdempotent(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	dir := t.TempDir()
	codes, err := IssueCodes(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 1, TestMode: true, Catalog: catalogOf(d),
		StateDir: dir, MinClients: 4}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	api := federationv1connect.NewFederationServiceClient(hc, h.url)
	ctx := context.Background()
	enrol := func(req *fedv1.EnrollRequest) ([]uint32, connect.Code) {
		resp, err := api.Enroll(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, connect.CodeOf(err)
		}
		var ids []uint32
		for k, c := range resp.Msg.GetCredentials() {
			ids = append(ids, c.GetClientId())
			if len(req.Secrets) > 0 && c.GetToken() != fmt.Sprintf("%d.%s", c.GetClientId(), req.Secrets[k]) {
				t.Errorf("credential %q for client %d with secret %q", c.GetToken(), c.GetClientId(), req.Secrets[k])
			}
		}
		return ids, 0
	}
	sec := []string{"aaaaaaaaaaaaaaaa1", "bbbbbbbbbbbbbbbb2"}
	for _, tc := range []struct {
		name string
		req  *fedv1.EnrollRequest
		want connect.Code
		ids  []uint32
	}{
		{"device first", &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{"device-secret-0001"}}, 0, []uint32{0}},
		{"vendor", &fedv1.EnrollRequest{Token: testToken, Secrets: sec}, 0, []uint32{1, 2}},
		{"retry", &fedv1.EnrollRequest{Token: testToken, Secrets: sec}, 0, []uint32{1, 2}},
		{"device retry", &fedv1.EnrollRequest{Code: codes[0], Secrets: []string{"device-secret-0001"}}, 0, []uint32{0}},
		{"half a retry", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{sec[0], "cccccccccccccccc3"}}, connect.CodeAlreadyExists, nil},
		{"wrong token", &fedv1.EnrollRequest{Token: "nope", Secrets: []string{"dddddddddddddddd4"}}, connect.CodeUnauthenticated, nil},
		{"short secret", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{"short"}}, connect.CodeInvalidArgument, nil},
		{"secret twice", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{"eeeeeeeeeeeeeeee5", "eeeeeeeeeeeeeeee5"}}, connect.CodeInvalidArgument, nil},
		{"third", &fedv1.EnrollRequest{Token: testToken, Secrets: []string{"ffffffffffffffff6"}}, 0, []uint32{3}},
	} {
		ids, code := enrol(tc.req)
		if code != tc.want || !slices.Equal(ids, tc.ids) {
			t.Errorf("%s: ids %v, code %v; want %v, %v", tc.name, ids, code, tc.ids, tc.want)
		}
	}
	// Four clients and a quiet spell start the run; then only retries pass.
	for k := 0; ; k++ {
		r, err := api.Hello(ctx, connect.NewRequest(&fedv1.HelloRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if r.Msg.GetState() == fedv1.RunState_RUN_STATE_RUNNING {
			break
		}
		if k == 100 {
			t.Fatal("the run did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ids, code := enrol(&fedv1.EnrollRequest{Token: testToken, Secrets: sec}); code != 0 || !slices.Equal(ids, []uint32{1, 2}) {
		t.Errorf("retry after the start: ids %v, code %v", ids, code)
	}
	if _, code := enrol(&fedv1.EnrollRequest{Token: testToken, Secrets: []string{"gggggggggggggggg7"}}); code != connect.CodeFailedPrecondition {
		t.Errorf("new client after the start: code %v, want failed_precondition", code)
	}
}

// TestOperations: /healthz answers, /metrics counts a refused upload by
// its reason, and a server not in test mode refuses an upload drawn from
// seeded streams.
func TestOperations(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	reg := prometheus.NewRegistry()
	h := startServerWith(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
		MinClients: 5, Metrics: NewMetrics(reg)}, reg)
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	api := federationv1connect.NewFederationServiceClient(hc, h.url)
	ctx := context.Background()
	resp, err := api.Enroll(ctx, connect.NewRequest(&fedv1.EnrollRequest{Token: testToken,
		Secrets: []string{"0123456789abcdef0"}}))
	if err != nil {
		t.Fatal(err)
	}
	cred := resp.Msg.GetCredentials()[0].GetToken()
	_, err = api.Upload(ctx, withCred(&fedv1.UploadRequest{Round: 0, Meta: &fedv1.UploadMeta{Seeded: true}}, cred))
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("seeded upload to a server not in test mode: %v, want permission_denied", err)
	}
	get := func(path string) string {
		r, err := hc.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 {
			t.Fatalf("%s: %s", path, r.Status)
		}
		return string(b)
	}
	if got := get("/healthz"); !strings.HasPrefix(got, "ok RUN_STATE_ENROLLING") {
		t.Errorf("/healthz: %q", got)
	}
	m := get("/metrics")
	for _, want := range []string{`privrec_uploads_total{reason="seeded",result="rejected"} 1`, "privrec_clients_enrolled 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// smallCatalog returns ml-latest-small cut to its first users and items,
// index spaces included, so that a masked round's dense vectors are small.
func smallCatalog(t testing.TB, users, items int) (*ratings.Dataset, ratings.Split) {
	t.Helper()
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Past the dataset's 610 users, users repeat the first ones' ratings
	// under new IDs.
	n := d.NumUsers()
	c := &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: d.UserIDs[:min(users, n)], ItemIDs: d.ItemIDs[:items],
		ItemTitles: d.ItemTitles[:items]}
	for u := n; u < users; u++ {
		c.UserIDs = append(c.UserIDs, fmt.Sprintf("copy%d-%s", u/n, d.UserIDs[u%n]))
	}
	for copyOf := 0; copyOf*n < users; copyOf++ {
		for k := range d.Values {
			u := copyOf*n + int(d.Users[k])
			if u < users && int(d.Items[k]) < items {
				c.Users = append(c.Users, int32(u))
				c.Items = append(c.Items, d.Items[k])
				c.Values = append(c.Values, d.Values[k])
			}
		}
	}
	sp, _ := ratings.ParseSplit("random:0.9")
	splits, err := sp.Apply(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c, splits[0]
}

// TestMaskedOverTheNetwork: HDPMF, PDPMF and LDP-OP with secagg=masked over TLS
// loopback, each round's uploads aggregated by the SecAgg+ protocol
// between the clients and the server (keys, encrypted shares, masked
// vectors, unmasking), give V bit-identical to the in-process run, which
// adds the integer vectors directly: the server learns the same sum and
// nothing else. With 20% of the clients dropping out of every training
// round, the survivors' sum is still unmasked and the run completes.
func TestMaskedOverTheNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: masked runs over TLS loopback (52 s); go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	for _, name := range []string{"hdpmf", "pdpmf", "ldp-op"} {
		t.Run(name, func(t *testing.T) {
			params := map[string]string{"epochs": "3", "secagg": "masked"}
			if name == "ldp-op" {
				params["per-round"] = "40"
			}
			spec, cfg := configure(t, name, params)
			want, res, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, 4, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Privacy.Aggregation != "masked" || res.Privacy.Noise != "skellam" {
				t.Fatalf("privacy %+v", res.Privacy)
			}
			reg := prometheus.NewRegistry()
			h := startServer(t, ServerConfig{Method: served(name), Config: cfg, Seed: 4, TestMode: true,
				Catalog: catalogOf(d), StateDir: t.TempDir(), Metrics: NewMetrics(reg)}, "127.0.0.1:0")
			got, _ := runClients(t, h.dial(t, true, 4), spl.Train, 4)
			led, err := h.srv.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			if k := firstDiff(got.V, want.V); k >= 0 {
				// Say which rounds lost a client (a step closed at its
				// deadline) or were skipped: the in-process run lost none.
				for _, e := range led {
					if e.Participants != e.Enrolled || e.Skipped != "" {
						t.Logf("round %d (%s): %d of %d clients took part; skipped: %q", e.Round, e.Phase, e.Participants, e.Enrolled, e.Skipped)
					}
				}
				t.Fatalf("V[%d] = %v over the network, %v in process", k, got.V[k], want.V[k])
			}
			// One privacy figure: the ledger's running total by the
			// method's accountant equals what the run reports.
			onePrivacyFigure(t, name, led, reg, res)
			for _, e := range led {
				if e.Phase == "train" && e.Coverage != 1 {
					t.Errorf("round %d: noise coverage %v with every client answering", e.Round, e.Coverage)
				}
				exact := name != "hdpmf" || math.Abs(e.Eps-res.Privacy.EpsRound) <= 1e-9*res.Privacy.EpsRound
				if name != "pdpmf" && e.Phase == "train" && (!exact || !(e.Eps > 0 && e.Eps <= res.Privacy.EpsRound*(1+1e-9))) {
					t.Errorf("round %d: ledger ε %v, the run's per-round ε %v", e.Round, e.Eps, res.Privacy.EpsRound)
				}
			}
		})
	}
	for _, name := range []string{"hdpmf", "ldp-op", "dp-als"} {
		t.Run("dropouts/"+name, func(t *testing.T) { maskedDropouts(t, name, d, spl) })
	}
}

// maskedDropouts runs method name masked with 20% of the clients dropping
// out of every round and checks the ledger reads the noise that arrived.
func maskedDropouts(t *testing.T, name string, d *ratings.Dataset, spl ratings.Split) {
	params := map[string]string{"epochs": "3", "secagg": "masked"}
	if name == "dp-als" {
		params = map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "1", "init-items": "10"}
	}
	_, cfg := configure(t, name, params)
	h := startServer(t, ServerConfig{Method: served(name), Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 2 * time.Second, MinParticipants: 0.7}, "127.0.0.1:0")
	sess := h.dial(t, true, 4)
	sess.cfg.Dropout = 0.2
	m, _ := runClients(t, sess, spl.Train, 4)
	if rmse := eval.Rating(m, spl.Test).RMSE; math.IsNaN(rmse) {
		t.Fatal("no model")
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, e := range led {
		if e.Phase != "train" {
			continue
		}
		if e.Skipped != "" {
			// Below the floor of 70% (a loaded machine can make clients
			// miss a step): nothing released, nothing to read.
			t.Logf("round %d skipped: %s", e.Round, e.Skipped)
			continue
		}
		released++
		if e.Participants == e.Enrolled || float64(e.Participants) < 0.7*float64(e.Enrolled) {
			t.Errorf("round %d: %d of %d took part with 20%% dropping out and a floor of 70%%", e.Round, e.Participants, e.Enrolled)
		}
		// The ledger reads the noise that arrived off the sum.
		if !(e.Coverage > 0) || e.Eps == 0 {
			t.Errorf("round %d: noise coverage %v, ε %v", e.Round, e.Coverage, e.Eps)
		}
		t.Logf("round %d: %d of %d clients, noise coverage %.3f, ε of the round alone %.3g", e.Round, e.Participants, e.Enrolled, e.Coverage, e.Eps)
	}
	if released == 0 {
		t.Error("no training round released")
	}
}

// gauge returns the value of the gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestDenseScalarsFitTheCap: dp-als's float path uploads its statistics
// as dense Scalars (without a shared Gramian, a factor round's are
// NumItems × (K+1)(K+2)/2 + NumItems × (K+1) doubles: 112 KB here, above
// what an Upload's rows alone allow); the round announces them
// (protocol.ParamScalars), the HTTP cap counts them, and the run over
// loopback equals the in-process one. Before, every factor-round upload
// was refused as oversized.
func TestDenseScalarsFitTheCap(t *testing.T) {
	d, spl := smallCatalog(t, 30, 400)
	const seed = 5
	spec, cfg := configure(t, "dp-als", map[string]string{"secagg": "ideal", "dim": "6", "rounds": "1",
		"shared-gram": "false", "bias-rounds": "1", "init-items": "10", "eps": "10"})
	want, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := startServer(t, ServerConfig{Method: served("dp-als"), Config: cfg, Seed: seed, TestMode: true,
		Catalog: catalogOf(d), StateDir: t.TempDir(), Metrics: NewMetrics(reg)}, "127.0.0.1:0")
	got, _ := runClients(t, h.dial(t, true, seed), spl.Train, seed)
	if k := firstDiff(got.V, want.V); k >= 0 {
		t.Fatalf("V[%d] = %v over loopback, %v in process", k, got.V[k], want.V[k])
	}
	if n := counterWith(t, reg, "privrec_uploads_total", "reason", "size"); n != 0 {
		t.Errorf("%v uploads refused as oversized", n)
	}
}

// counterWith returns the value of counter name's series whose label has
// value v (0 if none).
func counterWith(t *testing.T, reg *prometheus.Registry, name, label, v string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == v {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// served returns the registered method name as deploy serves it.
func served(name string) protocol.Method {
	m, err := method.Protocol(name)
	if err != nil {
		panic(err)
	}
	return m
}

// specOf returns the registry's Spec of the method the session's server
// runs, and the session's typed configuration of it.
func specOf(t testing.TB, sess *Session) (method.Spec, any) {
	t.Helper()
	m, cfg, err := sess.Method()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := method.Lookup(m.Name())
	if err != nil {
		t.Fatal(err)
	}
	return spec, cfg
}
