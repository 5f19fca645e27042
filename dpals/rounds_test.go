package dpals

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// TestML1MRoundSeconds times every round of dp-als at its defaults on
// ML-1M's random 80% (its public catalog loaded), Gaussian (ideal) and
// integer (masked, sums added directly: the SecAgg+ protocol's result),
// when PRIVREC_DPALS_ROUNDS is set and PRIVREC_DATA holds ml-1m.
func TestML1MRoundSeconds(t *testing.T) {
	root := os.Getenv("PRIVREC_DATA")
	if root == "" || os.Getenv("PRIVREC_DPALS_ROUNDS") == "" {
		t.Skip("PRIVREC_DPALS_ROUNDS or PRIVREC_DATA not set")
	}
	d, _, err := datasets.Open(filepath.Join(root, "ml-1m"), ratings.LoadOptions{Scale: &ratings.Stars5, Catalog: true})
	if err != nil {
		t.Skip(err)
	}
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, agg := range []protocol.Aggregation{protocol.AggIdeal, protocol.AggMasked} {
		cfg := DefaultConfig()
		cfg.Aggregation = agg
		srv, err := NewServer(cfg, s.Train, 1)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := NewClients(s.Train, cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		opt := protocol.RunOptions{Seed: 1, Aggregation: agg, OnRound: func(info protocol.RoundInfo) error {
			b, _ := srv.(*server).steps[info.Round], 0
			t.Logf("%s round %2d (kind %d): %.2f s", agg, info.Round, b.kind, info.Elapsed.Seconds())
			return nil
		}}
		if err := protocol.Run(context.Background(), srv, cl.List, opt); err != nil {
			t.Fatal(err)
		}
		v, _ := srv.Factors()
		m, rep, err := cl.Finish(v)
		if err != nil {
			t.Fatal(err)
		}
		var se float64
		for k := range s.Test.Len() {
			e := float64(s.Test.Values[k] - m.Predict(s.Test.Users[k], s.Test.Items[k]))
			se += e * e
		}
		t.Logf("%s: %d clients, %d items, test RMSE %.4f, ε %.4f, %.1f s in all", agg, len(cl.List), s.Train.NumItems(),
			math.Sqrt(se/float64(s.Test.Len())), rep.Eps, time.Since(start).Seconds())
	}
}
