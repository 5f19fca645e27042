package deploy

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/privrec/privrec/eval"
	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// cohortConfig is a small masked dp-als run over cohorts with limits.
func cohortConfig(t *testing.T, rounds, cohort, perUser, gap string) (protocol.Method, any, protocol.Participation) {
	t.Helper()
	_, cfg := configure(t, "dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": rounds, "init-items": "10",
		"cohort": cohort, "rounds-per-user": perUser, "min-gap": gap})
	m := served("dp-als")
	return m, cfg, m.Participation(cfg)
}

// dialCohort connects a vendor session of seeded clients to h, with a
// memory directory when memory is not empty.
func dialCohort(t *testing.T, ctx context.Context, h *harness, memory string, progress func(Progress)) *Session {
	t.Helper()
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: 4,
		Insecure: true, Logger: quietLog(), Retry: 30 * time.Second, Memory: memory, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// checkLimits fails t for a client whose training rounds break part's
// limits.
func checkLimits(t *testing.T, trained [][]int, part protocol.Participation) {
	t.Helper()
	for k, rounds := range trained {
		if len(rounds) > part.MaxRounds {
			t.Errorf("client %d answered training rounds %v, over the limit of %d", k, rounds, part.MaxRounds)
		}
		for i := 1; i < len(rounds); i++ {
			if rounds[i]-rounds[i-1] < part.MinGap {
				t.Errorf("client %d answered rounds %v, two closer than the gap of %d", k, rounds, part.MinGap)
			}
		}
	}
}

// TestCohortRounds: a masked dp-als run over TLS in which every round
// takes a cohort of 20 of the 60 enrolled clients: each round's sum
// holds its cohort alone, and no client answers more training rounds
// than the plan's limit nor two closer than its gap.
func TestCohortRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a masked cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	m, cfg, part := cohortConfig(t, "2", "20", "3", "2")
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 20 * time.Second}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := dialCohort(t, ctx, h, "", nil)
	got, _ := runClients(t, sess, spl.Train, 4)
	if rmse := eval.Rating(got, spl.Test).RMSE; math.IsNaN(rmse) || rmse > 2 {
		t.Errorf("test RMSE %v", rmse)
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	trainRounds := 0
	for _, e := range led {
		t.Logf("round %d (%s): cohort %d, %d answered, %d masked inputs, skipped %q", e.Round, e.Phase, e.Cohort, e.Participants, e.Uploads, e.Skipped)
		if e.Phase == protocol.PhaseFinal {
			continue
		}
		if e.Cohort != part.Cohort || e.Uploads != part.Cohort || e.Skipped != "" || e.Enrolled != 60 {
			t.Errorf("round %d: cohort %d, %d masked inputs of %d enrolled, skipped %q: want every round released from a cohort of %d",
				e.Round, e.Cohort, e.Uploads, e.Enrolled, e.Skipped, part.Cohort)
		}
		if e.Phase == protocol.PhaseTrain {
			trainRounds++
		}
	}
	// The clients' own record: the limits held, and together the
	// clients answered every training round's cohort.
	checkLimits(t, sess.trained, part)
	total := 0
	for _, rounds := range sess.trained {
		total += len(rounds)
	}
	if trainRounds == 0 || total != trainRounds*part.Cohort {
		t.Errorf("the clients answered %d training participations over %d training rounds, want %d", total, trainRounds, trainRounds*part.Cohort)
	}
}

