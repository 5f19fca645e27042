package dpease

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// lyingServer announces its own client count to the devices (the
// "clients" parameter their noise shares are drawn for) and, when roster
// is set, a roster calibration (protocol.ParamRoster, which a deployment's
// clients check against the roster they pin); it keeps the sums of the
// masked releases after setup.
type lyingServer struct {
	*Server
	clients, roster float64
	sums            [][]uint32
}

func (l *lyingServer) Broadcast(round int) (*protocol.Broadcast, error) {
	b, err := l.Server.Broadcast(round)
	if err == nil && b.Words > 0 && b.Phase != protocol.PhaseSetup {
		if b.Params == nil {
			b.Params = map[string]float64{}
		}
		b.Params[maskplan.ParamClients] = l.clients
		if l.roster > 0 {
			b.Params[protocol.ParamRoster] = l.roster
		}
	}
	return b, err
}

func (l *lyingServer) Aggregate(round int, ups []*protocol.Upload) error {
	if len(ups) == 1 && ups[0] != nil && ups[0].Client == -1 && round > 0 {
		l.sums = append(l.sums, slices.Clone(ups[0].Words))
	}
	return l.Server.Aggregate(round, ups)
}

// TestRosterNoiseIgnoresCount mounts the noise attack on dp-ease's
// integer path that hdpmf, ldpop and dpals are pinned against: a server
// that announces 2^30 clients shrinks each device's Skellam share μ/⌊ρ·N⌋
// (the control: the counts release's noise, measured across two seeds,
// falls more than tenfold). Under a roster calibration the shares ignore
// the announced count: the sums are the same, bit for bit, at N = 200 and
// N = 2^30.
func TestRosterNoiseIgnoresCount(t *testing.T) {
	if maskplan.ParamClients != "clients" {
		t.Fatalf("the client count is broadcast as %q; deploy's roster check (Session.checkBroadcast) reads \"clients\"", maskplan.ParamClients)
	}
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 40, Rank: 3, PerUser: 10, MinPerUser: 5, Zipf: 0.5, Noise: 0.3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Aggregation, cfg.Seeded, cfg.TopItems = protocol.AggMasked, true, 10
	run := func(clients, roster float64, seed uint64) [][]uint32 {
		srv, err := NewServer(cfg, d.Public(), 1)
		if err != nil {
			t.Fatal(err)
		}
		cl := mustClients(t, d, cfg)
		l := &lyingServer{Server: srv, clients: clients, roster: roster}
		if err := protocol.Run(context.Background(), l, cl.List, protocol.RunOptions{Seed: seed, Aggregation: protocol.AggMasked}); err != nil {
			t.Fatal(err)
		}
		if len(l.sums) == 0 {
			t.Fatal("no masked release after setup")
		}
		return l.sums
	}
	// noise is the mean |difference| of the counts release's sums under
	// two seeds: the data cancels, the noise (and rounding) does not.
	noise := func(clients, roster float64) float64 {
		a, b := run(clients, roster, 3)[0], run(clients, roster, 4)[0]
		var s float64
		for k := range len(a) - 1 { // not the arrival word
			s += math.Abs(float64(int32(a[k] - b[k])))
		}
		return s / float64(len(a)-1)
	}
	honest, lying := noise(200, 0), noise(1<<30, 0)
	t.Logf("count-calibrated: mean |noise| %.0f at N = 200, %.0f at N = 2^30", honest, lying)
	if lying > honest/10 {
		t.Fatalf("control: an inflated count did not shrink the shares (%.0f vs %.0f)", lying, honest)
	}
	ref, got := run(200, 200, 3), run(1<<30, 200, 3)
	if len(ref) != len(got) {
		t.Fatalf("roster calibration: %d releases at N = 200, %d at N = 2^30", len(ref), len(got))
	}
	for r := range ref {
		if !slices.Equal(ref[r], got[r]) {
			t.Fatalf("roster calibration: release %d differs when the server announces 2^30 clients", r)
		}
	}
	t.Logf("roster calibration: mean |noise| %.0f at N = 200 and at N = 2^30", noise(1<<30, 200))
}

