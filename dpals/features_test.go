package dpals

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// TestUserFeaturesReleaseNothing checks that the user features are free:
// with and without them, a run with the same seed has the same releases
// (names, sensitivities, σ), the same ε and the same item biases; the
// model only gains the feature columns (the item bias, the standardized
// log count), and the training fit improves.
func TestUserFeaturesReleaseNothing(t *testing.T) {
	s := synthetic(t)
	for _, c := range []struct {
		name string
		dim  int
		f    int
	}{
		{"biases, item bias", 0, 1},
		{"biases, both", 0, 2},
		{"warm start, both", 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Eps, cfg.Dim, cfg.UserFeatures = 5, c.dim, 0
			if c.dim == 0 {
				cfg = BiasesConfig()
				cfg.Eps, cfg.UserFeatures = 5, 0
			}
			m0, r0, err := Train(context.Background(), s.Train, cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			cfg.UserFeatures = c.f
			m1, r1, err := Train(context.Background(), s.Train, cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			a, b := r0.Ledger.Releases(), r1.Ledger.Releases()
			if len(a) != len(b) {
				t.Fatalf("%d releases with features, %d without", len(b), len(a))
			}
			for k := range a {
				if a[k] != b[k] {
					t.Errorf("release %d differs: %+v with features, %+v without", k, b[k], a[k])
				}
			}
			if r0.Eps != r1.Eps {
				t.Errorf("ε %g with features, %g without", r1.Eps, r0.Eps)
			}
			if m1.Dim != m0.Dim+c.f {
				t.Fatalf("model Dim %d, want %d", m1.Dim, m0.Dim+c.f)
			}
			for j := range m0.BI {
				if m0.BI[j] != m1.BI[j] {
					t.Fatalf("item %d: bias %g with features, %g without", j, m1.BI[j], m0.BI[j])
				}
				if got := m1.V[j*m1.Dim+m0.Dim]; got != m0.BI[j] {
					t.Fatalf("item %d: first feature %g, want its bias %g", j, got, m0.BI[j])
				}
				for p := range m0.Dim {
					if m1.V[j*m1.Dim+p] != m0.V[j*m0.Dim+p] {
						t.Fatalf("item %d: factor %d changed", j, p)
					}
				}
			}
			if !(r1.Stats["train_rmse"] < r0.Stats["train_rmse"]) {
				t.Errorf("train RMSE %.4f with features, %.4f without: no gain", r1.Stats["train_rmse"], r0.Stats["train_rmse"])
			}
		})
	}
}

// TestUserFeaturesFitPlantedSlopes plants users who follow the item
// average with slopes 0.3 or 1.7: the device's own coefficient on the item
// bias must recover the difference, so the test RMSE drops well below the
// bias model's, which gives every user slope 1.
func TestUserFeaturesFitPlantedSlopes(t *testing.T) {
	const nu, ni, per = 2000, 150, 40
	g := rng.New(5, 1)
	bi := make([]float64, ni)
	for j := range bi {
		bi[j] = 0.8 * g.NormFloat64()
	}
	d := &ratings.Dataset{Name: "slopes", Scale: ratings.Scale{Min: 1, Max: 5, Step: 1}}
	for u := range nu {
		slope := 0.3
		if u%2 == 1 {
			slope = 1.7
		}
		for _, j := range g.Perm(ni)[:per] {
			r := 3.2 + slope*bi[j] + 0.3*g.NormFloat64()
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32(j))
			d.Values = append(d.Values, float32(min(max(r, 1), 5)))
		}
	}
	for u := range nu {
		d.UserIDs = append(d.UserIDs, "u"+strconv.Itoa(u))
	}
	for j := range ni {
		d.ItemIDs = append(d.ItemIDs, "i"+strconv.Itoa(j))
	}
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := BiasesConfig()
	cfg.Eps, cfg.UserFeatures = 10, 0
	without, _ := rmse(t, s, cfg, 1)
	cfg.UserFeatures = 1
	with, _ := rmse(t, s, cfg, 1)
	t.Logf("test RMSE %.4f without the item-bias feature, %.4f with", without, with)
	if !(with < 0.8*without) || math.IsNaN(with) {
		t.Errorf("test RMSE %.4f with the feature, %.4f without: want at least 20%% lower", with, without)
	}
}

func TestUserFeaturesValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"off", func(c *Config) { c.UserFeatures, c.RegFeature = 0, 0 }, true},
		{"three", func(c *Config) { c.UserFeatures = 3 }, true},
		{"four", func(c *Config) { c.UserFeatures = 4 }, false},
		{"negative", func(c *Config) { c.UserFeatures = -1 }, false},
		{"no ridge", func(c *Config) { c.RegFeature = 0 }, false},
		{"NaN ridge", func(c *Config) { c.RegFeature = math.NaN() }, false},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestStandardYears(t *testing.T) {
	for _, c := range []struct {
		name   string
		titles []string
		n      int
		want   []float64
	}{
		{"two years", []string{"A (1990)", "B (2000)"}, 2, []float64{-1, 1}},
		{"last year wins", []string{"Film (1984) (1990)", "B (2000)"}, 2, []float64{-1, 1}},
		{"no year is the mean", []string{"A (1990)", "Untitled", "C (2000)"}, 3, []float64{-1, 0, 1}},
		{"not a year", []string{"A (999)", "B (1990)", "C (2000)"}, 3, []float64{0, -1, 1}},
		{"no titles", nil, 2, []float64{0, 0}},
		{"fewer titles than items", []string{"A (1990)", "B (2000)"}, 3, []float64{-1, 1, 0}},
	} {
		got := standardYears(c.titles, c.n)
		for j := range c.want {
			if math.Abs(got[j]-c.want[j]) > 1e-9 {
				t.Errorf("%s: standardYears = %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}
