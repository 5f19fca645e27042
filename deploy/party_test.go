package deploy

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/secagg"
)

// partyRun is a served run with the users split among parties, each one
// secure-aggregation party (ClientConfig.OneParty).
type partyRun struct {
	got, want *model.Model
	led       []LedgerEntry
	train     *ratings.Dataset
	test      *ratings.Dataset
	took      time.Duration
}

// partySetup is what runParties varies: the server's and the parties'
// configuration beyond the run's method.
type partySetup struct {
	parties int
	server  func(*ServerConfig)
	client  func(k int, c *ClientConfig)
	// cuts, when set, are the parties' first users (cuts[0] = 0); nil
	// splits the users evenly.
	cuts []int
	// lie, when set, gives party k's red-team hook (Session.lie).
	lie func(k int) func(id uint32, c *secagg.Client, m secagg.Message) secagg.Message
}

// runParties runs method name with params in process and served over TLS
// on 127.0.0.1, the users of spl.Train split into contiguous parts among
// the parties, every party one client of the server, in the seeded test
// mode; it returns both models and the ledger.
func runParties(t testing.TB, d *ratings.Dataset, spl ratings.Split, name string, params map[string]string, seed uint64, ps partySetup) partyRun {
	t.Helper()
	spec, cfg := configure(t, name, params)
	want, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	cls, err := spec.NewClients(cfg, spl.Train, seed)
	if err != nil {
		t.Fatal(err)
	}
	n := len(cls.List)
	scfg := ServerConfig{Method: served(name), Config: cfg, Seed: seed, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), MinClients: n, RoundTimeout: time.Minute}
	if ps.server != nil {
		ps.server(&scfg)
	}
	h := startServer(t, scfg, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	began := time.Now()
	pubs := make([]*model.Model, ps.parties)
	errs := make(chan error, ps.parties)
	for k := range ps.parties {
		lo, hi := k*n/ps.parties, (k+1)*n/ps.parties
		if ps.cuts != nil {
			lo, hi = ps.cuts[k], n
			if k+1 < len(ps.cuts) {
				hi = ps.cuts[k+1]
			}
		}
		part := cls.List[lo:hi]
		c := ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: seed,
			Insecure: true, OneParty: true, Logger: quietLog(), Retry: time.Minute, Workers: 8}
		if ps.client != nil {
			ps.client(k, &c)
		}
		go func() {
			sess, err := Dial(ctx, c)
			if err == nil && ps.lie != nil {
				sess.lie = ps.lie(k)
			}
			if err == nil {
				pubs[k], err = sess.Run(ctx, part)
			}
			if err != nil {
				err = fmt.Errorf("party %d: %w", k, err)
			}
			errs <- err
		}()
	}
	for range ps.parties {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	got, _, err := cls.Finish(pubs[0].V)
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range pubs[1:] {
		if d := firstDiff(p.V, pubs[0].V); d >= 0 {
			t.Fatalf("party %d got another published model than party 0 (V[%d])", k+1, d)
		}
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	return partyRun{got: got, want: want, led: led, train: spl.Train, test: spl.Test, took: took}
}

// partyParams is a small dp-als run on the integer path.
var partyParams = map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "2", "init-items": "20"}

