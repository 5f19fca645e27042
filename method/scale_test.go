package method_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// stretched returns d with every rating and its scale multiplied by k.
func stretched(d *ratings.Dataset, k float32) *ratings.Dataset {
	c := *d
	c.Values = make([]float32, len(d.Values))
	for i, v := range d.Values {
		c.Values[i] = v * k
	}
	c.Scale = ratings.Scale{Min: d.Scale.Min * k, Max: d.Scale.Max * k, Step: d.Scale.Step * k}
	return &c
}

// TestScaleInvariance trains every method on a dataset and on the same
// ratings mapped affinely to a scale 20 times as wide: since every method
// trains on ratings mapped to its internal scale, each test RMSE must be
// 20 times the original (within 1%), and nothing may diverge; a ranking
// model's top-10 lists must be the same. It runs on
// the embedded ml-latest-small (0.5..5 → 10..100) and, when PRIVREC_DATA
// holds it, on ML-100K (1..5 → 20..100).
func TestScaleInvariance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: every method fitted twice on ml-latest-small (160 s); go test without -short runs it")
	}
	sets := map[string]*ratings.Dataset{}
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sets["ml-latest-small"] = d
	if root := os.Getenv("PRIVREC_DATA"); root != "" {
		if d, _, err := datasets.Open(filepath.Join(root, "ml-100k"), ratings.LoadOptions{Scale: &ratings.Stars5}); err == nil {
			sets["ml-100k"] = d
		}
	} else {
		t.Log("PRIVREC_DATA not set: ML-100K skipped, ml-latest-small only")
	}
	for name, d := range sets {
		s, err := ratings.Holdout(d, 0.9, 1)
		if err != nil {
			t.Fatal(err)
		}
		wide, wideTest := stretched(s.Train, 20), stretched(s.Test, 20)
		for _, spec := range method.All() {
			t.Run(name+"/"+spec.Name, func(t *testing.T) {
				p := params{}
				if spec.Has("epochs") {
					p["epochs"] = "3"
				}
				if spec.Has("reproducible") { // dp-pop: seeded noise, the same in both runs
					p["reproducible"] = "true"
				}
				if spec.Name == "ease" && d.NumItems() > 5000 {
					t.Skipf("ease inverts a %d² item Gramian: too slow for a unit test", d.NumItems())
				}
				if spec.Has("seeded") { // dp-ease: seeded noise, the same in both runs
					p["seeded"] = "true"
				}
				fit := func(train *ratings.Dataset) *model.Model {
					m, _, err := fitText(method.WithTestMode(context.Background()), spec.Name, train, p, 1, nil)
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				mn, mw := fit(s.Train), fit(wide)
				if mn.Ranking {
					// A ranking model's scores are not ratings and are
					// not mapped to the scale: its lists must not move.
					for u := range int32(min(mn.NumUsers, 50)) {
						a, b := mn.Recommend(u, 10, nil), mw.Recommend(u, 10, nil)
						for k := range a {
							if a[k].Item != b[k].Item {
								t.Fatalf("user %d: top 10 %v on %v, %v on %v", u, a, s.Train.Scale, b, wide.Scale)
							}
						}
					}
					return
				}
				narrow, broad := eval.Rating(mn, s.Test).RMSE, eval.Rating(mw, wideTest).RMSE
				if math.IsNaN(broad) || math.Abs(broad/(20*narrow)-1) > 0.01 {
					t.Errorf("RMSE %.6g on %v, %.6g on %v: ratio %.5f, want 20", narrow, s.Train.Scale, broad, wide.Scale, broad/narrow)
				}
			})
		}
	}
}

// TestPrivateMethodRefusesInferredScale checks that a private method will
// not train on a scale read off the ratings (its noise would be calibrated
// to private data), that it says how to declare one, and that a
// non-private method trains on it.
func TestPrivateMethodRefusesInferredScale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.tsv")
	data := "1\t1\t40\n1\t2\t90\n2\t1\t60\n2\t3\t100\n3\t2\t20\n3\t3\t70\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _, err := ratings.Load(path, ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Scale.Inferred {
		t.Fatalf("scale %v of a delimited file without a declared scale is not marked inferred", d.Scale)
	}
	for _, name := range []string{"hdpmf", "dp-itemavg", "sdmf", "ldp-op", "dp-pmf"} {
		_, _, err := fitText(context.Background(), name, d, params{"epochs": "1"}, 1, nil)
		if name == "dp-itemavg" {
			_, _, err = fitText(context.Background(), name, d, nil, 1, nil)
		}
		if !errors.Is(err, method.ErrUndeclaredScale) {
			t.Errorf("%s on an inferred scale: error %v, want ErrUndeclaredScale", name, err)
		}
	}
	if _, _, err := fitText(context.Background(), "itemavg", d, nil, 1, nil); err != nil {
		t.Errorf("itemavg (non-private) on an inferred scale: %v", err)
	}
	declared, _, err := ratings.Load(path, ratings.LoadOptions{Scale: &ratings.Scale{Min: 0, Max: 100, Step: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fitText(context.Background(), "dp-itemavg", declared, nil, 1, nil); err != nil {
		t.Errorf("dp-itemavg on a declared scale: %v", err)
	}
}

// TestRankingScoresNotMapped: a ranking model trained on a scale other
// than the internal one keeps the scores it was trained with (no
// affine map from the internal scale, which would add a global "mean" to
// scores that are not ratings), so that a device in the run, a served
// run's published model and a fold-in against it score alike.
func TestRankingScoresNotMapped(t *testing.T) {
	b := ratings.NewBuilder("half", ratings.HalfStars5)
	for u, items := range [][]string{{"a", "b"}, {"a", "c"}, {"b", "c", "d"}, {"a", "d"}} {
		for _, i := range items {
			b.Add(string(rune('p'+u)), i, 4.5)
		}
	}
	d := b.Dataset()
	for _, tc := range []struct {
		name   string
		params params
	}{
		{"pop", params{}},
		{"ease", params{}},
		{"dp-ease", params{"eps": "5", "top-items": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := method.Lookup(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := spec.Configure(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := spec.Fit(context.Background(), d, cfg, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Ranking || m.Mean != 0 || m.Scale != ratings.HalfStars5 {
				t.Errorf("ranking %v, mean %v, scale %v: want a ranking model, mean 0, the declared scale", m.Ranking, m.Mean, m.Scale)
			}
		})
	}
}
