package dpals

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/ratings"
)

// synthetic returns a planted rank-3 dataset split 80/20.
func synthetic(t *testing.T) ratings.Split {
	t.Helper()
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 3000, Items: 200, Rank: 3, PerUser: 40, MinPerUser: 10, Zipf: 0.5, Noise: 0.3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rmse returns the test RMSE of the model trained with cfg.
func rmse(t *testing.T, s ratings.Split, cfg Config, seed uint64) (float64, *Report) {
	t.Helper()
	m, rep, err := Train(context.Background(), s.Train, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	var se float64
	for k, v := range s.Test.Values {
		e := float64(m.Predict(s.Test.Users[k], s.Test.Items[k]) - v)
		se += e * e
	}
	return math.Sqrt(se / float64(s.Test.Len())), rep
}

func TestEveryReleaseIsAccounted(t *testing.T) {
	s := synthetic(t)
	for _, c := range []struct {
		name                    string
		dim, bias, rounds, init int
		eps, delta              float64
		shared                  bool
		wantReleases            int
		wantFactorReleases      int
	}{
		{"biases", 0, 1, 3, 0, 1, 1e-6, false, 1 + 2, 0},
		{"biases, 2 rounds", 0, 2, 0, 0, 10, 1e-5, false, 1 + 4, 0},
		{"factors", 4, 1, 3, 0, 1, 1e-6, false, 1 + 2 + 6, 6},
		{"factors, eps 5", 2, 2, 2, 0, 5, 1e-6, false, 1 + 4 + 4, 4},
		{"warm start only", 2, 1, 0, 50, 1, 1e-6, false, 1 + 2 + 1, 0},
		{"warm start, shared Gramian", 3, 2, 2, 50, 2, 1e-6, true, 1 + 4 + 1 + 6, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dim, cfg.BiasRounds, cfg.Rounds, cfg.Eps, cfg.Delta = c.dim, c.bias, c.rounds, c.eps, c.delta
			cfg.InitItems, cfg.SharedGram, cfg.TopItems = c.init, c.shared, 0
			_, rep := rmse(t, s, cfg, 1)
			rs := rep.Ledger.Releases()
			if len(rs) != c.wantReleases {
				t.Fatalf("%d releases, want %d: %+v", len(rs), c.wantReleases, rs)
			}
			var nf int
			for _, r := range rs {
				if strings.Contains(r.Name, "Gramian") || strings.Contains(r.Name, "right-hand") {
					nf++
				}
			}
			if nf != c.wantFactorReleases {
				t.Errorf("%d factor releases, want %d", nf, c.wantFactorReleases)
			}
			// The run spends exactly its budget: the ledger's ε is the
			// target, and its ρ the budget the target allows.
			if math.Abs(rep.Eps-c.eps) > 1e-6*c.eps {
				t.Errorf("ε = %g, want %g", rep.Eps, c.eps)
			}
			want, _ := rdp.ZCDPRhoFor(c.eps, c.delta)
			if got := rep.Ledger.Rho(); math.Abs(got-want) > 1e-9*want {
				t.Errorf("ρ = %g, want %g", got, want)
			}
		})
	}
}

func TestLearnsAtLargeEpsAndDegradesAtSmall(t *testing.T) {
	s := synthetic(t)
	mean := s.Train.Mean()
	var base float64
	for _, v := range s.Test.Values {
		base += (float64(v) - mean) * (float64(v) - mean)
	}
	base = math.Sqrt(base / float64(s.Test.Len()))
	cfg := DefaultConfig()
	cfg.Dim, cfg.Rounds, cfg.InitItems, cfg.TopItems = 3, 4, 0, 0
	cfg.Eps = 1e4
	big, _ := rmse(t, s, cfg, 1)
	cfg.Dim, cfg.Rounds = 0, 0
	biases, _ := rmse(t, s, cfg, 1) // the planted model has no biases
	cfg.Dim, cfg.Rounds, cfg.Eps = 3, 4, 0.01
	small, _ := rmse(t, s, cfg, 1)
	t.Logf("global mean %.4f, biases %.4f, factors ε=1e4 %.4f, ε=0.01 %.4f", base, biases, big, small)
	if !(big < 0.6*biases) || !(biases < base+0.02) {
		t.Errorf("at ε = 1e4: factors %.4f, biases %.4f, global mean %.4f: want factors < 0.6·biases ≈ mean", big, biases, base)
	}
	if !(small > big) {
		t.Errorf("ε = 0.01 gives %.4f, not worse than ε = 1e4's %.4f", small, big)
	}
}

func TestSameSeedSameModel(t *testing.T) {
	s := synthetic(t)
	cfg := DefaultConfig()
	cfg.Dim, cfg.MaxRatings, cfg.Beta = 2, 20, 0.5
	m1, _, err := Train(context.Background(), s.Train, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	m2, _, _ := Train(context.Background(), s.Train, cfg, 3)
	m3, _, _ := Train(context.Background(), s.Train, cfg, 4)
	if !slices.Equal(m1.V, m2.V) || !slices.Equal(m1.BI, m2.BI) || !slices.Equal(m1.U, m2.U) {
		t.Error("the same seed gave different models")
	}
	if slices.Equal(m1.V, m3.V) {
		t.Error("different seeds gave the same item factors")
	}
}

func TestValidateRejects(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"eps 0":         func(c *Config) { c.Eps = 0 },
		"eps inf":       func(c *Config) { c.Eps = math.Inf(1) },
		"delta 1":       func(c *Config) { c.Delta = 1 },
		"dim -1":        func(c *Config) { c.Dim = -1 },
		"bias rounds 0": func(c *Config) { c.BiasRounds = 0 },
		"rounds -1":     func(c *Config) { c.Rounds = -1 },
		"max ratings":   func(c *Config) { c.MaxRatings = -1 },
		"clip nan":      func(c *Config) { c.Clip = math.NaN() },
		"norm 0":        func(c *Config) { c.NormU = 0 },
		"beta -1":       func(c *Config) { c.Beta = -1 },
		"frac 1":        func(c *Config) { c.FracGram = 1 },
		"fracs sum":     func(c *Config) { c.FracMean, c.FracBias = 0.5, 0.5 },
		"reg user 0":    func(c *Config) { c.RegUser = 0 },
		"no ridge":      func(c *Config) { c.RegItem, c.RegNoise = 0, 0 },
		"init 0":        func(c *Config) { c.InitScale = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
		if _, _, err := Train(context.Background(), &ratings.Dataset{}, c, 1); err == nil {
			t.Errorf("%s: Train accepted it", name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := BiasesConfig().Validate(); err != nil {
		t.Errorf("biases defaults: %v", err)
	}
}

func TestTinyAndEmptyData(t *testing.T) {
	one := &ratings.Dataset{Scale: ratings.Scale{Min: 1, Max: 5, Step: 1}, Users: []int32{0}, Items: []int32{0}, Values: []float32{4},
		UserIDs: []string{"u"}, ItemIDs: []string{"i"}}
	empty := &ratings.Dataset{Scale: one.Scale}
	noItems := &ratings.Dataset{Scale: one.Scale, UserIDs: []string{"u"}}
	for name, d := range map[string]*ratings.Dataset{"one rating": one, "empty": empty, "no items": noItems} {
		for _, cfg := range []Config{DefaultConfig(), BiasesConfig(), func() Config {
			c := DefaultConfig()
			c.Rounds, c.SharedGram, c.Dim = 2, false, 4
			return c
		}()} {
			m, rep, err := Train(context.Background(), d, cfg, 1)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := m.Check(); err != nil {
				t.Errorf("%s: model: %v", name, err)
			}
			if math.Abs(rep.Eps-cfg.Eps) > 1e-6 {
				t.Errorf("%s: ε %g, want %g", name, rep.Eps, cfg.Eps)
			}
			if d.Len() > 0 {
				if p := m.Predict(0, 0); !(p >= 1 && p <= 5) {
					t.Errorf("%s: prediction %g", name, p)
				}
			}
		}
	}
}
