package hdpmf

import (
	"context"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestMaskedProvenTotalIsTheFloatPaths checks that the integer path
// (secagg=masked) is calibrated to the float path's proven user-level
// total, the smaller of basic composition and zCDP at δ: where zCDP wins
// (DPMF's small per-round ε over 100 rounds) and where basic composition
// does (HDPMF at ε = 1 a round over 20).
func TestMaskedProvenTotalIsTheFloatPaths(t *testing.T) {
	train, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 60, Items: 40, Rank: 2, PerUser: 8, Noise: 0.3}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		variant Variant
		rounds  int
	}{
		{"DPMF, zCDP wins", DPMF, 100},
		{"HDPMF, basic wins", HDPMF, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total := func(agg protocol.Aggregation) float64 {
				cfg := DefaultConfig(tc.variant)
				cfg.Rounds, cfg.Dim, cfg.Aggregation = tc.rounds, 3, agg
				_, rep, err := Train(context.Background(), train, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return rep.UserEpsTotal
			}
			float, masked := total(protocol.AggIdeal), total(protocol.AggMasked)
			t.Logf("proven user-level ε in total: float path %.4f, integer path %.4f", float, masked)
			if !(masked <= float*(1+1e-6)) || masked < float*(1-1e-3) {
				t.Errorf("integer path's proven total %.6g, the float path's %.6g", masked, float)
			}
		})
	}
}
