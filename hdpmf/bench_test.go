package hdpmf

import (
	"context"
	"testing"

	"github.com/privrec/privrec/internal/testdata"
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

func ml1m(b *testing.B) *ratings.Dataset {
	d, _, err := ratings.Load(testdata.Path(b, "ml-1m/ratings_uir_dense.tsv"), ratings.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkEpochML1M compares one federated HDPMF training round on all of
// MovieLens 1M at K = 10 (every client's user step, gradients and noise
// shares, the server's sum and step) under the ideal functionality (float
// gamma shares, per-item sums) and under masked aggregation (the integer
// path: quantized dense uploads, Skellam shares, sums mod 2^32; the
// masking itself is secagg's benchmark) with one plain mf SGD epoch at the
// same K (mf.Train with one epoch, unbiased, all cores).
func BenchmarkEpochML1M(b *testing.B) {
	d := ml1m(b)
	for _, agg := range []protocol.Aggregation{protocol.AggIdeal, protocol.AggMasked} {
		b.Run("federated-hdpmf-"+agg.String()+"/K=10", func(b *testing.B) {
			cfg := DefaultConfig(HDPMF)
			cfg.Rounds, cfg.Aggregation = 1<<20, agg
			if agg == protocol.AggMasked {
				cfg.Rounds = 1000 // the Skellam calibration composes over the rounds
			}
			srv, err := NewServer(cfg, d.Public(), cfg.Seed)
			if err != nil {
				b.Fatal(err)
			}
			cl, err := NewClients(d, cfg)
			if err != nil {
				b.Fatal(err)
			}
			in, err := protocol.NewInMem(cl.List, 0, 1)
			if err != nil {
				b.Fatal(err)
			}
			var tr protocol.Transport = protocol.NewSecureSum(in)
			if agg == protocol.AggMasked {
				tr = protocol.NewMaskedSum(in, 1)
			}
			ctx := context.Background()
			round := func(t int) {
				bc, err := srv.Broadcast(t)
				if err != nil {
					b.Fatal(err)
				}
				ups, err := tr.Exchange(ctx, bc)
				if err != nil {
					b.Fatal(err)
				}
				if err := srv.Aggregate(t, ups); err != nil {
					b.Fatal(err)
				}
			}
			round(0) // setup
			round(1) // first training round (no user step yet)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				round(n + 2)
			}
			b.ReportMetric(float64(d.Len())*float64(b.N)/b.Elapsed().Seconds(), "ratings/s")
		})
	}
	b.Run("mf-sgd/K=10", func(b *testing.B) {
		cfg := mf.DefaultConfig()
		cfg.Dim, cfg.Epochs, cfg.Biased, cfg.Schedule, cfg.LearnRate = 10, 1, false, mf.Constant, 0.001
		for n := 0; n < b.N; n++ {
			if _, err := mf.Train(context.Background(), d, cfg, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(d.Len())*float64(b.N)/b.Elapsed().Seconds(), "ratings/s")
	})
}
