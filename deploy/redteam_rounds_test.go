package deploy

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/method"
)

// hostilePlan returns a hostile server of method name (config text cfg)
// over smallCatalog's items, serving script.
func hostilePlan(t *testing.T, name string, cfg map[string]string, script []*fedv1.Broadcast) *hostileServer {
	t.Helper()
	d, _ := smallCatalog(t, 6, 12)
	spec, typed := configure(t, name, cfg)
	return &hostileServer{script: script, plan: &fedv1.HelloResponse{Method: name, Config: cfg,
		Aggregation: aggregationName(spec.Federated.Aggregation(typed)),
		Catalog:     &fedv1.Catalog{ItemIds: d.ItemIDs},
		Scale:       &fedv1.Scale{Min: float64(d.Scale.Min), Max: float64(d.Scale.Max), Step: float64(d.Scale.Step)}}}
}

// runHostile runs a real Session with the clients of spec (config cfg)
// against h, with memory as ClientConfig.Memory, and returns Run's error
// and the rounds h took uploads of.
func runHostile(t *testing.T, h *hostileServer, spec method.Spec, cfg any, memory string) ([]int32, error) {
	t.Helper()
	_, spl := smallCatalog(t, 6, 12)
	url, hc := serveHostile(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: url, HTTP: hc, Token: "any", Logger: quietLog(),
		Retry: 5 * time.Second, Insecure: true, Memory: memory})
	if err != nil {
		return nil, err
	}
	cls, err := spec.NewClients(cfg, spl.Train, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Run(ctx, cls.List)
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.uploads)), err
}

// TestRedTeamRoundsPastThePlan is issue 44's unbounded run: the plan says
// hdpmf with 2 epochs (rounds 0 to 3: setup, two training rounds, the
// final one) and the server broadcasts 20 rounds, the training round
// again and again. Each answer spends ε: the clients answer the plan's
// rounds only, then refuse. (Before the fix they answered all 20.)
func TestRedTeamRoundsPastThePlan(t *testing.T) {
	d, spl := smallCatalog(t, 6, 12)
	spec, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	bs, _, _ := honestBroadcasts(t, spec, cfg, d, spl.Train)
	if len(bs) != 4 {
		t.Fatalf("the honest run has %d rounds, want 4", len(bs))
	}
	var script []*fedv1.Broadcast
	for r := range 20 {
		b := copyBroadcast(bs[min(r, 2)])
		b.Round = r
		script = append(script, toWireBroadcast(b))
	}
	h := hostilePlan(t, spec.Name, spec.Text(cfg), script)
	got, err := runHostile(t, h, spec, cfg, "")
	if err == nil || !strings.Contains(err.Error(), "past the plan") {
		t.Fatalf("error %v, want the round past the plan refused", err)
	}
	if want := []int32{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("the server took uploads of rounds %v, want the plan's %v only", got, want)
	}
	t.Logf("answered rounds %v, then refused: %v", got, err)
}

// TestRedTeamReplayAfterRestart is issue 44's replay: a client answers a
// whole run, is restarted, and a second server with the same plan (at
// another address) asks for the same rounds again — fresh noise on the
// same ratings, twice the ε. Without a memory (the control) the second
// server gets every round again; with the same --state (Memory) the
// restarted client answers none and says why.
func TestRedTeamReplayAfterRestart(t *testing.T) {
	d, spl := smallCatalog(t, 6, 12)
	for _, tc := range []struct {
		name, method string
		memory       bool
		upTo         int     // the first server's script ends before round upTo
		from         int     // the second server's script starts at round from
		second       []int32 // rounds the second server gets
		err          string  // in the restarted session's error
	}{
		{"no-memory", "hdpmf", false, 4, 0, []int32{0, 1, 2, 3}, "end of script"},
		{"memory", "hdpmf", true, 4, 0, nil, "already answered"},
		// A client restarted in the middle of a run, back at a server
		// still in the round it answered last (as the real server serves
		// its open round), waits for the next and goes on (sdmf's
		// clients need nothing of the rounds before)...
		{"memory-mid-run", "sdmf", true, 2, 1, []int32{2, 3}, "end of script"},
		// ... and one whose method's client state of the earlier rounds
		// is lost with the process refuses what it cannot answer.
		{"memory-mid-run-stateful", "hdpmf", true, 2, 1, nil, "before the setup round"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, cfg := configure(t, tc.method, map[string]string{"epochs": "2"})
			if tc.method == "sdmf" {
				spec, cfg = configure(t, tc.method, map[string]string{"epochs": "4"})
			}
			bs, _, _ := honestBroadcasts(t, spec, cfg, d, spl.Train)
			var script []*fedv1.Broadcast
			var all []int32
			for _, b := range bs {
				script = append(script, toWireBroadcast(b))
				all = append(all, int32(b.Round))
			}
			memory := ""
			if tc.memory {
				memory = t.TempDir()
			}
			first := hostilePlan(t, spec.Name, spec.Text(cfg), script[:tc.upTo])
			if got, _ := runHostile(t, first, spec, cfg, memory); !slices.Equal(got, all[:tc.upTo]) {
				t.Fatalf("the first server took rounds %v, want %v", got, all[:tc.upTo])
			}
			second := hostilePlan(t, spec.Name, spec.Text(cfg), script[tc.from:])
			got, err := runHostile(t, second, spec, cfg, memory)
			if !slices.Equal(got, tc.second) {
				t.Fatalf("the second server took rounds %v, want %v (%v)", got, tc.second, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one about %q", err, tc.err)
			}
			t.Logf("second server: rounds %v, %v", got, err)
		})
	}
}

// TestMemoryBeforeAnswer: the memory of a round is on disk before any
// answer of it leaves; when it cannot be written, nothing is sent.
func TestMemoryBeforeAnswer(t *testing.T) {
	d, spl := smallCatalog(t, 6, 12)
	spec, cfg := configure(t, "sdmf", map[string]string{"epochs": "2"})
	bs, _, _ := honestBroadcasts(t, spec, cfg, d, spl.Train)
	var script []*fedv1.Broadcast
	for _, b := range bs {
		script = append(script, toWireBroadcast(b))
	}
	old := writeMemory
	t.Cleanup(func() { writeMemory = old })
	writeMemory = func(path string, data []byte, perm os.FileMode) error {
		if strings.HasSuffix(path, ".rounds.json") {
			return errors.New("disk full")
		}
		return old(path, data, perm)
	}
	h := hostilePlan(t, spec.Name, spec.Text(cfg), script)
	got, err := runHostile(t, h, spec, cfg, t.TempDir())
	if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("rounds %v sent, error %v; want none sent and the memory's error", got, err)
	}
}
