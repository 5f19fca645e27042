package dpals

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/protocol"
)

// TestInterimTableEveryRound: what a served run publishes after each
// round (Factors, Biases: its interim release) exists from the first
// round on, finite and of the final table's shape, with the biases from
// the global mean's round on, for the pooled and unpooled bias paths,
// ideal and integer; at the end it is the final table (the devices'
// model scores as before).
func TestInterimTableEveryRound(t *testing.T) {
	s := synthetic(t)
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"unpooled biases, no features", func(c *Config) { c.PoolBias, c.UserFeatures = false, 0 }},
		{"masked", func(c *Config) { c.Aggregation = protocol.AggMasked }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Eps = 4
			tc.edit(&cfg)
			srv, err := NewServer(cfg, s.Train, 1)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := NewClients(s.Train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ni := s.Train.NumItems()
			biased := 0
			opt := protocol.RunOptions{Seed: 1, Aggregation: cfg.Aggregation, OnRound: func(info protocol.RoundInfo) error {
				v, k := srv.Factors()
				if len(v) != ni*k || slices.ContainsFunc(v, func(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }) {
					t.Errorf("round %d: %d values for %d items × %d, or a non-finite one", info.Round, len(v), ni, k)
				}
				if mu, bi, ok := srv.(protocol.Biased).Biases(); ok {
					biased++
					if len(bi) != ni || math.IsNaN(float64(mu)) {
						t.Errorf("round %d: mean %v, %d biases for %d items", info.Round, mu, len(bi), ni)
					}
				}
				return nil
			}}
			if err := protocol.Run(context.Background(), srv, cl.List, opt); err != nil {
				t.Fatal(err)
			}
			rounds, _ := Rounds(cfg)
			if biased < rounds-2 { // all but the setup (masked) or the mean's round
				t.Errorf("biases published after %d of %d rounds", biased, rounds)
			}
			v, _ := srv.Factors()
			m, _, err := cl.Finish(v)
			if err != nil {
				t.Fatal(err)
			}
			var se float64
			for k := range s.Test.Len() {
				e := float64(s.Test.Values[k] - m.Predict(s.Test.Users[k], s.Test.Items[k]))
				se += e * e
			}
			if rmse := math.Sqrt(se / float64(s.Test.Len())); !(rmse < 1.5) {
				t.Errorf("test RMSE %v", rmse)
			}
		})
	}
}