// TestPartiesEqualInProcess: ml-latest-small's users split among 3
// vendors, each one secure-aggregation party that sends the sum of its
// users' vectors (--one-party), masked rounds of the honest-but-curious
// protocol over TLS: the published V is bit for bit the in-process run's
// and so is the test RMSE, and the ledger counts users, not parties.
func TestPartiesEqualInProcess(t *testing.T) {
	d, spl := testData(t, 1<<30)
	const seed = 11
	r := runParties(t, d, spl, "dp-als", partyParams, seed, partySetup{parties: 3})
	if k := firstDiff(r.got.V, r.want.V); k >= 0 {
		t.Fatalf("V[%d] = %v served by 3 parties, %v in process", k, r.got.V[k], r.want.V[k])
	}
	e1, e2 := eval.Rating(r.got, r.test), eval.Rating(r.want, r.test)
	if math.Abs(e1.RMSE-e2.RMSE) > 1e-9 {
		t.Fatalf("test RMSE %v served by 3 parties, %v in process", e1.RMSE, e2.RMSE)
	}
	users := r.train.NumUsers()
	for _, e := range r.led {
		if e.Enrolled != users || e.Participants != users || e.Parties != 3 {
			t.Errorf("round %d (%s): enrolled %d, participants %d, parties %d; want %d users of 3 parties", e.Round, e.Phase, e.Enrolled, e.Participants, e.Parties, users)
		}
		if e.Phase != "final" && (e.Uploads != users || e.Skipped != "" || e.Refused != "") {
			t.Errorf("round %d (%s): %d users' vectors in the sum, skipped %q, refused %q", e.Round, e.Phase, e.Uploads, e.Skipped, e.Refused)
		}
	}
	t.Logf("%d users, 3 parties, %d rounds in %v; test RMSE %.6f", users, len(r.led), r.took.Round(time.Millisecond), e1.RMSE)
}

// TestPartiesActive: the same split under secagg's active protocol, each
// party certified by the run's authority as one of a roster of 3 and
// pinning the run's users: every masked round is released with every
// user's vector, and the noise is calibrated by the roster of users.
func TestPartiesActive(t *testing.T) {
	d, spl := testData(t, 1<<30)
	const seed = 12
	_, certifier, _ := ed25519.GenerateKey(crand.Reader)
	pub := certifier.Public().(ed25519.PublicKey)
	users := spl.Train.NumUsers()
	r := runParties(t, d, spl, "dp-als", partyParams, seed, partySetup{parties: 3,
		server: func(c *ServerConfig) {
			c.ActiveSecAgg, c.Authority, c.Run = true, pub, "party-run"
		},
		client: func(_ int, c *ClientConfig) {
			c.Insecure = false
			c.Certifier, c.Authority, c.Run, c.Roster, c.Users = certifier, pub, "party-run", 3, users
		}})
	for _, e := range r.led {
		if e.Phase == "final" {
			continue
		}
		if e.Skipped != "" || e.Refused != "" || e.Uploads != users {
			t.Errorf("round %d (%s): %d users' vectors of %d, skipped %q, refused %q", e.Round, e.Phase, e.Uploads, users, e.Skipped, e.Refused)
		}
		if e.Phase == "train" && (e.Coverage < 1 || !(e.EpsTotal > 0)) {
			t.Errorf("round %d: noise coverage %v, ε total %v; want full coverage and a finite ε", e.Round, e.Coverage, e.EpsTotal)
		}
	}
	e1 := eval.Rating(r.got, r.test)
	if math.IsNaN(e1.RMSE) || e1.RMSE > 2 {
		t.Fatalf("test RMSE %v", e1.RMSE)
	}
	t.Logf("active: %d users, 3 parties, %d rounds in %v; test RMSE %.6f", users, len(r.led), r.took.Round(time.Millisecond), e1.RMSE)
}

