package mf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// synthetic returns ratings of a random rank-3 model plus noise, rounded
// to the 1..5 scale, for nu users and ni items with density p.
func synthetic(nu, ni int, p float64, seed uint64) *ratings.Dataset {
	r := rng.New(seed)
	const k = 3
	U, V := make([]float64, nu*k), make([]float64, ni*k)
	for j := range U {
		U[j] = r.NormFloat64() * 0.8
	}
	for j := range V {
		V[j] = r.NormFloat64() * 0.8
	}
	d := &ratings.Dataset{Name: "synthetic", Scale: ratings.Stars5}
	for u := range nu {
		d.UserIDs = append(d.UserIDs, fmt.Sprint("u", u))
	}
	for i := range ni {
		d.ItemIDs = append(d.ItemIDs, fmt.Sprint("i", i))
	}
	for u := range nu {
		for i := range ni {
			if r.Float64() >= p {
				continue
			}
			x := 3 + 0.3*r.NormFloat64()
			for c := range k {
				x += U[u*k+c] * V[i*k+c]
			}
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32(i))
			d.Values = append(d.Values, float32(math.Max(1, math.Min(5, math.Round(x)))))
		}
	}
	return d
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"dim 0", func(c *Config) { c.Dim = 0 }, "Dim"},
		{"dim huge", func(c *Config) { c.Dim = MaxDim + 1 }, "Dim"},
		{"epochs 0", func(c *Config) { c.Epochs = 0 }, "Epochs"},
		{"rate 0", func(c *Config) { c.LearnRate = 0 }, "LearnRate"},
		{"rate NaN", func(c *Config) { c.LearnRate = math.NaN() }, "LearnRate"},
		{"rate Inf", func(c *Config) { c.LearnRate = math.Inf(1) }, "LearnRate"},
		{"schedule", func(c *Config) { c.Schedule = "cosine" }, "Schedule"},
		{"schedule empty", func(c *Config) { c.Schedule = "" }, "Schedule"},
		{"decay 0", func(c *Config) { c.Schedule, c.Decay = Exp, 0 }, "Decay"},
		{"decay > 1", func(c *Config) { c.Schedule, c.Decay = Exp, 1.5 }, "Decay"},
		{"reg < 0", func(c *Config) { c.Reg = -1 }, "Reg"},
		{"regbias NaN", func(c *Config) { c.RegBias = math.NaN() }, "RegBias"},
		{"init < 0", func(c *Config) { c.InitScale = -0.1 }, "InitScale"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			if got := err.Error(); !containsWord(got, tc.field) {
				t.Errorf("error %q does not name %s", got, tc.field)
			}
			if _, err := Train(context.Background(), synthetic(5, 5, 1, 1), c, nil); !errors.Is(err, ErrConfig) {
				t.Errorf("Train = %v, want ErrConfig", err)
			}
		})
	}
}

func containsWord(s, w string) bool {
	for k := 0; k+len(w) <= len(s); k++ {
		if s[k:k+len(w)] == w && (k+len(w) == len(s) || s[k+len(w)] == ' ') {
			return true
		}
	}
	return false
}

func TestRate(t *testing.T) {
	tests := []struct {
		sch    Schedule
		epochs int
		want   []float64
	}{
		{Constant, 4, []float64{1, 1, 1, 1}},
		{Step, 8, []float64{1, 1, 0.2, 0.2, 0.2, 0.2, 0.04, 0.04}},
		{Step, 10, []float64{1, 1, 1, 0.2, 0.2, 0.2, 0.2, 0.2, 0.04, 0.04}},
		{Exp, 3, []float64{1, 0.5, 0.25}},
	}
	for _, tc := range tests {
		c := Config{LearnRate: 1, Schedule: tc.sch, Decay: 0.5, Epochs: tc.epochs}
		for e, want := range tc.want {
			if got := c.rate(e); math.Abs(got-want) > 1e-12 {
				t.Errorf("%s, %d epochs: rate(%d) = %g, want %g", tc.sch, tc.epochs, e, got, want)
			}
		}
	}
}

func TestTrainLearns(t *testing.T) {
	d := synthetic(300, 200, 0.2, 7)
	train, test := split(d, 0.9, 1)
	for _, biased := range []bool{true, false} {
		t.Run(fmt.Sprint("biased=", biased), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dim, cfg.Epochs, cfg.Biased, cfg.LearnRate, cfg.Schedule, cfg.Reg = 5, 40, biased, 0.03, Constant, 0.02
			var stats []EpochStats
			m, err := Train(context.Background(), train, cfg, func(s EpochStats) { stats = append(stats, s) })
			if err != nil {
				t.Fatal(err)
			}
			if len(stats) != cfg.Epochs {
				t.Fatalf("%d epoch callbacks, want %d", len(stats), cfg.Epochs)
			}
			for k, s := range stats {
				if s.Epoch != k+1 || s.Updates != train.Len() || s.LearnRate != cfg.rate(k) {
					t.Errorf("stats[%d] = %+v", k, s)
				}
			}
			first, last := stats[0].TrainRMSE, stats[len(stats)-1].TrainRMSE
			if !(last < 0.8*first) {
				t.Errorf("train RMSE went from %.4f to %.4f", first, last)
			}
			// The constant predictor (training mean) is the baseline to beat.
			base := &model.Model{Default: float32(train.Mean()), Scale: train.Scale}
			got, ref := rmse(m, test), rmse(base, test)
			t.Logf("test RMSE %.4f, mean predictor %.4f", got, ref)
			if !(got < 0.8*ref) {
				t.Errorf("test RMSE %.4f not well below the mean predictor's %.4f", got, ref)
			}
			if m.NumUsers != train.NumUsers() || m.NumItems != train.NumItems() || !slices.Equal(m.UserIDs, train.UserIDs) || !slices.Equal(m.ItemIDs, train.ItemIDs) {
				t.Errorf("model index space does not match the data")
			}
			if biased != (m.BU != nil) {
				t.Errorf("biased %v but BU = %v", biased, m.BU != nil)
			}
		})
	}
}

