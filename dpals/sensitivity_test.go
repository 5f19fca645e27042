package dpals

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// withCanary returns d with one more user, the canary, whose ratings are
// given by rate (item → rating, 0 for none), and d itself re-indexed to the
// same user space (the canary's row empty): two neighbouring datasets.
func withCanary(d *ratings.Dataset, rate func(j int) float32) (without, with *ratings.Dataset) {
	ids := append(append([]string(nil), d.UserIDs...), "canary")
	without = &ratings.Dataset{Name: d.Name, Scale: d.Scale, Users: d.Users, Items: d.Items, Values: d.Values, UserIDs: ids, ItemIDs: d.ItemIDs}
	with = &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: ids, ItemIDs: d.ItemIDs}
	with.Users = append(with.Users, d.Users...)
	with.Items = append(with.Items, d.Items...)
	with.Values = append(with.Values, d.Values...)
	c := int32(len(ids) - 1)
	for j := range d.NumItems() {
		if r := rate(j); r > 0 {
			with.Users = append(with.Users, c)
			with.Items = append(with.Items, int32(j))
			with.Values = append(with.Values, r)
		}
	}
	return without, with
}

// trainer runs single releases of the protocol on a server with pinned
// public state and the clients of a dataset, for tests.
type trainer struct {
	*server
	cl *Clients
}

// run runs step st as one round of the protocol: the server's broadcast,
// every client's upload, their sum and the server's release.
func (t *trainer) run(st step) {
	t.steps, t.round = []step{st, {kind: kindFinal}}, 0
	b, err := t.Broadcast(0)
	if err != nil {
		panic(err)
	}
	var ups []*protocol.Upload
	for _, c := range t.cl.List {
		up, err := c.Round(b, rng.New(t.seed, uint64(c.ID()), 0))
		if err != nil {
			panic(err)
		}
		if up != nil {
			cp := *up
			ups = append(ups, &cp)
		}
	}
	if err := t.Aggregate(0, ups); err != nil {
		panic(err)
	}
}

func (t *trainer) releaseMean(rho float64)        { t.run(step{kind: kindMean, rho: rho}) }
func (t *trainer) biasRound(r int, rho float64)   { t.run(step{kind: kindBias, idx: r, rho: rho}) }
func (t *trainer) factorRound(r int, rho float64) { t.run(step{kind: kindFactor, idx: r, rho: rho}) }
func (t *trainer) spectralInit(rho float64)       { t.run(step{kind: kindInit, rho: rho}) }

// pinned returns a trainer on d whose public state (μ, item biases and
// factors, popularity weights and counts, active items) is fixed by seed,
// whatever d holds, so that a release run on two neighbouring datasets
// differs only by the one user's contribution.
func pinned(d *ratings.Dataset, cfg Config, seed uint64) *trainer {
	s, err := newServer(cfg, d.NumItems(), nil, 1)
	if err != nil {
		panic(err)
	}
	cl, err := NewClients(d, cfg)
	if err != nil {
		panic(err)
	}
	t := &trainer{server: s, cl: cl}
	t.k, t.factors = cfg.Dim, true
	g := rng.New(seed, 99)
	t.mu = 3.5
	t.bi, t.bBias, t.weight, t.count = make([]float64, t.ni), make([]float64, t.ni), make([]float64, t.ni), make([]float64, t.ni)
	t.active = make([]bool, t.ni)
	for j := range t.ni {
		t.bi[j] = 0.4 * g.NormFloat64()
		t.bBias[j] = t.bi[j]
		t.count[j] = 50 * g.Float64()
		t.weight[j] = math.Pow(t.count[j]+1, -0.5)
		t.active[j] = g.IntN(3) > 0
	}
	t.v = make([]float64, t.ni*t.k)
	for k := range t.v {
		t.v[k] = g.NormFloat64()
	}
	return t
}

// TestOneUserMovesEveryReleaseByAtMostItsSensitivity runs every kind of
// release on neighbouring datasets (with and without a canary user) from
// the same public state and checks that the noise-free sums move by at most
// the L2 sensitivity the ledger charges for, for canaries built to push
// the bound: every item rated at an extreme, one rating, alternating
// extremes. It also checks the bound is not vacuous: the heaviest canary
// moves some release by more than a quarter of its sensitivity.
func TestOneUserMovesEveryReleaseByAtMostItsSensitivity(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 300, Items: 60, Rank: 3, PerUser: 15, Noise: 0.3}, 11)
	if err != nil {
		t.Fatal(err)
	}
	canaries := map[string]func(j int) float32{
		"all fives":   func(int) float32 { return 5 },
		"all ones":    func(int) float32 { return 1 },
		"one rating":  func(j int) float32 { return map[bool]float32{true: 5}[j == 7] },
		"alternating": func(j int) float32 { return float32(1 + 4*(j%2)) },
	}
	type release func(tr *trainer)
	cfgs := map[string]func(*Config){
		"plain":             func(c *Config) {},
		"clip-norm":         func(c *Config) { c.ClipNorm = 0.5 },
		"cap c=5, norm-u 2": func(c *Config) { c.MaxRatings, c.NormU = 5, 2 },
		"shared Gramian":    func(c *Config) { c.SharedGram = true },
	}
	releases := map[string]release{
		"mean":   func(tr *trainer) { tr.releaseMean(0.1) },
		"bias":   func(tr *trainer) { tr.biasRound(0, 0.1) },
		"factor": func(tr *trainer) { tr.factorRound(1, 0.1) },
		"init":   func(tr *trainer) { tr.spectralInit(0.1) },
	}
	for cn, mod := range cfgs {
		for rn, rel := range releases {
			var most float64
			for name, rate := range canaries {
				cfg := DefaultConfig()
				cfg.Dim, cfg.InitItems = 3, 40
				mod(&cfg)
				without, with := withCanary(d, rate)
				sums := [2]map[string][]float64{{}, {}}
				var charged []float64
				var names []string
				for k, ds := range []*ratings.Dataset{without, with} {
					tr := pinned(ds, cfg, 5)
					tr.rec = func(n string, s []float64) { sums[k][n] = s; names = append(names, n) }
					rel(tr)
					for _, r := range tr.led.Releases() {
						charged = append(charged, r.L2)
					}
				}
				names = names[:len(names)/2]
				charged = charged[:len(charged)/2]
				if len(names) != len(charged) {
					t.Fatalf("%s/%s: %d recorded sums for %d ledger releases", cn, rn, len(names), len(charged))
				}
				for k, n := range names {
					var d2 float64
					for i, x := range sums[1][n] {
						d2 += (x - sums[0][n][i]) * (x - sums[0][n][i])
					}
					diff := math.Sqrt(d2)
					if diff > charged[k]*(1+1e-9) {
						t.Errorf("%s/%s, canary %s: release %q moved by %g, sensitivity charged %g", cn, rn, name, n, diff, charged[k])
					}
					most = max(most, diff/charged[k])
				}
			}
			if most < 0.25 {
				t.Errorf("%s/%s: no canary moved a release by a quarter of its sensitivity (at most %.3g of it)", cn, rn, most)
			}
			t.Log(fmt.Sprintf("%s/%s: largest move %.3f of the sensitivity", cn, rn, most), strings.Repeat("", 0))
		}
	}
}
