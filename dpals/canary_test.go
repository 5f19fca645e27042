package dpals

import (
	"math"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// TestChargedBlocksCoverEveryUpload checks Charged against the protocol:
// in every round with a release, its blocks cover exactly the upload's
// coordinates (the integer path's arrival word excluded), each with a
// positive sensitivity; rounds without one (setup, final) have none.
func TestChargedBlocksCoverEveryUpload(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 30, Items: 25, Rank: 2, PerUser: 6, Noise: 0.3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"dp-als, factor rounds": func(c *Config) { c.Rounds, c.InitItems = 2, 10 },
		"per-item Gramians":     func(c *Config) { c.Rounds, c.InitItems, c.SharedGram = 1, 10, false },
		"dp-biases":             func(c *Config) { *c = BiasesConfig() },
		"integer path":          func(c *Config) { c.Rounds, c.InitItems, c.Aggregation = 1, 10, protocol.AggMasked },
	}
	for name, mod := range cases {
		cfg := DefaultConfig()
		mod(&cfg)
		srv, err := NewServer(cfg, d, 1)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := NewClients(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl.Noiseless()
		released := 0
		for round := 0; !srv.Done() && round < 100; round++ {
			b, err := srv.Broadcast(round)
			if err != nil {
				t.Fatal(err)
			}
			bs, err := Charged(cfg, d.NumItems(), round)
			if err != nil {
				t.Fatal(err)
			}
			var ups []*protocol.Upload
			var sum []uint32
			for _, c := range cl.List {
				up, err := c.Round(b, rng.New(1, uint64(c.ID()), uint64(round)))
				if err != nil {
					t.Fatal(err)
				}
				if up == nil {
					continue
				}
				cp := *up
				ups = append(ups, &cp)
				if b.Words > 0 {
					if sum == nil {
						sum = make([]uint32, b.Words)
					}
					for k, w := range cp.DenseWords(b) {
						sum[k] += w
					}
				}
			}
			size := 0
			for _, x := range bs {
				size += x.Size
				if !(x.L2 > 0) || !(x.L1 > 0) || math.IsNaN(x.L1) {
					t.Errorf("%s round %d: block %q charges L1 %g, L2 %g", name, round, x.Name, x.L1, x.L2)
				}
			}
			want := 0
			switch {
			case b.Phase != protocol.PhaseTrain:
			case b.Words > 0:
				want = b.Words - 1
			case len(ups) > 0:
				want = len(ups[0].Scalars)
			}
			if size != want {
				t.Errorf("%s round %d: blocks cover %d coordinates, the upload has %d", name, round, size, want)
			}
			if size > 0 {
				released++
			}
			if sum != nil {
				ups = []*protocol.Upload{{Client: -1, Round: round, Words: sum}}
			}
			if err := srv.Aggregate(round, ups); err != nil {
				t.Fatal(err)
			}
		}
		if released == 0 {
			t.Errorf("%s: no round released anything", name)
		}
	}
}
