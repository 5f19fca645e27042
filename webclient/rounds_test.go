package webclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestRoundsOfConfig ties the page's round counts (dpalsRounds,
// dpeaseRounds, which the wasm computes from the plan without the
// methods' servers) to the real servers: for each configuration, read
// by the page's own parser, dpals' or dpease's server runs in process
// with a small synthetic population (a dry run), and the broadcasts it
// makes until it is done are counted.
func TestRoundsOfConfig(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 40, Items: 30, Rank: 2, PerUser: 8, Noise: 0.5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method string
		params map[string]string
	}{
		{"dp-als", map[string]string{"secagg": "masked"}},
		{"dp-als", map[string]string{"secagg": "ideal"}},
		{"dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "init-items": "20"}},
		{"dp-als", map[string]string{"secagg": "masked", "rounds": "3", "init-items": "0"}},
		{"dp-als", map[string]string{"secagg": "off", "rounds": "0", "init-items": "0", "bias-rounds": "4"}},
		{"dp-als", map[string]string{"secagg": "masked", "dim": "0", "bias-rounds": "1"}},
		{"dp-biases", map[string]string{"secagg": "masked"}},
		{"dp-biases", map[string]string{"secagg": "ideal", "bias-rounds": "5"}},
		{"dp-ease", map[string]string{"secagg": "masked", "top-items": "10"}},
		{"dp-ease", map[string]string{"secagg": "ideal", "top-items": "10"}},
		{"dp-ease", map[string]string{"secagg": "masked", "top-items": "10", "cohort": "10", "cohort-rounds": "3"}},
		{"dp-ease", map[string]string{"secagg": "masked", "top-items": "10", "cohort": "40"}},
		{"dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "3", "init-items": "10",
			"cohort": "10", "rounds-per-user": "2", "min-gap": "2"}},
	} {
		var (
			want    int
			srv     protocol.Server
			clients []protocol.Client
			agg     protocol.Aggregation
		)
		if tc.method == "dp-ease" {
			cfg, err := dpeaseConfig(tc.params)
			if err != nil {
				t.Fatalf("%v: %v", tc.params, err)
			}
			s, err := dpease.NewServer(cfg, d, 1)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := dpease.NewClients(d, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, srv, clients, agg = dpeaseRounds(cfg), s, cl.List, cfg.Aggregation
		} else {
			cfg, err := dpalsConfig(tc.method, tc.params)
			if err != nil {
				t.Fatalf("%s %v: %v", tc.method, tc.params, err)
			}
			s, err := dpals.NewServer(cfg, d, 1)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := dpals.NewClients(d, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, srv, clients, agg = dpalsRounds(cfg), s, cl.List, cfg.Aggregation
		}
		got := 0
		err := protocol.Run(context.Background(), srv, clients, protocol.RunOptions{Seed: 1, Aggregation: agg, MaxRounds: 100,
			OnRound: func(info protocol.RoundInfo) error {
				if info.Round != got {
					t.Errorf("%s %v: round %d after %d rounds", tc.method, tc.params, info.Round, got)
				}
				got++
				return nil
			}})
		if err != nil {
			t.Fatalf("%s %v: %v", tc.method, tc.params, err)
		}
		if got != want {
			t.Errorf("%s %v: the server broadcast %d rounds, the page counts %d", tc.method, tc.params, got, want)
		}
	}
}

// scripted is a server that answers every GetRound with resp and fails
// the test on any answer the page sends.
type scripted struct {
	t    *testing.T
	resp string
}

func (s scripted) Post(_ context.Context, path string, _ map[string]string, body []byte) (int, []byte, error) {
	if !strings.HasSuffix(path, "/GetRound") {
		s.t.Errorf("the page sent %s %s", path, body)
		return 500, nil, nil
	}
	return 200, []byte(s.resp), nil
}

// saved is a Store that keeps nothing.
type saved struct{ n *int }

func (s saved) Save(context.Context, []byte) error { *s.n++; return nil }

// TestRefusesRounds: the page refuses, before anything of it is
// remembered or sent, a round numbered past its plan's round count and a
// second setup round of a plan whose setup it answered (kept in its
// memory across a reload); and it sends nothing for a round its memory
// says it answered.
func TestRefusesRounds(t *testing.T) {
	plan, _ := json.Marshal(map[string]any{"method": "dp-ease", "config": map[string]string{"secagg": "masked"}, "aggregation": "masked",
		"catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	round := func(r int, phase string) string {
		return fmt.Sprintf(`{"state":"RUN_STATE_RUNNING","boot":"b","broadcast":{"round":%d,"phase":%q,"dim":1,"numItems":2,"words":1,"bits":32},`+
			`"secagg":{"order":[7,8,9],"degree":2,"threshold":2,"bits":32,"words":1,"seed":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","session":"s"}}`, r, phase)
	}
	for _, tc := range []struct {
		name   string
		resp   string
		memory *PlanMemory
		want   string // "" for no answer until the deadline
	}{
		{"past the round count", round(3, "train"), nil, "past the plan's 3 rounds"},
		{"far past it", round(1<<30, "train"), nil, "past the plan's 3 rounds"},
		{"a second setup", round(1, "setup"), &PlanMemory{Setup: 0, Last: 0}, "second setup"},
		{"a round answered before the reload", round(2, "train"), &PlanMemory{Setup: 0, Last: 2}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(scripted{t, tc.resp}, plan)
			if err != nil {
				t.Fatal(err)
			}
			c.SetCredential("7.secret-secret-secret")
			var mem []byte
			if tc.memory != nil {
				mem, _ = json.Marshal(Memory{Plans: map[string]*PlanMemory{webPlanDigest(c.Plan()): tc.memory}})
			}
			saves := 0
			if err := c.Remember(mem, saved{&saves}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err = c.Train(ctx, []Rating{{Item: 0, Value: 4}}, 10, nil, nil)
			switch {
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Train: %v, want a refusal saying %q", err, tc.want)
			case tc.want == "" && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("Train: %v, want it still waiting for a later round at the deadline", err)
			}
			if saves != 0 {
				t.Errorf("%d saves of the memory for a round refused", saves)
			}
		})
	}
}
