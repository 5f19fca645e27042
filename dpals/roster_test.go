package dpals

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/maskplan"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// lyingServer announces its own client count to the clients (the
// "clients" parameter their shares are calibrated by) and, when roster is
// set, a roster calibration (protocol.ParamRoster); it keeps the sums of
// the masked releases after setup.
type lyingServer struct {
	protocol.Server
	clients, roster float64
	sums            [][]uint32
}

func (l *lyingServer) Broadcast(round int) (*protocol.Broadcast, error) {
	b, err := l.Server.Broadcast(round)
	if err == nil && b.Words > 0 && b.Phase == protocol.PhaseTrain {
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

// TestRosterNoiseIgnoresCount mounts issue 31's noise attack on DP-ALS's
// integer path: a server that announces 2^30 clients shrinks each
// client's Skellam share μ_t/⌊ρ·N⌋ (the control: the first release's
// noise, measured across two seeds, falls more than tenfold). Under a roster calibration
// (protocol.ParamRoster, which a deployment's clients check against the
// roster they pin) the shares ignore the announced count: the sums are
// the same, bit for bit, at N = 200 and N = 2^30.
func TestRosterNoiseIgnoresCount(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 40, Rank: 3, PerUser: 10, MinPerUser: 5, Zipf: 0.5, Noise: 0.3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Aggregation = protocol.AggMasked
	run := func(clients, roster float64, seed uint64) [][]uint32 {
		srv, err := NewServer(cfg, d, 1)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := NewClients(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		l := &lyingServer{Server: srv, clients: clients, roster: roster}
		if err := protocol.Run(context.Background(), l, cl.List, protocol.RunOptions{Seed: seed, Aggregation: protocol.AggMasked}); err != nil {
			t.Fatal(err)
		}
		if len(l.sums) == 0 {
			t.Fatal("no masked release after setup")
		}
		return l.sums
	}
	// noise is the mean |difference| of the first release's sums under
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