// TestRedTeamCohortOverLimits: a server that puts into a round's cohort
// every enrolled client, whether or not it joined and whatever it
// answered before (round 2, right after round 1, within the gap of 3),
// gets nothing from a client past its limits: the clients answer only
// rounds they joined, and join only rounds their limits allow. Before
// the fix, a client whose join reached the server after the round
// opened took the open round's word that it was in the cohort, and all
// 30 clients answered round 1.
func TestRedTeamCohortOverLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 30, 200)
	m, cfg, part := cohortConfig(t, "2", "10", "2", "3")
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: time.Second, MinParticipants: 0.5}, "127.0.0.1:0")
	h.srv.testCohort = func(b *protocol.Broadcast, cohort map[uint32]bool) {
		if b.Round == 2 {
			for id := range h.srv.enrolled {
				cohort[id] = true
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := dialCohort(t, ctx, h, t.TempDir(), nil)
	runClients(t, sess, spl.Train, 4)
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range led {
		t.Logf("round %d (%s): cohort %d, %d masked inputs, skipped %q", e.Round, e.Phase, e.Cohort, e.Uploads, e.Skipped)
		if e.Phase == protocol.PhaseTrain && e.Uploads > part.Cohort {
			t.Errorf("round %d: %d masked inputs in a cohort of %d: clients answered without joining", e.Round, e.Uploads, part.Cohort)
		}
	}
	// The memory, which a restarted client reads, holds the limits too.
	checkLimits(t, sess.mem.rounds.Trained, part)
	// A skipped round released nothing: it costs no ε, and leaves the
	// run's total bounded.
	if last := led[len(led)-1]; !(last.EpsTotal > 0) || last.EpsTotal > 1+1e-9 {
		t.Errorf("the run's ε after a skipped round: %v, want within (0, 1]", last.EpsTotal)
	}
}

// TestTakers: which of a session's clients answer a round, by the limits
// and the cohort they joined, whatever the server's plan names.
func TestTakers(t *testing.T) {
	part := protocol.Participation{Cohort: 2, MaxRounds: 2, MinGap: 2}
	s := &Session{part: part, creds: make([]string, 4), trained: [][]int{nil, {3}, {1, 2}, {2}}}
	train := &protocol.Broadcast{Round: 4, Phase: protocol.PhaseTrain}
	tests := []struct {
		name        string
		b           *protocol.Broadcast
		joined      []bool
		joinedRound int
		want        []bool
	}{
		{"joined and allowed", train, []bool{true, true, true, true}, 4, []bool{true, false, false, true}},
		{"not joined", train, []bool{false, false, false, false}, 4, []bool{false, false, false, false}},
		{"joined another round", train, []bool{true, true, true, true}, 3, []bool{false, false, false, false}},
		{"the final round asks all", &protocol.Broadcast{Round: 5, Phase: protocol.PhaseFinal}, nil, -1, []bool{true, true, true, true}},
		{"setup: no limit", &protocol.Broadcast{Round: 0, Phase: protocol.PhaseSetup}, []bool{true, false, true, false}, 0, []bool{true, false, true, false}},
	}
	for _, tt := range tests {
		got := s.takers(tt.b, tt.joined, tt.joinedRound)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: takers = %v, want %v", tt.name, got, tt.want)
		}
	}
	roster := &Session{part: protocol.Participation{}, creds: make([]string, 2)}
	if got := roster.takers(train, nil, -1); got != nil {
		t.Errorf("a roster run without limits: takers = %v, want nil (every client)", got)
	}
}

// TestLeaves: a device with LeaveWhenSpent leaves a cohort run once no
// later round is allowed to it and its last round is over; not while a
// round is still open to it, as dp-ease's last Gram round is after its
// counts round (rounds 1–3 counts, 4–6 Gram: 7 rounds, no final one; the
// first version counted only rounds up to rounds-2 and left before it).
func TestLeaves(t *testing.T) {
	dpals := protocol.Participation{Cohort: 20, MaxRounds: 2, MinGap: 1}
	dpease := protocol.Participation{Cohort: 20, MaxRounds: 2, MinGap: 3}
	gathering := func(r int) *fedv1.GetRoundResponse {
		return &fedv1.GetRoundResponse{Gathering: &fedv1.Gathering{Round: int32(r)}}
	}
	open := func(r int) *fedv1.GetRoundResponse {
		return &fedv1.GetRoundResponse{Broadcast: &fedv1.Broadcast{Round: int32(r)}}
	}
	tests := []struct {
		name    string
		part    protocol.Participation
		rounds  int
		trained []int
		leave   bool
		resp    *fedv1.GetRoundResponse
		want    bool
	}{
		{"dp-als, spent, its round over", dpals, 8, []int{1, 2}, true, gathering(3), true},
		{"dp-als, spent, its round still open", dpals, 8, []int{1, 2}, true, open(2), false},
		{"dp-als, a round left", dpals, 8, []int{2}, true, gathering(3), false},
		{"dp-als, never answered", dpals, 8, nil, true, gathering(5), false},
		{"dp-als, spent, not leaving", dpals, 8, []int{1, 2}, false, gathering(3), false},
		{"dp-ease, counts answered, Gram round 6 ahead", dpease, 7, []int{3}, true, gathering(4), false},
		{"dp-ease, counts answered, at round 6", dpease, 7, []int{3}, true, gathering(6), false},
		{"dp-ease, counts round 1: Gram 4 to 6 ahead", dpease, 7, []int{1}, true, open(5), false},
		{"dp-ease, both answered", dpease, 7, []int{3, 6}, true, gathering(6), false},
		{"nothing open yet", dpals, 8, []int{1, 2}, true, &fedv1.GetRoundResponse{}, false},
		{"a roster run", protocol.Participation{MaxRounds: 2}, 8, []int{1, 2}, true, open(3), false},
	}
	for _, tt := range tests {
		s := &Session{cfg: ClientConfig{LeaveWhenSpent: tt.leave}, part: tt.part, rounds: tt.rounds,
			creds: []string{"c"}, trained: [][]int{tt.trained}}
		if got := s.leaves(tt.resp); got != tt.want {
			t.Errorf("%s: leaves = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMemoryKeepsTrainedRounds: the training rounds each client answered
// survive a restart of the session's process.
func TestMemoryKeepsTrainedRounds(t *testing.T) {
	dir := t.TempDir()
	m, err := openMemory(dir, "plan", "dp-als")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.answer(3, false, trainedCopy(nil, 3, 3, []bool{true, false, true})); err != nil {
		t.Fatal(err)
	}
	if err := m.answer(5, false, trainedCopy(m.rounds.Trained, 3, 5, []bool{false, true, true})); err != nil {
		t.Fatal(err)
	}
	again, err := openMemory(dir, "plan", "dp-als")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{3}, {5}, {3, 5}}
	if !slices.EqualFunc(again.rounds.Trained, want, slices.Equal) || again.rounds.Last != 5 {
		t.Errorf("after a restart: trained %v, last %d; want %v, 5", again.rounds.Trained, again.rounds.Last, want)
	}
}

// usersOf returns d's users [lo, hi) and their ratings as a dataset of
// their own (user indices from 0).
func usersOf(d *ratings.Dataset, lo, hi int) *ratings.Dataset {
	c := &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: d.UserIDs[lo:hi], ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles}
	for k := range d.Values {
		if u := int(d.Users[k]); u >= lo && u < hi {
			c.Users = append(c.Users, int32(u-lo))
			c.Items = append(c.Items, d.Items[k])
			c.Values = append(c.Values, d.Values[k])
		}
	}
	return c
}

// TestCohortLateArrivals: enrolment stays open while a cohort run runs;
// 20 devices that enrol after round 2 take part in later cohorts, and
// every round still holds a full cohort.
func TestCohortLateArrivals(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	m, cfg, part := cohortConfig(t, "3", "20", "3", "2")
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d), MinClients: 40,
		StateDir: t.TempDir(), RoundTimeout: 20 * time.Second}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dial := func(progress func(Progress)) *Session { return dialCohort(t, ctx, h, "", progress) }
	spec, _ := configure(t, "dp-als", nil)
	run := func(sess *Session, train *ratings.Dataset) error {
		cls, err := spec.NewClients(cfg, train, 4)
		if err != nil {
			return err
		}
		_, err = sess.Run(ctx, cls.List)
		return err
	}
	late := make(chan error, 1)
	var lateSess *Session
	var once sync.Once
	early := dial(func(p Progress) {
		if p.Round >= 2 {
			once.Do(func() {
				lateSess = dial(nil)
				go func() { late <- run(lateSess, usersOf(spl.Train, 40, 60)) }()
			})
		}
	})
	if err := run(early, usersOf(spl.Train, 0, 40)); err != nil {
		t.Fatal(err)
	}
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range led {
		t.Logf("round %d (%s): cohort %d of %d enrolled, %d masked inputs, skipped %q", e.Round, e.Phase, e.Cohort, e.Enrolled, e.Uploads, e.Skipped)
		if e.Phase != protocol.PhaseFinal && (e.Uploads != part.Cohort || e.Skipped != "") {
			t.Errorf("round %d: %d masked inputs, skipped %q: want a cohort of %d", e.Round, e.Uploads, e.Skipped, part.Cohort)
		}
	}
	if e := led[len(led)-1]; e.Enrolled != 60 {
		t.Errorf("the final round counts %d enrolled, want 60", e.Enrolled)
	}
	took := 0
	for _, rounds := range lateSess.trained {
		took += len(rounds)
	}
	if took == 0 {
		t.Error("no late device took part in a cohort")
	}
	t.Logf("the 20 late devices answered %d training rounds", took)
}

// gatheringAPI answers every GetRound with the same gathering of round
// 3, in which the caller is not (any more) taken, and counts the calls.
type gatheringAPI struct {
	federationv1connect.FederationServiceClient
	calls int
}

func (g *gatheringAPI) GetRound(context.Context, *connect.Request[fedv1.GetRoundRequest]) (*connect.Response[fedv1.GetRoundResponse], error) {
	g.calls++
	if g.calls > 100 {
		return nil, errors.New("polled 100 times")
	}
	return connect.NewResponse(&fedv1.GetRoundResponse{State: fedv1.RunState_RUN_STATE_RUNNING,
		Gathering: &fedv1.Gathering{Round: 3, Phase: protocol.PhaseTrain, Cohort: 20, Taken: 5}}), nil
}

// TestAwaitOpenAfterRestart: a client taken into a cohort waits for the
// round to open; when the server restarted meanwhile and gathers the
// round afresh without it, the wait ends at once (the client joins
// again) instead of polling in a loop that no cohort fills. Before the
// fix it polled until stopped.
func TestAwaitOpenAfterRestart(t *testing.T) {
	api := &gatheringAPI{}
	s := &Session{api: api, log: quietLog(), cfg: ClientConfig{Retry: time.Second}}
	resp, err := s.awaitOpen(context.Background(), 2, 3, "1.secret")
	if err != nil {
		t.Fatal(err)
	}
	if api.calls != 1 || resp.GetBroadcast() != nil {
		t.Errorf("awaitOpen polled %d times and returned %v; want one call and the gathering", api.calls, resp)
	}
}

// TestCohortPopulationSpent: 30 devices that each answer one training
// round fill three cohorts of 10; the rounds after them cannot gather
// one. Each is skipped after its deadlines (nothing released, no ε), and
// the run ends, where before it waited at the gathering for ever.
func TestCohortPopulationSpent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 30, 200)
	m, cfg, part := cohortConfig(t, "2", "10", "1", "0")
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 300 * time.Millisecond}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := dialCohort(t, ctx, h, "", nil)
	runClients(t, sess, spl.Train, 4)
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	released, skipped := 0, 0
	for _, e := range led {
		t.Logf("round %d (%s): cohort %d, %d masked inputs, skipped %q, ε so far %.4g", e.Round, e.Phase, e.Cohort, e.Uploads, e.Skipped, e.EpsTotal)
		switch {
		case e.Phase != protocol.PhaseTrain:
		case e.Skipped != "":
			skipped++
		case e.Uploads == part.Cohort:
			released++
		default:
			t.Errorf("round %d: %d masked inputs, want a full cohort of %d or a skipped round", e.Round, e.Uploads, part.Cohort)
		}
	}
	if released != 3 || skipped == 0 {
		t.Errorf("%d training rounds released and %d skipped, want 3 released (30 devices, one round each, cohorts of 10) and the rest skipped", released, skipped)
	}
	if last := led[len(led)-1]; !(last.EpsTotal > 0) || last.EpsTotal > 1+1e-9 {
		t.Errorf("the run's ε: %v, want within (0, 1]", last.EpsTotal)
	}
	checkLimits(t, sess.trained, part)
}
