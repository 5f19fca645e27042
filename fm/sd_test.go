package fm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
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

// TestSDServerSplitsRowMoves: one upload for item 0 moves its collapsed
// factor row q_0 exactly as SDMF's server moves a row (−η_tΛ q − G, G the
// mean data gradient), its bias within second-order terms; each of its
// attributes takes AttrStep × its least-squares share x·G/x², the item the
// rest; item 1, which received nothing, moves only through its attribute.
func TestSDServerSplitsRowMoves(t *testing.T) {
	const k = 3
	enc := &Encoding{Features: Items, NumItems: 2, NumItemAttrs: 2,
		ItemAttrs: [][]Feat{{{0, 0.5}, {1, 1}}, {{0, 1}}}}
	cfg := smallSD(Items, 3)
	cfg.Dim, cfg.Temp, cfg.ServerStep, cfg.ServerPseudo, cfg.InitScale, cfg.AttrStep = k+1, 0, 1, 0, 0.5, 0.8
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
	row0, row1 := append([]float32(nil), b.Row(0)...), append([]float32(nil), b.Row(1)...)
	w0, v0 := append([]float32(nil), s.w...), append([]float32(nil), s.v...)
	G := []float64{0.2, -0.1, 0.3, 0.05} // the row's mean data gradient
	up := &protocol.Upload{Client: 0, Round: 0, Items: []int32{0}}
	for d := range k + 1 {
		up.Values = append(up.Values, float32(G[d]+eta*lam*float64(row0[d])))
	}
	if err := s.Aggregate(0, []*protocol.Upload{up}); err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	rows, _ := s.Factors()
	for d := 1; d <= k; d++ {
		near(fmt.Sprintf("q_0[%d]", d-1), float64(rows[d]), float64(row0[d])-eta*lam*float64(row0[d])-G[d], 1e-5)
	}
	// the prior shrinks the biases, not the interactions c_0 within the row
	lin0 := float64(w0[0]) + 0.5*float64(w0[2]) + float64(w0[3])
	near("b_0", float64(rows[0]), float64(row0[0])-eta*lam*lin0-G[0], 1e-5)
	// attribute a (server feature 2 + a) with value x in item 0
	for a, x := range []float64{0.5, 1} {
		f := 2 + a
		near(fmt.Sprintf("w of attribute %d", a), float64(s.w[f]), float64(w0[f])-eta*lam*float64(w0[f])-cfg.AttrStep*x*G[0]/(x*x), 1e-5)
		for d := range k {
			near(fmt.Sprintf("v of attribute %d [%d]", a, d), float64(s.v[f*k+d]), float64(v0[f*k+d])-eta*lam*float64(v0[f*k+d])-cfg.AttrStep*x*G[1+d]/(x*x), 1e-5)
		}
	}
	// item 1 kept its own parameters; its row moved with attribute 0 only
	if s.w[1] != w0[1] || s.v[k] != v0[k] {
		t.Errorf("item 1's own parameters moved without an upload")
	}
	for d := range k {
		moved := float64(s.v[2*k+d] - v0[2*k+d])
		near(fmt.Sprintf("q_1[%d]", d), float64(rows[(k+1)+1+d]), float64(row1[1+d])+moved, 1e-5)
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
		{"attr step", func(c *SDConfig) { c.AttrStep = 1.5 }},
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

// TestSDAttributesLearnTheGenre: on data where a genre decides the rating
// (every user rates genre a 4.5, genre b 2, ± noise), SD-FM's genre biases
// take up the gap under SDMF's randomization, and the model is no worse
// than SDMF's.
func TestSDAttributesLearnTheGenre(t *testing.T) {
	const nU, nI = 60, 40
	r := rand.New(rand.NewPCG(9, 10))
	items := map[string]ratings.ItemSide{}
	b := ratings.NewBuilder("genre-offsets", ratings.Stars5)
	for i := range nI {
		items[itoa(i)] = ratings.ItemSide{Genres: []int16{int16(i % 2)}}
	}
	for u := range nU {
		for i := range nI {
			if r.Float64() > 0.3 {
				continue
			}
			v := 2 + 2.5*float64(1-i%2) + 0.4*r.NormFloat64()
			if err := b.Add(itoa(u), itoa(i), float32(math.Round(math.Max(1, math.Min(5, v))))); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := b.Dataset()
	d.Side = ratings.StaticSide(&ratings.Side{Genres: []string{"a", "b"}, Items: items})
	spl, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := smallSD(Items, 40)
	enc, err := Encode(spl.Train, Items, cfg.YearBucket)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sdcf.NewClients(spl.Train, cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewSDServer(cfg, enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.Run(context.Background(), srv, cl.List, protocol.RunOptions{Seed: cfg.Seed, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	s := srv.(*sdServer)
	genre := map[string]float32{}
	for a, name := range enc.Names {
		genre[name] = s.w[s.nItems+a]
	}
	gap := genre["genre=a"] - genre["genre=b"]
	rows, _ := srv.Factors()
	m, err := cl.Model(slices.Clone(rows))
	if err != nil {
		t.Fatal(err)
	}
	sdmf, _, err := sdcf.Train(context.Background(), spl.Train, cfg.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, base := eval.Rating(m, spl.Test).RMSE, eval.Rating(sdmf, spl.Test).RMSE
	t.Logf("genre bias gap %.3f (ratings: 2.5); test RMSE %.4f, SDMF %.4f", gap, got, base)
	if !(gap > 1) {
		t.Errorf("genre bias gap %.3f, want > 1 of the ratings' 2.5", gap)
	}
	if !(got < base+0.01) {
		t.Errorf("test RMSE %.4f, SDMF's %.4f", got, base)
	}
}
