package fm

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/ratings"
)

// fixture loads a side-feature fixture of package ratings.
func fixture(t *testing.T, dir string) *ratings.Dataset {
	t.Helper()
	d, _, err := ratings.Load(filepath.Join("..", "ratings", "testdata", "side", dir), ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bruteForce is ŷ(x) by the definition, O(k·n²).
func bruteForce(p *Params, fs []Feat) float64 {
	y := float64(p.W0)
	for a, f := range fs {
		y += float64(p.W[f.Index] * f.Value)
		for _, g := range fs[a+1:] {
			var dot float64
			for d := range p.Dim {
				dot += float64(p.row(f.Index)[d]) * float64(p.row(g.Index)[d])
			}
			y += dot * float64(f.Value*g.Value)
		}
	}
	return y
}

func TestPredictIsRendlesIdentity(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ nF, dim, active int }{{3, 1, 1}, {10, 4, 3}, {50, 8, 7}, {200, 16, 12}} {
		p := &Params{Dim: tc.dim, W0: 0.3, W: make([]float32, tc.nF), V: make([]float32, tc.nF*tc.dim)}
		for k := range p.W {
			p.W[k] = float32(r.NormFloat64())
		}
		for k := range p.V {
			p.V[k] = float32(r.NormFloat64())
		}
		for range 20 {
			fs := make([]Feat, tc.active)
			for k, f := range r.Perm(tc.nF)[:tc.active] {
				fs[k] = Feat{int32(f), float32(r.Float64())}
			}
			got, want := float64(p.Predict(fs, make([]float32, tc.dim))), bruteForce(p, fs)
			if math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("%+v: Predict %v, by definition %v", tc, got, want)
			}
		}
	}
}

// TestModelIsTheFM: the model.Model of ToModel predicts what the FM
// predicts for every user and item pair, under every feature set.
func TestModelIsTheFM(t *testing.T) {
	d := fixture(t, "ml100k")
	r := rand.New(rand.NewPCG(3, 4))
	for _, f := range []Features{IDs, Items, All} {
		enc, err := Encode(d, f, 10)
		if err != nil {
			t.Fatal(err)
		}
		if f != IDs && enc.NumItemAttrs == 0 || f == All && enc.NumUserAttrs == 0 {
			t.Fatalf("%s: %d item and %d user attributes", f, enc.NumItemAttrs, enc.NumUserAttrs)
		}
		K := 5
		p := &Params{Dim: K, W0: 3.1, W: make([]float32, enc.NumFeatures()), V: make([]float32, enc.NumFeatures()*K)}
		for k := range p.W {
			p.W[k] = float32(0.3 * r.NormFloat64())
		}
		for k := range p.V {
			p.V[k] = float32(0.3 * r.NormFloat64())
		}
		m := ToModel(p, enc, d)
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
		for u := range d.NumUsers() {
			for i := range d.NumItems() {
				fs, _ := enc.appendFeatures(nil, int32(u), int32(i))
				want := bruteForce(p, fs)
				if got := float64(m.PredictRaw(int32(u), int32(i))); math.Abs(got-want) > 1e-4 {
					t.Fatalf("%s: user %d item %d: model %v, FM %v", f, u, i, got, want)
				}
			}
		}
	}
}

