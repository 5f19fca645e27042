package hdpmf

import (
	"math"
	"testing"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestPartialSharesEps checks the rule a deployment records for a round
// on the plain-sum path (protocol.PartialShares): the clip times one
// rating's loss at the coverage of the noise shares, no finite bound below
// half the shares (the Γ(a) − Γ′(a) density's pole), and nothing for the
// noise-free Plain variant.
func TestPartialSharesEps(t *testing.T) {
	scale := ratings.Scale{Min: 1, Max: 5}
	cfg := DefaultConfig(HDPMF)
	cfg.Aggregation = protocol.AggIdeal
	srv, err := NewServer(cfg, ratings.AnonymousItems(10, scale), cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := srv.(protocol.PartialShares)
	if !ok {
		t.Fatal("the HDPMF server does not implement protocol.PartialShares")
	}
	for _, tc := range []struct {
		coverage float64
		want     float64
	}{
		{1, cfg.UserClip * cfg.Eps},
		{0.8, cfg.UserClip * dp.PartialSharesLoss(0.8, cfg.Eps, cfg.Dim)},
		{0.4, -1},
	} {
		eps, ok := ps.PartialSharesEps(tc.coverage)
		if !ok || math.Abs(eps-tc.want) > 1e-9*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("coverage %v: ε %v (%v), want %v", tc.coverage, eps, ok, tc.want)
		}
	}
	plain := cfg
	plain.Variant = Plain
	srv, err = NewServer(plain, ratings.AnonymousItems(10, scale), plain.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.(protocol.PartialShares).PartialSharesEps(1); ok {
		t.Error("Plain: a noise-free variant reports an ε for its noise shares")
	}
}