// TestSetRoster checks the served path's roster: a server built without a
// roster (a deployment's, before enrolment closes) and given one by
// SetRoster resolves the same budget split and popularity mode as one
// built with it (in process, WithRoster), also across a restart; a
// config's own roster wins; and the split cannot change after a release.
func TestSetRoster(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Eps, cfg.Delta = 1, 1e-6
	for _, n := range []int{50, 610, 100000} {
		want := cfg
		want.Roster = n
		built, err := NewServer(want, ratings.AnonymousItems(500, ratings.Scale{}), 1)
		if err != nil {
			t.Fatal(err)
		}
		late, err := NewServer(cfg, ratings.AnonymousItems(500, ratings.Scale{}), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := late.SetRoster(n); err != nil {
			t.Fatal(err)
		}
		if late.PopularityMode() != built.PopularityMode() || late.cfg.FracCounts != built.cfg.FracCounts || late.sigmaC != built.sigmaC {
			t.Errorf("roster %d: SetRoster gives popularity mode %v, frac %v; built with it: %v, %v",
				n, late.PopularityMode(), late.cfg.FracCounts, built.PopularityMode(), built.cfg.FracCounts)
		}
		if err := late.SetRoster(n); err != nil || late.cfg.FracCounts != built.cfg.FracCounts {
			t.Errorf("roster %d: a second SetRoster (a restart) = %v, frac %v", n, err, late.cfg.FracCounts)
		}
	}
	small := cfg
	small.Roster = 50
	given, _ := NewServer(small, ratings.AnonymousItems(500, ratings.Scale{}), 1)
	frac := given.cfg.FracCounts
	if err := given.SetRoster(100000); err != nil || given.cfg.FracCounts != frac {
		t.Errorf("a config's roster 50 was overridden by SetRoster(100000): frac %v → %v (%v)", frac, given.cfg.FracCounts, err)
	}
	// After the first round the split is fixed.
	d := synth(40, 30, 1)
	srv, err := NewServer(cfg, d.Public(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := srv.Broadcast(0)
	if err != nil {
		t.Fatal(err)
	}
	cl := mustClients(t, d, cfg)
	var ups []*protocol.Upload
	for k, c := range cl.List {
		up, err := c.Round(b, rng.New(1, uint64(k)))
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, up)
	}
	if err := srv.Aggregate(0, ups); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRoster(40); err == nil {
		t.Error("SetRoster after round 0 succeeded: the split would change within a run")
	}
}

// skipping drops the sum of one round after setup, as a deployment does
// with a round whose secure aggregation failed (skipped whole).
type skipping struct {
	*Server
	skip int
}

func (s *skipping) Aggregate(round int, ups []*protocol.Upload) error {
	if round == s.skip {
		ups = []*protocol.Upload{}
	}
	return s.Server.Aggregate(round, ups)
}

// TestSkippedRoundCostsNothing: a masked round skipped whole released
// nothing, so it costs no ε: the run's spent ε stays finite and at most
// the target, on the roster and over cohorts. Before the fix a skipped
// round counted as a release whose noise never arrived: ε unbounded.
func TestSkippedRoundCostsNothing(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 40, Rank: 3, PerUser: 10, MinPerUser: 5, Zipf: 0.5, Noise: 0.3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, cohort := range []int{0, 100} {
		cfg := DefaultConfig()
		cfg.Aggregation, cfg.Seeded, cfg.TopItems = protocol.AggMasked, true, 10
		if cohort > 0 {
			cfg.Cohort, cfg.CohortRounds = cohort, 2
		}
		srv, err := NewServer(cfg, d.Public(), 1)
		if err != nil {
			t.Fatal(err)
		}
		s := &skipping{Server: srv, skip: 2}
		cl := mustClients(t, d, cfg)
		if err := protocol.Run(context.Background(), s, cl.List, protocol.RunOptions{Seed: 3, Aggregation: protocol.AggMasked}); err != nil {
			t.Fatal(err)
		}
		eps, _, ok := srv.Spent()
		if !ok || !(eps > 0) || eps > cfg.Eps+1e-9 {
			t.Errorf("cohort %d: ε spent %v (ok %v) with round 2 skipped, want within (0, %g]", cohort, eps, ok, cfg.Eps)
		}
	}
}
