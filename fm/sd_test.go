package fm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/sdcf"
)

// smallSD returns SD-FM's defaults at a small size.
func smallSD(f Features, rounds int) SDConfig {
	c := DefaultSDConfig()
	c.Features, c.Dim, c.Rounds, c.Workers, c.Seed = f, 4, rounds, 2, 3
	return c
}

// TestSDIDsIsSDMF: with IDs only, SD-FM's server is SDMF's, so the run is
// SDMF's bit for bit.
func TestSDIDsIsSDMF(t *testing.T) {
	train, test := genreData(t)
	cfg := smallSD(IDs, 5)
	got, _, err := TrainSD(context.Background(), train, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := sdcf.Train(context.Background(), train, cfg.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := range want.V {
		if math.Float32bits(got.V[k]) != math.Float32bits(want.V[k]) {
			t.Fatalf("V[%d] = %v, SDMF's %v", k, got.V[k], want.V[k])
		}
	}
	if a, b := eval.Rating(got, test).RMSE, eval.Rating(want, test).RMSE; a != b {
		t.Fatalf("test RMSE %v, SDMF's %v", a, b)
	}
}

// TestSDServerChainRule: one upload of a row's exact gradient moves every
// public parameter by −η·(its FM gradient) (the attributes' divided by
// their weight x), which a finite difference of Params.Predict checks.
func TestSDServerChainRule(t *testing.T) {
	const k = 3
	enc := &Encoding{Features: Items, NumItems: 2, NumItemAttrs: 2,
		ItemAttrs: [][]Feat{{{0, 0.5}, {1, 1}}, {{0, 1}}}}
	cfg := smallSD(Items, 3)
	cfg.Dim, cfg.Temp, cfg.ServerStep, cfg.ServerPseudo, cfg.InitScale = k+1, 0, 1, 0, 0.5
	st, err := NewSDServer(cfg, enc)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*sdServer)
	r := rand.New(rand.NewPCG(7, 8))
	for x := range s.w {
		s.w[x] = float32(0.3 * r.NormFloat64())
	}
	s.collapse()
	b, err := s.Broadcast(0)
	if err != nil {
		t.Fatal(err)
	}
	eta, lam := b.Param("eta", 0), float64(cfg.Lambda)
	// The full FM: feature 0 is the user (w 0.2, factors p), then the
	// server's features shifted by one.
	p := []float32{0.4, -0.7, 0.25}
	full := &Params{Dim: k, W0: 0, W: append([]float32{0.2}, s.w...), V: append(append([]float32(nil), p...), s.v...)}
	fs := []Feat{{0, 1}, {1, 1}, {3, 0.5}, {4, 1}} // user, item 0, its attributes
	sum := make([]float32, k)
	const offset, rating = 3.0, 4.0
	e := float64(offset+full.Predict(fs, sum)) - rating
	row := b.Row(0)
	if got, want := float64(row[0])+float64(p[0]*row[1]+p[1]*row[2]+p[2]*row[3])+0.2, float64(full.Predict(fs, sum)); math.Abs(got-want) > 1e-5 {
		t.Fatalf("collapsed row predicts %v, the FM %v", got, want)
	}
	u := append([]float32{1}, p...)
	up := &protocol.Upload{Client: 0, Round: 0, Items: []int32{0}}
	for d := range k + 1 {
		up.Values = append(up.Values, float32(eta*(e*float64(u[d])+lam*float64(row[d]))))
	}
	grad := func(param *float32) float64 { // ∂ŷ/∂param by central differences
		old := *param
		*param = old + 1e-2
		hi := float64(full.Predict(fs, sum))
		*param = old - 1e-2
		lo := float64(full.Predict(fs, sum))
		*param = old
		return (hi - lo) / 2e-2
	}
	type check struct {
		name   string
		before float64
		want   float64
		got    func() float32
	}
	var checks []check
	// server features: item 0 (x = 1), item 1 (no upload), attribute 0
	// (x = 0.5 in item 0), attribute 1 (x = 1)
	weight := map[int]float64{0: 1, 2: 0.5, 3: 1}
	for f, x := range weight {
		f, x := f, x
		w := &full.W[1+f]
		checks = append(checks, check{fmt.Sprintf("w[%d]", f), float64(*w), float64(*w) - eta*lam*float64(*w) - eta*e*grad(w)/x, func() float32 { return s.w[f] }})
		for d := range k {
			d := d
			v := &full.V[(1+f)*k+d]
			checks = append(checks, check{fmt.Sprintf("v[%d][%d]", f, d), float64(*v), float64(*v) - eta*lam*float64(*v) - eta*e*grad(v)/x, func() float32 { return s.v[f*k+d] }})
		}
	}
	if err := s.Aggregate(0, []*protocol.Upload{up}); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if got := float64(c.got()); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("%s: %v → %v, want %v", c.name, c.before, got, c.want)
		}
	}
	// item 1 received nothing: its indicator stays, its row moves only
	// through its attribute
	if s.w[1] != full.W[2] {
		t.Errorf("item 1's bias moved without an upload")
	}
}

