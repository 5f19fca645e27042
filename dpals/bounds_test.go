package dpals

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/protocol/protocoltest"
	"github.com/privrec/privrec/ratings"
)

// checkedRun runs cfg masked in process on train, with client 0 replaced
// by hostile (when not nil) and every client dropping out with
// probability drop, and returns the round infos.
func checkedRun(t *testing.T, train *ratings.Dataset, cfg Config, seed uint64, drop float64, hostile *protocoltest.Tamperer) ([]protocol.RoundInfo, error) {
	t.Helper()
	cfg.Aggregation = protocol.AggMasked
	srv, err := newServer(cfg, train.NumItems(), nil, seed)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClients(train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	list := slices.Clone(cl.List)
	if drop > 0 {
		for k, c := range list {
			list[k] = &protocoltest.Dropper{Client: c, P: drop}
		}
	}
	if hostile != nil {
		hostile.Client = list[0]
		list[0] = hostile
	}
	var infos []protocol.RoundInfo
	err = protocol.Run(context.Background(), srv, list, protocol.RunOptions{Seed: seed, Aggregation: protocol.AggMasked,
		MaxRounds: srv.numRounds() + 1, OnRound: func(ri protocol.RoundInfo) error {
			infos = append(infos, ri)
			return nil
		}})
	return infos, err
}

// boundsConfig is a small dp-als with every kind of release: mean, bias
// rounds, the warm start and factor rounds.
func boundsConfig(shared bool, eps float64) Config {
	cfg := DefaultConfig()
	cfg.Eps, cfg.BiasRounds, cfg.Rounds, cfg.InitItems, cfg.SharedGram = eps, 2, 2, 10, shared
	return cfg
}

// TestHonestSumsPass: masked dp-als runs of every release kind, with and
// without a shared Gramian, at small and large ε, with and without
// dropouts: no honest sum is refused by CheckSum.
func TestHonestSumsPass(t *testing.T) {
	s := synthetic(t)
	train := s.Train.Subset(usersBelow(s.Train, 400))
	checked := 0
	for _, c := range []struct {
		shared bool
		eps    float64
		seed   uint64
		drop   float64
	}{
		{true, 1, 1, 0}, {false, 1, 2, 0}, {true, 50, 3, 0}, {false, 50, 4, 0.2}, {true, 0.2, 5, 0.3},
	} {
		infos, err := checkedRun(t, train, boundsConfig(c.shared, c.eps), c.seed, c.drop, nil)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		for _, ri := range infos {
			if ri.Rejected != nil {
				t.Fatalf("%+v: honest round %d refused: %v", c, ri.Round, ri.Rejected)
			}
			checked++
		}
	}
	t.Logf("%d honest rounds checked, none refused", checked)
}

// TestHostileSumsRefused: a client masking a value of ±2^28 into a
// release, or an arrival word above the inputs, or a setup count above
// them, gets the sum refused (RoundInfo.Rejected wrapping
// protocol.ErrOutOfBounds, naming the bound).
func TestHostileSumsRefused(t *testing.T) {
	s := synthetic(t)
	train := s.Train.Subset(usersBelow(s.Train, 400))
	for _, tc := range []struct {
		name   string
		from   int
		tamper func(b *protocol.Broadcast, w []uint32)
		want   string
	}{
		{"value 2^28 in the mean", 1, func(b *protocol.Broadcast, w []uint32) { w[0] += 1 << 28 }, "beyond"},
		{"value -2^28 in a bias round", 2, func(b *protocol.Broadcast, w []uint32) { w[len(w)/2] -= 1 << 28 }, "beyond"},
		{"arrivals above inputs", 1, func(b *protocol.Broadcast, w []uint32) { w[len(w)-1] += 1000 }, "arrivals"},
		{"setup count above inputs", 0, func(b *protocol.Broadcast, w []uint32) {
			if b.Phase == protocol.PhaseSetup {
				w[0] += 1000
			}
		}, "setup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &protocoltest.Tamperer{From: tc.from, Tamper: func(b *protocol.Broadcast, up *protocol.Upload) { tc.tamper(b, up.Words) }}
			infos, err := checkedRun(t, train, boundsConfig(true, 1), 6, 0, h)
			if err != nil && tc.from > 0 {
				t.Fatal(err)
			}
			if len(infos) <= tc.from {
				t.Fatalf("the run stopped after %d rounds (%v)", len(infos), err)
			}
			ri := infos[tc.from]
			if !errors.Is(ri.Rejected, protocol.ErrOutOfBounds) || !strings.Contains(ri.Rejected.Error(), tc.want) {
				t.Fatalf("round %d: %v, want ErrOutOfBounds naming %q", tc.from, ri.Rejected, tc.want)
			}
			for _, r := range infos[:tc.from] {
				if r.Rejected != nil {
					t.Fatalf("round %d before the tampering refused: %v", r.Round, r.Rejected)
				}
			}
			t.Logf("%v", ri.Rejected)
		})
	}
}

// usersBelow returns the rating indices of d's users below n.
func usersBelow(d *ratings.Dataset, n int) []int {
	var keep []int
	for k, u := range d.Users {
		if int(u) < n {
			keep = append(keep, k)
		}
	}
	return keep
}
