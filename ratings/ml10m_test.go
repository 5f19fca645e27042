package ratings

import (
	"math"
	"path/filepath"
	"testing"
)

// TestLoadML10MFolder loads a small fixture shaped like MovieLens 10M's
// archive folder (ml-10M100K: ratings.dat, movies.dat and tags.dat, all
// with "::" separators; half-star ratings; user IDs up to 71567): the
// rating file is found among the three, the format is the 1M/10M "::"
// format, the scale is the half-star one, and titles come from movies.dat.
func TestLoadML10MFolder(t *testing.T) {
	for _, path := range []string{"ml-10M100K", "ml-10M100K/ratings.dat"} {
		t.Run(path, func(t *testing.T) {
			d, rep, err := Load(filepath.Join("testdata", path), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Format != FormatML1M {
				t.Errorf("format %v, want %v", rep.Format, FormatML1M)
			}
			if d.Scale.Min != 0.5 || d.Scale.Max != 5 || d.Scale.Step != 0.5 {
				t.Errorf("scale %v, want 0.5..5 step 0.5", d.Scale)
			}
			if d.Len() != 7 || d.NumUsers() != 3 || d.NumItems() != 4 {
				t.Fatalf("%d ratings, %d users, %d items; want 7, 3, 4", d.Len(), d.NumUsers(), d.NumItems())
			}
			want := map[[2]string]float32{{"1", "185"}: 4.5, {"2", "292"}: 0.5, {"71567", "292"}: 3.5, {"2", "122"}: 2.5}
			for k := range d.Values {
				key := [2]string{d.UserIDs[d.Users[k]], d.ItemIDs[d.Items[k]]}
				if w, ok := want[key]; ok {
					if d.Values[k] != w {
						t.Errorf("rating %v = %g, want %g", key, d.Values[k], w)
					}
					delete(want, key)
				}
			}
			if len(want) != 0 {
				t.Errorf("ratings not loaded: %v", want)
			}
			titles := map[string]string{}
			for i, id := range d.ItemIDs {
				if d.ItemTitles != nil {
					titles[id] = d.ItemTitles[i]
				}
			}
			if titles["185"] != "Net, The (1995)" {
				t.Errorf("title of 185 = %q, want %q", titles["185"], "Net, The (1995)")
			}
		})
	}
}

// TestDPALSSplit checks the DPALS protocol's random 80/10/10 split
// ("random:0.8:0.1"): 80% train, 10% test, the other 10% in neither, no
// rating in both, and the same split for the same seed.
func TestDPALSSplit(t *testing.T) {
	d := synth(t, 200, 100, 30, 5)
	spec, err := ParseSplit("random:0.8:0.1")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spec.Apply(d, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp) != 1 {
		t.Fatalf("%d splits, want 1", len(sp))
	}
	n := float64(d.Len())
	if f := float64(sp[0].Train.Len()) / n; math.Abs(f-0.8) > 0.001 {
		t.Errorf("train fraction %.4f, want 0.8", f)
	}
	if f := float64(sp[0].Test.Len()) / n; math.Abs(f-0.1) > 0.001 {
		t.Errorf("test fraction %.4f, want 0.1", f)
	}
	seen := map[[2]int32]bool{}
	for k := range sp[0].Train.Values {
		seen[[2]int32{sp[0].Train.Users[k], sp[0].Train.Items[k]}] = true
	}
	for k := range sp[0].Test.Values {
		if seen[[2]int32{sp[0].Test.Users[k], sp[0].Test.Items[k]}] {
			t.Fatalf("test rating %d is also in train", k)
		}
	}
	again, _ := spec.Apply(d, 3)
	if again[0].Train.Len() != sp[0].Train.Len() || again[0].Test.Users[0] != sp[0].Test.Users[0] {
		t.Error("the same seed gave another split")
	}
}
