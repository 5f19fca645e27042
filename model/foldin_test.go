package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// TestFoldIn: ratings prior_i + c + w·v_i that a vector w explains
// exactly, on items whose factors average to zero (so the offset, the
// mean rating less the model's prior mean + b_i, is c), give w back up to
// the ridge, and predictions on unrated items follow, for a model without
// biases (prior 0) and one with a global mean and item biases (dp-als's
// published model); bad input is an error.
func TestFoldIn(t *testing.T) {
	const k, items, rated, c = 4, 60, 40, 3.0
	r := rand.New(rand.NewPCG(1, 2))
	m := &Model{Dim: k, NumItems: items, V: make([]float32, items*k), Default: 3,
		Scale: ratings.Scale{Min: -100, Max: 100}, ItemIDs: make([]string, items)}
	for i := range m.V {
		m.V[i] = float32(r.NormFloat64())
	}
	for d := range k { // centre the rated items' factors
		var s float32
		for i := range rated {
			s += m.V[i*k+d]
		}
		for i := range rated {
			m.V[i*k+d] -= s / rated
		}
	}
	biased := &Model{Dim: k, NumItems: items, V: m.V, Mean: 3.6, Default: 3.6, BI: make([]float32, items),
		Scale: m.Scale, ItemIDs: m.ItemIDs}
	for i := range biased.BI {
		biased.BI[i] = float32(r.NormFloat64() / 2)
	}
	w := []float32{0.5, -1, 0.25, 2}
	for _, tc := range []struct {
		name string
		m    *Model
	}{{"no biases", m}, {"mean and item biases", biased}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			want := func(i int32) float32 { // prior + c + w·v_i
				p := float32(c)
				if m.BI != nil {
					p += m.Mean + m.BI[i]
				}
				for d := range k {
					p += w[d] * m.V[int(i)*k+d]
				}
				return p
			}
			var idx []int32
			var vals []float32
			for i := range int32(rated) {
				idx, vals = append(idx, i), append(vals, want(i))
			}
			f, err := m.FoldIn("me", idx, vals, 1e-6)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Check(); err != nil {
				t.Fatal(err)
			}
			for d := range k {
				if math.Abs(float64(f.U[d]-w[d])) > 1e-3 {
					t.Fatalf("u = %v, want %v", f.U, w)
				}
			}
			for i := int32(rated); i < items; i++ {
				if got := f.PredictRaw(0, i); math.Abs(float64(got-want(i))) > 1e-3 {
					t.Fatalf("item %d: prediction %v, want %v", i, got, want(i))
				}
			}
		})
	}
	for _, tc := range []struct {
		name  string
		items []int32
		vals  []float32
		reg   float64
	}{
		{"no ratings", nil, nil, 1},
		{"lengths", []int32{1, 2}, []float32{1}, 1},
		{"item out of range", []int32{items}, []float32{1}, 1},
		{"reg", []int32{1}, []float32{1}, 0},
	} {
		if _, err := m.FoldIn("x", tc.items, tc.vals, tc.reg); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestFoldInRanking(t *testing.T) {
	// Three items; EASE weights: item 0 predicts item 2, nothing predicts 1.
	ease := &Model{Dim: 3, NumItems: 3, Ranking: true, Method: "ease",
		V: []float32{0, 0, 0, 0, 0, 0, 1, 0, 0}, ItemIDs: []string{"a", "b", "c"}}
	pop := &Model{NumItems: 3, Ranking: true, Method: "pop", BI: []float32{1, 3, 2}, ItemIDs: []string{"a", "b", "c"}}
	// iALS, one dimension: a and c point one way, b the other.
	ials := &Model{Dim: 1, NumItems: 3, Ranking: true, Method: "ials", V: []float32{1, -1, 1},
		ItemIDs: []string{"a", "b", "c"}, Config: []byte(`{"alpha0":0.1,"reg":0.01,"nu":1}`)}
	noCfg := &Model{Dim: 1, NumItems: 3, Ranking: true, Method: "ials", V: []float32{1, -1, 1}}
	dpease := &Model{Dim: 2, NumItems: 3, Ranking: true, Method: "dp-ease", V: make([]float32, 6)}
	// dp-ease with its user items: coordinate 0 indicates item "a", which
	// predicts "b"; the last coordinate is popularity, highest for "c".
	dpeaseItems := &Model{Dim: 2, NumItems: 3, Ranking: true, Method: "dp-ease", UserItems: []int32{0},
		V: []float32{0, 0.1, 1, 0.2, 0, 0.3}, ItemIDs: []string{"a", "b", "c"}}
	for _, tc := range []struct {
		name string
		m    *Model
		want string // the top item after excluding "a"
		err  bool
	}{
		{"ease uses the history", ease, "c", false},
		{"pop ranks by score", pop, "b", false},
		{"ials solves the user's row", ials, "c", false},
		{"ials without its config refused", noCfg, "", true},
		{"dp-ease without user items refused", dpease, "", true},
		{"dp-ease scores the history's indicator", dpeaseItems, "b", false},
	} {
		f, err := tc.m.FoldIn("me", []int32{0}, []float32{5}, 1)
		if tc.err {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		recs, err := f.RecommendUser("me", 1, []string{"a"})
		if err != nil || len(recs) != 1 || recs[0].Item != tc.want {
			t.Errorf("%s: %+v, %v; want %s first", tc.name, recs, err, tc.want)
		}
	}
}

func TestPersonalised(t *testing.T) {
	// Three items, a history indicator on items 0 and 1 (Dim 3).
	ease := func(v ...float32) *Model {
		return &Model{Dim: 3, NumItems: 3, V: v, UserItems: []int32{0, 1}, Ranking: true}
	}
	for _, tc := range []struct {
		name string
		m    *Model
		want bool
	}{
		{"popularity coordinate only", ease(0, 0, 5, 0, 0, 3, 0, 0, -1), false},
		{"one item-item weight", ease(0, 0, 5, 0.2, 0, 3, 0, 0, -1), true},
		{"a factor model", &Model{Dim: 2, NumItems: 1, NumUsers: 1, U: []float32{1, 0}, V: []float32{0, 0}}, true},
		{"malformed indicator model", &Model{Dim: 3, NumItems: 3, V: []float32{0}, UserItems: []int32{0, 1}}, true},
	} {
		if got := tc.m.Personalised(); got != tc.want {
			t.Errorf("%s: Personalised = %v, want %v", tc.name, got, tc.want)
		}
	}
}