// TestPartyEnrolment: a party enrols with the token as one client for
// its users; the weight is durable across a restart; a retry with the
// same secret and users gets the same ID, with other users a refusal;
// a party needs exactly one secret and no code; the cap counts users;
// and a party's plain upload is refused.
func TestPartyEnrolment(t *testing.T) {
	d, _ := smallCatalog(t, 20, 50)
	_, cfg := configure(t, "dp-als", map[string]string{"secagg": "masked"})
	dir := t.TempDir()
	newSrv := func() *Server {
		s, err := NewServer(ServerConfig{Method: served("dp-als"), Config: cfg, Seed: 1, TestMode: true, Catalog: catalogOf(d),
			StateDir: dir, Token: testToken, MaxClients: 100, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newSrv()
	enrol := func(users uint32, code string, secrets ...string) ([]uint32, error) {
		resp, err := s.Enroll(context.Background(), connect.NewRequest(&fedv1.EnrollRequest{Token: testToken, Secrets: secrets, Users: users, Code: code}))
		if err != nil {
			return nil, err
		}
		var ids []uint32
		for _, c := range resp.Msg.GetCredentials() {
			ids = append(ids, c.GetClientId())
		}
		return ids, nil
	}
	a := "party-a-secret-0123456789"
	ids, err := enrol(40, "", a)
	if err != nil || len(ids) != 1 {
		t.Fatalf("party of 40: %v %v", ids, err)
	}
	if _, err := enrol(0, "", "device-secret-0123456789", "device-secret-9876543210"); err != nil {
		t.Fatal(err)
	}
	if got := s.Users(); got != 42 {
		t.Fatalf("Users = %d after a party of 40 and 2 devices, want 42", got)
	}
	hello, err := s.Hello(context.Background(), connect.NewRequest(&fedv1.HelloRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := hello.Msg.GetEnrolled(); got != 42 {
		t.Fatalf("Hello: %d enrolled, want 42 users", got)
	}
	cases := []struct {
		name    string
		users   uint32
		code    string
		secrets []string
		want    string // in the refusal
	}{
		{"retry with other users", 41, "", []string{a}, "enrolled already"},
		{"two secrets", 5, "", []string{"party-b-secret-0123456789", "party-c-secret-0123456789"}, "one secret"},
		{"with a code", 5, "prc1-XXXX", []string{"party-d-secret-0123456789"}, "one device"},
		{"above the cap", 59, "", []string{"party-e-secret-0123456789"}, "at most 100"},
	}
	for _, tc := range cases {
		if _, err := enrol(tc.users, tc.code, tc.secrets...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	if again, err := enrol(40, "", a); err != nil || len(again) != 1 || again[0] != ids[0] {
		t.Fatalf("retry: %v %v, want %v", again, err, ids)
	}
	if _, err := enrol(58, "", "party-f-secret-0123456789"); err != nil {
		t.Fatalf("a party up to the cap: %v", err)
	}
	s.Close()
	s = newSrv()
	defer s.Close()
	if got := s.Users(); got != 100 {
		t.Fatalf("Users = %d after a restart, want 100", got)
	}
	s.mu.Lock()
	w := s.weightOf(ids[0])
	s.mu.Unlock()
	if w != 40 {
		t.Fatalf("party weight %d after a restart, want 40", w)
	}
	// The server in a plain round: a party's non-empty upload is refused.
	s.mu.Lock()
	s.state = fedv1.RunState_RUN_STATE_RUNNING
	s.order = []uint32{ids[0]}
	s.slots = map[uint32]int{ids[0]: 0}
	b := &protocol.Broadcast{Round: 0, Phase: protocol.PhaseTrain, NumItems: len(d.ItemIDs), Params: map[string]float64{protocol.ParamScalars: 1}}
	s.round, s.closed, s.bc, s.open = 0, -1, b, true
	s.ups, s.answered, s.rejected = make([]*protocol.Upload, 1), make([]bool, 1), map[string]int{}
	s.mu.Unlock()
	cred := fmt.Sprintf("%d.%s", ids[0], a)
	_, err = s.Upload(context.Background(), withCred(toWireUpload(0, &protocol.Upload{Round: 0, Scalars: []float64{1}}, true), cred))
	if err == nil || !strings.Contains(err.Error(), "party") {
		t.Fatalf("a party's plain upload: %v, want a refusal naming the party", err)
	}
}

// TestPartiesML1M is the target: ML-1M's 6,040 users split among
// 3 vendors, each one party, dp-als at its defaults on the integer path
// (masked, honest-but-curious protocol, test mode, split random:0.8 with
// seed 1) served over TLS on 127.0.0.1: the published V equals the
// in-process run's bit for bit and the test RMSE to 1e-9. It logs the
// served run's wall time and the process's peak RSS (server, 3 parties
// and the in-process reference together). About a minute of both cores:
// it runs only with PRIVREC_DATA set (the ML-1M files under it) and
// without -short.
func TestPartiesML1M(t *testing.T) {
	if testing.Short() || os.Getenv("PRIVREC_DATA") == "" {
		t.Skip("serves dp-als on ML-1M to 3 parties (about a minute of both cores): set PRIVREC_DATA to the folder holding ml-1m and leave out -short to run")
	}
	d, _, err := datasets.Open("ml-1m", ratings.LoadOptions{})
	if err != nil {
		t.Skipf("ML-1M is not readable under PRIVREC_DATA=%s: %v", os.Getenv("PRIVREC_DATA"), err)
	}
	sp, err := ratings.ParseSplit("random:0.8")
	if err != nil {
		t.Fatal(err)
	}
	splits, err := sp.Apply(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	spl := splits[0]
	r := runParties(t, d, spl, "dp-als", map[string]string{"secagg": "masked"}, 1, partySetup{parties: 3})
	if k := firstDiff(r.got.V, r.want.V); k >= 0 {
		t.Fatalf("V[%d] = %v served by 3 parties, %v in process", k, r.got.V[k], r.want.V[k])
	}
	e1, e2 := eval.Rating(r.got, r.test), eval.Rating(r.want, r.test)
	if math.Abs(e1.RMSE-e2.RMSE) > 1e-9 {
		t.Fatalf("test RMSE %v served by 3 parties, %v in process", e1.RMSE, e2.RMSE)
	}
	users := spl.Train.NumUsers()
	for _, e := range r.led {
		if e.Enrolled != users || e.Participants != users {
			t.Errorf("round %d (%s): enrolled %d, participants %d; want %d users", e.Round, e.Phase, e.Enrolled, e.Participants, users)
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t.Logf("ML-1M: %d users, 3 parties, %d rounds served in %v; test RMSE %.16f served, %.16f in process; peak RSS of the test process %d MB",
		users, len(r.led), r.took.Round(time.Millisecond), e1.RMSE, e2.RMSE, ru.Maxrss/1024)
}

// TestPartyFloorInUsers: 5 parties of 100, 5, 5, 5 and 5 users at a
// floor of 0.5 (60 users). In one training round the party of 100 sends
// no masked vector. Secure aggregation's own floor counts positions (1:
// the party of 100 alone reaches 60) and its threshold (K = 4, T = 2)
// lets the 4 small parties' sum be unmasked, but their vectors hold 20
// users: the round must be skipped, not released with noise shares drawn
// for 60 users of which 20 arrived. Every other round is released with
// all 120 users. (With 3 parties K = T = 2 and no party may drop out at
// all: secure aggregation itself aborts.)
func TestPartyFloorInUsers(t *testing.T) {
	d, spl := testData(t, 120)
	const seed, drop = 13, 3 // the round the big party sits out
	users := spl.Train.NumUsers()
	if users != 120 {
		t.Fatalf("%d users, want 120", users)
	}
	r := runParties(t, d, spl, "dp-als", partyParams, seed, partySetup{parties: 5, cuts: []int{0, 100, 105, 110, 115},
		server: func(c *ServerConfig) { c.MinParticipants, c.RoundTimeout = 0.5, 2*time.Second },
		lie: func(k int) func(uint32, *secagg.Client, secagg.Message) secagg.Message {
			masked := 0
			return func(_ uint32, _ *secagg.Client, m secagg.Message) secagg.Message {
				if _, ok := m.(*secagg.MaskedInput); ok {
					if masked++; k == 0 && masked == drop+1 {
						return nil
					}
				}
				return m
			}
		}})
	skipped := 0
	for _, e := range r.led {
		switch {
		case e.Round == drop:
			if e.Skipped == "" {
				t.Errorf("round %d: released with %d users' vectors of %d; want it skipped below the floor of 60 users", e.Round, e.Uploads, users)
			}
			skipped++
		case e.Phase != "final" && (e.Skipped != "" || e.Uploads != users):
			t.Errorf("round %d (%s): %d users' vectors, skipped %q", e.Round, e.Phase, e.Uploads, e.Skipped)
		}
	}
	if skipped != 1 {
		t.Fatalf("round %d not in the ledger", drop)
	}
}