// TestTrainDeterministic checks that the model depends on the seed but not
// on the number of workers.
func TestTrainDeterministic(t *testing.T) {
	d := synthetic(400, 300, 0.1, 3)
	cfg := DefaultConfig()
	cfg.Dim, cfg.Epochs = 7, 5
	train := func(workers int, seed uint64) (*model.Model, []float64) {
		c := cfg
		c.Workers, c.Seed = workers, seed
		var rm []float64
		m, err := Train(context.Background(), d, c, func(s EpochStats) { rm = append(rm, s.TrainRMSE) })
		if err != nil {
			t.Fatal(err)
		}
		return m, rm
	}
	ref, refRMSE := train(1, 1)
	for _, w := range []int{2, 3, 8, 0} {
		m, rm := train(w, 1)
		if !slices.Equal(m.U, ref.U) || !slices.Equal(m.V, ref.V) || !slices.Equal(m.BU, ref.BU) || !slices.Equal(m.BI, ref.BI) {
			t.Errorf("workers %d: model differs from workers 1", w)
		}
		if !slices.Equal(rm, refRMSE) {
			t.Errorf("workers %d: train RMSE %v, want %v", w, rm, refRMSE)
		}
	}
	if other, _ := train(2, 2); slices.Equal(other.U, ref.U) {
		t.Errorf("seeds 1 and 2 give the same model")
	}
}

func TestTrainCancel(t *testing.T) {
	d := synthetic(100, 100, 0.2, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := DefaultConfig()
	cfg.Epochs = 50
	epochs := 0
	m, err := Train(ctx, d, cfg, func(s EpochStats) {
		epochs++
		if s.Epoch == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || m != nil {
		t.Fatalf("Train = %v, %v; want nil, context.Canceled", m, err)
	}
	if epochs != 2 {
		t.Errorf("%d epochs ran after cancel at epoch 2", epochs)
	}
}

func TestTrainBadInput(t *testing.T) {
	good := synthetic(10, 10, 0.5, 1)
	tests := []struct {
		name string
		d    *ratings.Dataset
		want error
	}{
		{"nil", nil, ErrEmpty},
		{"empty", &ratings.Dataset{UserIDs: []string{"a"}, ItemIDs: []string{"b"}}, ErrEmpty},
		{"user out of range", &ratings.Dataset{Users: []int32{1}, Items: []int32{0}, Values: []float32{3}, UserIDs: []string{"a"}, ItemIDs: []string{"b"}}, nil},
		{"item negative", &ratings.Dataset{Users: []int32{0}, Items: []int32{-1}, Values: []float32{3}, UserIDs: []string{"a"}, ItemIDs: []string{"b"}}, nil},
		{"lengths", &ratings.Dataset{Users: []int32{0, 0}, Items: []int32{0}, Values: []float32{3}, UserIDs: []string{"a"}, ItemIDs: []string{"b"}}, nil},
		{"NaN", &ratings.Dataset{Users: []int32{0}, Items: []int32{0}, Values: []float32{float32(math.NaN())}, UserIDs: []string{"a"}, ItemIDs: []string{"b"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Train(context.Background(), tc.d, DefaultConfig(), nil)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Train = %v, want %v", err, tc.want)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.LearnRate = 50
	if _, err := Train(context.Background(), good, cfg, nil); !errors.Is(err, ErrDiverged) {
		t.Errorf("huge learning rate: Train = %v, want ErrDiverged", err)
	}
}

func TestArrange(t *testing.T) {
	d := synthetic(200, 150, 0.3, 5)
	g := arrange(d, 9)
	if len(g.es) != d.Len() || g.off[len(g.off)-1] != d.Len() {
		t.Fatalf("grid holds %d ratings, want %d", len(g.es), d.Len())
	}
	// Every rating appears once, translated back to original indices.
	type key struct{ u, i int32 }
	want := map[key]float32{}
	for k := range d.Values {
		want[key{d.Users[k], d.Items[k]}] = d.Values[k]
	}
	ublk, iblk := map[int32]int{}, map[int32]int{}
	for a := range NumBlocks {
		for b := range NumBlocks {
			for _, e := range g.block(a, b) {
				u, i := g.users[e.U], g.items[e.I]
				if v, ok := want[key{u, i}]; !ok || v != e.R {
					t.Fatalf("block (%d,%d) holds unknown rating (%d,%d,%g)", a, b, u, i, e.R)
				}
				delete(want, key{u, i})
				if x, ok := ublk[u]; ok && x != a {
					t.Fatalf("user %d in user blocks %d and %d", u, x, a)
				}
				if x, ok := iblk[i]; ok && x != b {
					t.Fatalf("item %d in item blocks %d and %d", i, x, b)
				}
				ublk[u], iblk[i] = a, b
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("%d ratings missing from the grid", len(want))
	}
	// Blocks are balanced: each user block holds close to 1/B of the ratings.
	for a := range NumBlocks {
		n := 0
		for b := range NumBlocks {
			n += len(g.block(a, b))
		}
		if exp := d.Len() / NumBlocks; n < exp*9/10 || n > exp*11/10 {
			t.Errorf("user block %d holds %d ratings, want about %d", a, n, exp)
		}
	}
}
