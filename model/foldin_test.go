package model

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
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

// TestFoldInAll: a published model folded in over a dataset whose items
// come in another order predicts, for each user and item, what FoldIn of
// that user predicts for the same item by ID; a rating model and an
// indicator (dp-ease) ranking model alike. An item the model does not
// know is an error naming it.
func TestFoldInAll(t *testing.T) {
	const k, items = 3, 12
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]string, items)
	for i := range ids {
		ids[i] = "i" + strconv.Itoa(i)
	}
	rating := &Model{Dim: k, NumItems: items, V: make([]float32, items*k), Mean: 3.5, Default: 3.5,
		BI: make([]float32, items), Scale: ratings.Scale{Min: 1, Max: 5, Step: 0.5}, ItemIDs: ids}
	for i := range rating.V {
		rating.V[i] = float32(r.NormFloat64())
	}
	for i := range rating.BI {
		rating.BI[i] = float32(r.NormFloat64() / 3)
	}
	ranking := &Model{Dim: 4, NumItems: items, V: make([]float32, items*4), Ranking: true, Default: 3,
		Scale: rating.Scale, ItemIDs: ids, UserItems: []int32{5, 0, 7}}
	for i := range ranking.V {
		ranking.V[i] = float32(r.NormFloat64())
	}
	// The dataset knows the items in reverse order; user 2 rated nothing.
	d := &ratings.Dataset{Name: "d", Scale: rating.Scale, UserIDs: []string{"a", "b", "c"}}
	for j := range items {
		d.ItemIDs = append(d.ItemIDs, ids[items-1-j])
	}
	for _, x := range []struct {
		u, j int32
		v    float32
	}{{0, 0, 4}, {0, 4, 2}, {0, 6, 5}, {0, 11, 3}, {1, 2, 1}, {1, 7, 4.5}, {1, 9, 2.5}} {
		d.Users, d.Items, d.Values = append(d.Users, x.u), append(d.Items, x.j), append(d.Values, x.v)
	}
	for _, m := range []*Model{rating, ranking} {
		all, err := m.FoldInAll(d, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		rows := d.ByUser()
		for u := range int32(2) {
			idx, val := rows.Row(int(u))
			own := make([]int32, len(idx))
			for n, j := range idx {
				own[n] = int32(items - 1 - int(j))
			}
			one, err := m.FoldIn(d.UserIDs[u], own, val, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			for j := range int32(items) {
				if got, want := all.Predict(u, j), one.Predict(0, int32(items-1)-j); math.Abs(float64(got-want)) > 1e-6 {
					t.Errorf("ranking %v, user %d, item %s: %v, FoldIn gives %v", m.Ranking, u, d.ItemIDs[j], got, want)
				}
			}
		}
		if all.Rated[2] {
			t.Errorf("ranking %v: the user without ratings is known", m.Ranking)
		}
	}
	d.ItemIDs[3] = "stranger"
	if _, err := rating.FoldInAll(d, 0.5); err == nil || !strings.Contains(err.Error(), `"stranger"`) {
		t.Errorf("FoldInAll with an unknown item = %v, want an error naming it", err)
	}
}
