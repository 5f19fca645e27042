package method_test

import (
	"context"
	"maps"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestRoundsIsTheRun runs every registered federated method's server with
// its clients in process (fedParams' short runs over the defaults, with
// the aggregation of the defaults and, where the method has it,
// secagg=masked) and checks that Rounds(cfg), which a deployment's
// clients hold every server to, is exactly the rounds the server
// broadcast: numbered 0, 1, ..., Rounds−1, then Done. It iterates over
// the registry, so a new federated method without Rounds fails here.
func TestRoundsIsTheRun(t *testing.T) {
	d := fedData(t, ratings.Scale{Min: 1, Max: 5, Step: 1})
	seen := 0
	for _, s := range method.All() {
		if s.Federated == nil {
			continue
		}
		seen++
		modes := []params{fedParams[s.Name]}
		if s.Has("secagg") {
			masked := maps.Clone(fedParams[s.Name])
			if masked == nil {
				masked = params{}
			}
			masked["secagg"] = "masked"
			if masked["noise"] == "mixture" {
				masked["noise"] = "gamma" // the integer path draws Skellam shares
			}
			// A method whose config takes secagg=masked and refuses it
			// (ldp-op-basic) has no masked run.
			if cfg, err := s.Configure(masked); err == nil && s.Federated.Aggregation(cfg) == protocol.AggMasked && validConfig(s, cfg) {
				modes = append(modes, masked)
			}
		}
		for _, p := range modes {
			t.Run(s.Name+"/"+p["secagg"], func(t *testing.T) {
				cfg, err := s.Configure(p)
				if err != nil {
					t.Fatal(err)
				}
				pm, err := method.Protocol(s.Name)
				if err != nil {
					t.Fatal(err)
				}
				want, err := pm.Rounds(cfg)
				if err != nil {
					t.Fatalf("Rounds: %v", err)
				}
				srv, err := s.NewServerFor(cfg, &ratings.Dataset{Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles, Side: d.Side}, 1)
				if err != nil {
					t.Fatal(err)
				}
				cl, err := s.NewClients(cfg, d, 1)
				if err != nil {
					t.Fatal(err)
				}
				var got []int
				opt := protocol.RunOptions{Seed: 1, Aggregation: s.Federated.Aggregation(cfg), MaxRounds: want + 50,
					OnRound: func(r protocol.RoundInfo) error { got = append(got, r.Round); return nil }}
				if err := protocol.Run(context.Background(), srv, cl.List, opt); err != nil {
					t.Fatal(err)
				}
				if len(got) != want {
					t.Fatalf("%s %v: the server broadcast %d rounds, Rounds says %d", s.Name, p, len(got), want)
				}
				for k, r := range got {
					if r != k {
						t.Fatalf("round %d of the run is numbered %d", k, r)
					}
				}
				if !srv.Done() {
					t.Fatal("the server is not done after its rounds")
				}
				t.Logf("%d rounds (%v)", want, s.Federated.Aggregation(cfg))
			})
		}
	}
	if seen < 15 {
		t.Fatalf("%d federated methods in the registry, want at least 10", seen)
	}
}

// validConfig reports whether the server of s can be built from cfg.
func validConfig(s method.Spec, cfg any) bool {
	_, err := s.NewServer(cfg, 10, ratings.Scale{Min: 1, Max: 5, Step: 1}, 1)
	return err == nil
}
