package ldpop

import (
	"context"
	"fmt"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// BenchmarkPass times one LDP-OP training round that names every
// position of V (a pass, "V learned"), with the ideal functionality
// (float Laplace shares) and the integer path (quantization and Skellam
// shares), on a synthetic catalog of ML-100K's shape: 943 users, 1,682
// items, d = 10, every user uploading every position.
func BenchmarkPass(b *testing.B) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 943, Items: 1682, Rank: 3, PerUser: 100, MinPerUser: 20, Noise: 0.3}, 7)
	if err != nil {
		b.Fatal(err)
	}
	for _, agg := range []protocol.Aggregation{protocol.AggIdeal, protocol.AggMasked} {
		b.Run(fmt.Sprintf("secagg=%v", agg), func(b *testing.B) {
			cfg := DefaultConfig(LDPOP)
			cfg.PerRound, cfg.Aggregation = d.NumItems()*cfg.Dim, agg
			cfg.Rounds = b.N
			b.ReportAllocs()
			b.ResetTimer()
			if _, _, err := Train(context.Background(), d, cfg); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.NumUsers()*d.NumItems()*cfg.Dim)*float64(b.N)/b.Elapsed().Seconds(), "positions/s")
		})
	}
}