func TestSDSnapshot(t *testing.T) {
	train, _ := genreData(t)
	cfg := smallSD(Items, 4)
	enc, err := Encode(train, Items, 10)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sdcf.NewClients(train, cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewSDServer(cfg, enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.Run(context.Background(), &stopAfter{srv, 2}, cl.List, protocol.RunOptions{Seed: 3, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	snap, err := srv.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := NewSDServer(cfg, enc)
	if err := fresh.UnmarshalBinary(snap); err != nil {
		t.Fatal(err)
	}
	a, _ := srv.Factors()
	b, _ := fresh.Factors()
	if fresh.Round() != 2 || !bytes.Equal(f32bytes(a), f32bytes(b)) {
		t.Fatalf("restored server at round %d, rows equal %v", fresh.Round(), bytes.Equal(f32bytes(a), f32bytes(b)))
	}
	if err := fresh.UnmarshalBinary(snap[:len(snap)/2]); err == nil {
		t.Error("a truncated snapshot restored")
	}
	other := cfg
	other.Dim = 6
	o, _ := NewSDServer(other, enc)
	if err := o.UnmarshalBinary(snap); err == nil {
		t.Error("a snapshot of another shape restored")
	}
}

// stopAfter ends a run after n rounds.
type stopAfter struct {
	protocol.Stateful
	n int
}

func (s *stopAfter) Done() bool { return s.Round() >= s.n }

func f32bytes(x []float32) []byte {
	out := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b := math.Float32bits(v)
		out = append(out, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
	}
	return out
}

func TestSDConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*SDConfig)
	}{
		{"user attributes", func(c *SDConfig) { c.Features = All }},
		{"no item bias", func(c *SDConfig) { c.ItemBias = false }},
		{"drawn lambda", func(c *SDConfig) { c.Lambda = 0 }},
		{"bpr", func(c *SDConfig) { c.Loss = sdcf.BPR }},
		{"attr step", func(c *SDConfig) { c.AttrStep = math.Inf(1) }},
		{"year bucket", func(c *SDConfig) { c.YearBucket = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultSDConfig()
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) && !errors.Is(err, sdcf.ErrConfig) {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
	if err := DefaultSDConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestSDSideFeaturesHelp: under SDMF's randomized response, the genre
// feature rates the sparse items of genreData better than ids alone.
func TestSDSideFeaturesHelp(t *testing.T) {
	train, test := genreData(t)
	rmse := map[Features]float64{}
	for _, f := range []Features{IDs, Items} {
		cfg := smallSD(f, 40)
		m, rep, err := TrainSD(context.Background(), train, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rmse[f] = eval.Rating(m, test).RMSE
		t.Logf("%s: test RMSE %.4f, %.0f%% of uploads fake, %d item attributes", f, rmse[f], 100*rep.UnratedFraction, rep.ItemAttrs)
	}
	if !(rmse[Items] < rmse[IDs]-0.02) {
		t.Errorf("items RMSE %.4f, ids %.4f", rmse[Items], rmse[IDs])
	}
}
