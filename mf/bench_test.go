package mf

import (
	"context"
	"fmt"
	"testing"

	"github.com/privrec/privrec/internal/vec"
)

// BenchmarkEpochML1M measures one SGD epoch over all of MovieLens 1M with
// every core, reporting rating updates per second, for every kernel level
// this CPU has side by side (impl=generic is the pure Go path):
//
//	PRIVREC_DATA=... go test -run - -bench EpochML1M -count 5 ./mf > epoch.txt
//	benchstat -col /impl epoch.txt
func BenchmarkEpochML1M(b *testing.B) {
	d := ml1m(b)
	var levels []vec.Level
	for l := vec.Generic; l <= vec.Best(); l++ {
		levels = append(levels, l)
	}
	for _, biased := range []bool{false, true} {
		for _, k := range []int{10, 32, 50, 128} {
			for _, l := range levels {
				b.Run(fmt.Sprintf("K=%d/biased=%v/impl=%v", k, biased, l), func(b *testing.B) {
					prev := vec.SetLevel(l)
					defer vec.SetLevel(prev)
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
}
