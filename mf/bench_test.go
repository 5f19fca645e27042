package mf

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkEpochML1M measures one SGD epoch over all of MovieLens 1M with
// every core, reporting rating updates per second.
func BenchmarkEpochML1M(b *testing.B) {
	d := ml1m(b)
	for _, biased := range []bool{true, false} {
		for _, k := range []int{10, 50} {
			b.Run(fmt.Sprintf("K=%d/biased=%v", k, biased), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.Dim, cfg.Biased, cfg.Epochs, cfg.Schedule = k, biased, 1, Constant
				t := newTrainer(d, cfg)
				ctx := context.Background()
				b.ResetTimer()
				for n := 0; n < b.N; n++ {
					if err := t.epoch(ctx, n, 0.001); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(d.Len())*float64(b.N)/b.Elapsed().Seconds(), "updates/s")
			})
		}
	}
}