func TestEncodeFeatures(t *testing.T) {
	d := fixture(t, "ml1m")
	enc, err := Encode(d, All, 10)
	if err != nil {
		t.Fatal(err)
	}
	item := map[string]int{}
	for k, id := range d.ItemIDs {
		item[id] = k
	}
	names := func(fs []Feat, base int) map[string]float32 {
		out := map[string]float32{}
		for _, f := range fs {
			out[enc.Names[base+int(f.Index)]] = f.Value
		}
		return out
	}
	// 661: three genres weighted 1/3 each, the 1990s.
	got := names(enc.ItemAttrs[item["661"]], 0)
	want := map[string]float32{"genre=Animation": 1. / 3, "genre=Children's": 1. / 3, "genre=Musical": 1. / 3, "year=1990": 1}
	if len(got) != len(want) {
		t.Fatalf("item 661: %v, want %v", got, want)
	}
	for k, v := range want {
		if math.Abs(float64(got[k]-v)) > 1e-6 {
			t.Errorf("item 661: %s = %v, want %v", k, got[k], v)
		}
	}
	user := map[string]int{}
	for k, id := range d.UserIDs {
		user[id] = k
	}
	gotU := names(enc.UserAttrs[user["1"]], enc.NumItemAttrs)
	for _, k := range []string{"gender=F", "age=<18", "occupation=10"} {
		if gotU[k] != 1 {
			t.Errorf("user 1: %v lacks %s", gotU, k)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	synth := &ratings.Dataset{Name: "synth", Scale: ratings.Stars5, Users: []int32{0}, Items: []int32{0}, Values: []float32{3},
		UserIDs: []string{"1"}, ItemIDs: []string{"1"}}
	cases := []struct {
		name string
		d    *ratings.Dataset
		f    Features
		want string
	}{
		{"no side files", synth, Items, "no side files"},
		{"no user file", fixture(t, "mlcsv"), All, "no user file (looked for movies.csv)"},
		{"unknown features", synth, "genres", "want ids, items or all"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(tc.d, tc.f, 10)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.f != "genres" && !errors.Is(err, ErrSide) {
				t.Errorf("error %v does not wrap ErrSide", err)
			}
		})
	}
	if _, err := Encode(synth, IDs, 10); err != nil {
		t.Errorf("ids on a dataset without side files: %v", err)
	}
}

// genreData is a dataset whose ratings are driven by the items' genre:
// users love one genre and dislike the other; half the items have few
// ratings. Side features let an FM rate the sparse items by their genre.
func genreData(t *testing.T) (train, test *ratings.Dataset) {
	t.Helper()
	const nU, nI = 60, 80
	r := rand.New(rand.NewPCG(5, 6))
	items := map[string]ratings.ItemSide{}
	b := ratings.NewBuilder("genres", ratings.Stars5)
	for i := range nI {
		items[itoa(i)] = ratings.ItemSide{Genres: []int16{int16(i % 2)}, Year: 1990}
	}
	for u := range nU {
		likes := u % 2
		for i := range nI {
			keep := 0.5
			if i >= nI/2 {
				keep = 0.08 // sparse items
			}
			if r.Float64() > keep {
				continue
			}
			v := 2.0
			if i%2 == likes {
				v = 4.5
			}
			v += 0.3 * r.NormFloat64()
			if err := b.Add(itoa(u), itoa(i), float32(math.Round(math.Max(1, math.Min(5, v))))); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := b.Dataset()
	d.Side = ratings.StaticSide(&ratings.Side{Genres: []string{"a", "b"}, Items: items})
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s.Train, s.Test
}

func itoa(i int) string { return string(rune('A'+i/26)) + string(rune('a'+i%26)) }

func TestSideFeaturesHelp(t *testing.T) {
	train, test := genreData(t)
	rmse := map[Features]float64{}
	for _, f := range []Features{IDs, Items} {
		cfg := DefaultConfig()
		cfg.Features, cfg.Dim, cfg.Epochs, cfg.LR = f, 4, 40, 0.02
		m, rep, err := Train(context.Background(), train, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rmse[f] = eval.Rating(m, test).RMSE
		t.Logf("%s: test RMSE %.4f, train %.4f, %d features", f, rmse[f], rep.TrainRMSE, rep.NumFeatures)
	}
	mean := eval.Rating(baseline.FitMean(train), test).RMSE
	if !(rmse[IDs] < mean) {
		t.Errorf("ids: RMSE %.4f, global mean %.4f", rmse[IDs], mean)
	}
	if !(rmse[Items] < rmse[IDs]-0.05) {
		t.Errorf("items RMSE %.4f, ids %.4f: the genre feature should help sparse items", rmse[Items], rmse[IDs])
	}
}

func TestTrainErrors(t *testing.T) {
	d := fixture(t, "ml100k")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		is   error
	}{
		{"dim", func(c *Config) { c.Dim = 0 }, ErrConfig},
		{"lr", func(c *Config) { c.LR = math.NaN() }, ErrConfig},
		{"features", func(c *Config) { c.Features = "x" }, ErrConfig},
		{"diverges", func(c *Config) { c.LR = 1e6; c.Epochs = 3 }, ErrDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.edit(&cfg)
			_, _, err := Train(context.Background(), d, cfg, nil)
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Train(ctx, d, DefaultConfig(), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
