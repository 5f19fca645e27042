package webclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// cohortPlan is a masked dp-als plan over cohorts of 2, each client in 2
// training rounds at most, 2 apart: 9 rounds, setup 0, training 1 to 7,
// final 8.
var cohortPlan = map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "3", "init-items": "10",
	"cohort": "2", "rounds-per-user": "2", "min-gap": "2"}

// newCohortClient returns a page for cohortPlan over transport t, with
// the memory mem, enrolled as client 7 and allowing the
// honest-but-curious protocol.
func newCohortClient(t *testing.T, tr Transport, mem []byte, st Store) *Client {
	t.Helper()
	hello, _ := json.Marshal(map[string]any{"method": "dp-als", "config": cohortPlan, "aggregation": "masked",
		"catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	c, err := New(tr, hello)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rounds() != 9 {
		t.Fatalf("a plan of %d rounds, want 9", c.Rounds())
	}
	c.AllowInsecure()
	c.SetCredential("7.secret-secret-secret")
	if err := c.Remember(mem, st); err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeRound is how a scripted server runs one round for the page.
type fakeRound struct {
	gather      string // the gathering's phase ("" for a round that opens without one)
	take        bool   // a join takes the page into the cohort
	openOnJoin  bool   // a join is answered with the round already open, the page in it
	phase       string // the broadcast's phase
	namesAlways bool   // the opened round's plan names the page whether it joined or not
	restart     bool   // the server restarts once the page is taken, and gathers the round afresh
}

// fakeServer is a scripted cohort run (a red team when the script says
// so): round r runs as rounds[r]. It records which rounds the page asked
// to join and which it answered (a SecAgg step or an Upload). It fails
// every SecAgg step (the page drops out of the round once its first
// message left), which is all the rules need.
type fakeServer struct {
	rounds []fakeRound
	model  []byte

	mu        sync.Mutex
	cur       int          // the round in progress
	taken     map[int]bool // rounds whose cohort holds the page
	opened    map[int]bool
	restarted map[int]bool
	joins     []int
	answered  []int
	interim   []bool // GetModel calls' interim flags
}

func (f *fakeServer) Post(ctx context.Context, path string, _ map[string]string, body []byte) (int, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	proc := strings.TrimPrefix(path, Service)
	ok := func(v any) (int, []byte, error) {
		b, err := json.Marshal(v)
		return 200, b, err
	}
	switch proc {
	case "GetRound":
		var q getRoundRequest
		if err := json.Unmarshal(body, &q); err != nil {
			return 0, nil, err
		}
		for f.cur < len(f.rounds) && f.cur <= int(q.After) {
			f.cur++ // the page has moved past the round
		}
		resp := map[string]any{"state": "RUN_STATE_RUNNING", "boot": "b1"}
		if f.cur >= len(f.rounds) {
			resp["state"] = "RUN_STATE_DONE"
			return ok(resp)
		}
		r, fr := f.cur, f.rounds[f.cur]
		if q.Join {
			f.joins = append(f.joins, r)
			if fr.openOnJoin {
				f.opened[r] = true
			} else {
				f.taken[r] = fr.take
			}
		}
		if fr.restart && f.taken[r] && !q.Join && !f.restarted[r] {
			f.restarted[r], f.taken[r] = true, false // a new gathering of the round, without the page
		}
		if fr.gather != "" && !f.opened[r] && (q.Join || !f.taken[r]) {
			resp["gathering"] = map[string]any{"round": r, "phase": fr.gather, "cohort": 2, "taken": 1}
			resp["inCohort"] = f.taken[r]
			return ok(resp)
		}
		// The round opens (for a page taken into it: once it waits).
		f.opened[r] = true
		named := f.taken[r] || fr.namesAlways || fr.openOnJoin || fr.phase == protocol.PhaseFinal
		resp["inCohort"] = named
		resp["broadcast"] = map[string]any{"round": r, "phase": fr.phase, "dim": 1, "numItems": 2, "words": 2, "bits": 32}
		if fr.phase != protocol.PhaseFinal {
			order := []uint32{100, 101}
			if named {
				order = []uint32{7, 100, 101}
			}
			resp["secagg"] = map[string]any{"order": order, "degree": 2, "threshold": 2, "bits": 32, "words": 2,
				"seed": bytes.Repeat([]byte{1}, 32), "session": fmt.Sprintf("s%d", r)}
		}
		return ok(resp)
	case "SecAgg", "Upload":
		var q struct{ Round int }
		if err := json.Unmarshal(body, &q); err != nil {
			return 0, nil, err
		}
		if !slices.Contains(f.answered, q.Round) {
			f.answered = append(f.answered, q.Round)
		}
		if proc == "Upload" {
			return ok(struct{}{})
		}
		return 400, []byte(`{"code":"failed_precondition","message":"the fake server takes no secure aggregation"}`), nil
	case "GetModel":
		var q getModelRequest
		if err := json.Unmarshal(body, &q); err != nil {
			return 0, nil, err
		}
		f.interim = append(f.interim, q.Interim)
		return ok(getModelResponse{Model: f.model})
	}
	return 404, []byte(`{"code":"unimplemented","message":"` + proc + `"}`), nil
}

// smallModel is a published model of cohortPlan's catalog, an interim
// release when release is not nil.
func smallModel(t *testing.T, release *model.Release) []byte {
	t.Helper()
	m := &model.Model{Dim: 1, NumItems: 2, V: []float32{0.1, 0.2}, BI: []float32{0, 0}, Mean: 3, Default: 3,
		ItemIDs: []string{"1", "2"}, Scale: ratings.Scale{Min: 1, Max: 5, Step: 1}, Method: "dp-als", Release: release,
		Config: json.RawMessage(`{"reg-user":1,"reg-user-bias":1}`)}
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// script returns the rounds of cohortPlan's run (setup 0, training 1 to
// 7, final 8), each training round and the setup run as train does, the
// final round without a cohort.
func script(train fakeRound) []fakeRound {
	rounds := make([]fakeRound, 9)
	for r := range rounds {
		rounds[r] = train
		rounds[r].phase = protocol.PhaseTrain
		if train.gather != "" {
			rounds[r].gather = protocol.PhaseTrain
		}
	}
	rounds[0].phase = protocol.PhaseSetup
	if train.gather != "" {
		rounds[0].gather = protocol.PhaseSetup
	}
	rounds[8] = fakeRound{phase: protocol.PhaseFinal}
	return rounds
}

// TestCohortRules: the page's cohort rules against scripted servers,
// honest and red-team: it offers to join only the rounds its limits
// allow (2 training rounds, 2 apart), answers only a round whose cohort
// it joined and was taken into while it was gathered, never one a
// server names it in otherwise (no gathering; a cohort that did not take
// it; a join answered with the round already open; a training round
// gathered as a setup round), nor any its limits refuse, across a
// reload (an earlier page's memory); and once spent it leaves with the
// newest release (GetModel interim) and says which. Its status says so
// of every round it sits out, and why: its limits, or not taken.
func TestCohortRules(t *testing.T) {
	taken := script(fakeRound{gather: "x", take: true, namesAlways: true})
	restarts := script(fakeRound{gather: "x", take: true, namesAlways: true})
	restarts[1].restart = true
	asSetup := script(fakeRound{gather: "x", take: true, namesAlways: true})
	for r := range asSetup[:8] {
		asSetup[r].gather = protocol.PhaseSetup // the red team's label; the rounds open as training rounds
	}
	// Round 2 is too close to round 1 (min gap 2); a page never taken
	// sits out every round but the final.
	limited := []string{"2 limits [1]"}
	var notTaken []string
	for r := range 8 {
		notTaken = append(notTaken, fmt.Sprint(r, " cohort []"))
	}
	tests := []struct {
		name     string
		rounds   []fakeRound
		memory   func(digest string) []byte
		joins    []int
		answered []int
		trained  []int
		interim  bool // left with the newest release (else the final model)
		// satOut is what the page's status said of the rounds it sat
		// out: round, why, and the training rounds answered by then.
		satOut []string
	}{
		{"taken into every cohort it joins", taken, nil, []int{0, 1, 3}, []int{0, 1, 3}, []int{1, 3}, true, limited},
		{"a gathering restarted after the page was taken", restarts, nil, []int{0, 1, 1, 3}, []int{0, 1, 3}, []int{1, 3}, true, limited},
		{"never taken", script(fakeRound{gather: "x", namesAlways: true}), nil,
			[]int{0, 1, 2, 3, 4, 5, 6, 7}, []int{8}, nil, false, notTaken},
		{"red team: named without a gathering", script(fakeRound{namesAlways: true}), nil, nil, []int{8}, nil, false, notTaken},
		{"red team: a join answered with the round open", script(fakeRound{gather: "x", openOnJoin: true}), nil,
			[]int{0, 1, 2, 3, 4, 5, 6, 7}, []int{8}, nil, false, notTaken},
		{"red team: training rounds gathered as setup rounds", asSetup, nil, []int{0, 1, 2, 3}, []int{0, 1, 3}, []int{1, 3}, true, limited},
		{"after a reload that answered round 1", taken, func(digest string) []byte {
			b, _ := json.Marshal(Memory{Plans: map[string]*PlanMemory{digest: {Setup: 0, Last: 1, Trained: []int{1}}}})
			return b
		}, []int{3}, []int{3}, []int{1, 3}, true, limited},
		{"after a reload that answered rounds 1 and 3", taken, func(digest string) []byte {
			b, _ := json.Marshal(Memory{Plans: map[string]*PlanMemory{digest: {Setup: 0, Last: 3, Trained: []int{1, 3}}}})
			return b
		}, nil, nil, []int{1, 3}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := &model.Release{Round: 3, Users: 2}
			if !tt.interim {
				release = nil
			}
			f := &fakeServer{rounds: tt.rounds, model: smallModel(t, release), taken: map[int]bool{}, opened: map[int]bool{}, restarted: map[int]bool{}}
			st := &memStore{}
			c := newCohortClient(t, f, nil, st)
			if tt.memory != nil {
				c = newCohortClient(t, f, tt.memory(c.PlanDigest()), st)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out []string
			res, err := c.Train(ctx, nil, 10, nil, func(s Status) {
				if s.SatOut != nil {
					out = append(out, fmt.Sprint(s.SatOut.Round, " ", s.SatOut.Why, " ", s.SatOut.Trained))
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out, tt.satOut) {
				t.Errorf("statuses of rounds sat out %q, want %q", out, tt.satOut)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !slices.Equal(f.joins, tt.joins) {
				t.Errorf("asked to join rounds %v, want %v", f.joins, tt.joins)
			}
			if !slices.Equal(f.answered, tt.answered) {
				t.Errorf("answered rounds %v, want %v", f.answered, tt.answered)
			}
			if !slices.Equal(c.trained, tt.trained) || !slices.Equal(res.Trained, tt.trained) {
				t.Errorf("trained %v (result %v), want %v", c.trained, res.Trained, tt.trained)
			}
			if len(f.interim) != 1 || f.interim[0] != tt.interim {
				t.Errorf("GetModel calls with interim %v, want one with %v", f.interim, tt.interim)
			}
			if tt.interim && (res.Release == nil || *res.Release != *release) {
				t.Errorf("left with release %+v, want %+v", res.Release, release)
			}
			// What the page answered is in its memory before the run
			// ends, and a page reloaded with it counts it.
			var mem Memory
			if err := json.Unmarshal(st.bytes(), &mem); err != nil && len(f.answered) > 0 {
				t.Fatal(err)
			}
			if pm := mem.Plans[c.PlanDigest()]; len(tt.answered) > 0 && (pm == nil || !slices.Equal(pm.Trained, tt.trained)) {
				t.Errorf("the memory saved: %+v, want trained %v", pm, tt.trained)
			}
		})
	}
}

// memStore is a Store in memory.
type memStore struct {
	mu    sync.Mutex
	saved []byte
	saves int
}

func (m *memStore) Save(_ context.Context, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saved, m.saves = bytes.Clone(b), m.saves+1
	return nil
}

func (m *memStore) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.saved)
}

// failStore is a Store whose writes fail.
type failStore struct{}

func (failStore) Save(context.Context, []byte) error { return fmt.Errorf("disk full") }

// TestMemoryKeepsTrainedRounds: the page's memory keeps the training
// rounds it answered of a cohort plan (PlanMemory.Trained), saved before
// the answer leaves and read back by a reloaded page, which its limits
// then count; a memory saved before the field existed still loads; a
// failed save records nothing and refuses the round.
func TestMemoryKeepsTrainedRounds(t *testing.T) {
	digest := newCohortClient(t, nil, nil, &memStore{}).PlanDigest()
	tests := []struct {
		name    string
		memory  string // the stored memory, %s the plan's digest
		round   int32  // the round answered (a training round)
		store   Store
		trained []int // after the round, and after a reload
		allowed []int // the training rounds the reloaded page may answer
	}{
		{"none", "", 2, &memStore{}, []int{2}, []int{4, 5, 6, 7}},
		{"saved before the field existed", `{"plans":{"%s":{"setup":0,"last":1}}}`, 2, &memStore{}, []int{2}, []int{4, 5, 6, 7}},
		{"one round before", `{"plans":{"%s":{"setup":0,"last":2,"trained":[2]}}}`, 5, &memStore{}, []int{2, 5}, nil},
		{"another plan's rounds", `{"plans":{"other":{"setup":0,"last":6,"trained":[4,6]}}}`, 1, &memStore{}, []int{1}, []int{3, 4, 5, 6, 7}},
		{"a failed save", `{"plans":{"%s":{"setup":0,"last":2,"trained":[2]}}}`, 4, failStore{}, []int{2}, []int{4, 5, 6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := []byte(tt.memory)
			if strings.Contains(tt.memory, "%s") {
				mem = []byte(fmt.Sprintf(tt.memory, digest))
			}
			c := newCohortClient(t, nil, mem, tt.store)
			err := c.remember(context.Background(), tt.round, protocol.PhaseTrain)
			if _, fails := tt.store.(failStore); fails != (err != nil) {
				t.Fatalf("remember: %v", err)
			}
			if !slices.Equal(c.trained, tt.trained) {
				t.Errorf("trained %v, want %v", c.trained, tt.trained)
			}
			saved := mem
			if ms, ok := tt.store.(*memStore); ok {
				saved = ms.bytes()
			}
			again := newCohortClient(t, nil, saved, &memStore{})
			if !slices.Equal(again.trained, tt.trained) {
				t.Errorf("reloaded: trained %v, want %v (saved %s)", again.trained, tt.trained, saved)
			}
			var allowed []int
			for r := 1; r <= 7; r++ {
				if again.allowed(r, protocol.PhaseTrain) {
					allowed = append(allowed, r)
				}
			}
			if !slices.Equal(allowed, tt.allowed) {
				t.Errorf("reloaded: may answer training rounds %v, want %v", allowed, tt.allowed)
			}
		})
	}
}

// TestLeaves: the page leaves a cohort run once its limits let it answer
// no training round from the one now gathered or open and the last
// training round it answered is over; dp-ease's last round is a
// training round (the Gram), dp-als's the final one.
func TestLeaves(t *testing.T) {
	ease, _ := json.Marshal(map[string]any{"method": "dp-ease", "config": map[string]string{"secagg": "masked", "cohort": "10", "cohort-rounds": "3"},
		"aggregation": "masked", "catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	ec, err := New(nil, ease)
	if err != nil {
		t.Fatal(err)
	}
	if ec.Rounds() != 7 {
		t.Fatalf("dp-ease over 3 cohorts a statistic: %d rounds, want 7", ec.Rounds())
	}
	ac := newCohortClient(t, nil, nil, &memStore{})
	roster, _ := json.Marshal(map[string]any{"method": "dp-als", "config": map[string]string{"secagg": "masked"},
		"aggregation": "masked", "catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	rc, err := New(nil, roster)
	if err != nil {
		t.Fatal(err)
	}
	gathering := func(r int32) *getRoundResponse { return &getRoundResponse{Gathering: &gathering{Round: r}} }
	open := func(r int32) *getRoundResponse { return &getRoundResponse{Broadcast: &broadcast{Round: r}} }
	tests := []struct {
		name    string
		c       *Client
		trained []int
		resp    *getRoundResponse
		leaves  bool
	}{
		{"dp-als: spent, the next round gathered", ac, []int{1, 3}, gathering(4), true},
		{"dp-als: spent, its last round still open", ac, []int{1, 3}, open(3), false},
		{"dp-als: one more round allowed", ac, []int{1}, gathering(2), false},
		{"dp-als: never answered", ac, nil, open(8), false},
		{"dp-als: no round left within the gap", ac, []int{6}, gathering(7), true},
		{"dp-als: nothing gathered or open", ac, []int{1, 3}, &getRoundResponse{}, false},
		{"dp-ease: the Gram's last cohort still allowed", ec, []int{3}, gathering(4), false},
		{"dp-ease: spent", ec, []int{1, 4}, gathering(5), true},
		{"a roster run", rc, []int{1, 3}, gathering(4), false},
	}
	for _, tt := range tests {
		tt.c.trained = tt.trained
		if got := tt.c.leaves(tt.resp); got != tt.leaves {
			t.Errorf("%s: leaves = %v, want %v", tt.name, got, tt.leaves)
		}
	}
}
