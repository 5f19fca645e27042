package model

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// handModel returns a small matrix-factorization model with known
// parameters: 2 users, 4 items, Dim 2. Unbiased it has Mean 0 and Default
// 3; biased, Mean = Default = 3 and biases.
func handModel(biased bool) *Model {
	m := &Model{
		Dim: 2, NumUsers: 2, NumItems: 4,
		U:       []float32{1, 0, 0, 2},
		V:       []float32{1, 1, 2, 0, 0, 1, 3, 3},
		Default: 3,
		Scale:   ratings.Stars5,
		UserIDs: []string{"alice", "bob"},
		ItemIDs: []string{"a", "b", "c", "d"},
	}
	if biased {
		m.Mean = 3
		m.BU = []float32{0.5, -0.5}
		m.BI = []float32{0.25, -1, 0, 0.1}
	}
	return m
}

// variants returns one model of each kind the methods produce, all over
// the 2×4 shape of handModel where they have users.
func variants() map[string]*Model {
	hd := handModel(false) // HDPMF: weights, Rated, Default the scale's middle
	hd.UserWeight, hd.ItemWeight = []float32{1, 2}, []float32{0.5, 1, 2, 4}
	hd.Rated = []bool{true, false}
	sd := handModel(false) // SDMF: a device offset
	sd.Offset = []float32{1.5, -0.25}
	bpr := handModel(false) // a ranking model
	bpr.Ranking = true
	return map[string]*Model{
		"mf":       handModel(false),
		"biased":   handModel(true),
		"hdpmf":    hd,
		"sdmf":     sd,
		"bpr":      bpr,
		"mean":     {NumItems: 4, Mean: 3.5, Default: 3.5, Scale: ratings.Stars5, ItemIDs: []string{"a", "b", "c", "d"}},
		"itemmean": {NumItems: 3, BI: []float32{4.5, 2, 3.25}, Default: 3.5, Scale: ratings.Stars5},
		"empty":    {Scale: ratings.Stars5, Default: 2},
	}
}

func TestPredict(t *testing.T) {
	m := variants()
	tests := []struct {
		model     string
		u, i      int32
		raw, pred float32
	}{
		{"mf", 0, 1, 2, 2},
		{"mf", 1, 3, 6, 5},  // clamped high
		{"mf", 0, 2, 0, 1},  // clamped low
		{"mf", 2, 0, 3, 3},  // unknown user: Default
		{"mf", 0, -1, 3, 3}, // negative item
		{"biased", 0, 0, 3 + 0.5 + 0.25 + 1, 4.75},
		{"biased", 1, 3, 3 - 0.5 + 0.1 + 6, 5},
		{"biased", 7, 1, 3 - 1, 2},     // unknown user: Default + BI
		{"biased", 1, 4, 3 - 0.5, 2.5}, // unknown item: Default + BU
		{"biased", -3, 99, 3, 3},
		{"hdpmf", 0, 0, 1 / (1 * 0.5), 2},
		{"hdpmf", 0, 3, 3 / (1 * 4.0), 1},
		{"hdpmf", 1, 0, 3, 3}, // not rated: unknown
		{"hdpmf", 0, 9, 3, 3},
		{"sdmf", 0, 1, 2 + 1.5, 3.5},
		{"sdmf", 1, 3, 6 - 0.25, 5},
		{"sdmf", 5, 0, 3, 3},
		{"bpr", 1, 3, 6, 6}, // ranking: not clamped
		{"bpr", 0, 2, 0, 0},
		{"mean", 0, 1, 3.5, 3.5},
		{"mean", 1 << 30, 3, 3.5, 3.5}, // no user side: every user known
		{"mean", -1, 9, 3.5, 3.5},
		{"itemmean", 4, 0, 4.5, 4.5},
		{"itemmean", -7, 2, 3.25, 3.25},
		{"itemmean", 0, 3, 3.5, 3.5}, // unknown item: Default
		{"empty", 0, 0, 2, 2},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d,%d", tc.model, tc.u, tc.i), func(t *testing.T) {
			m := m[tc.model]
			if got := m.PredictRaw(tc.u, tc.i); math.Abs(float64(got-tc.raw)) > 1e-6 {
				t.Errorf("PredictRaw(%d, %d) = %g, want %g", tc.u, tc.i, got, tc.raw)
			}
			if got := m.Predict(tc.u, tc.i); math.Abs(float64(got-tc.pred)) > 1e-6 {
				t.Errorf("Predict(%d, %d) = %g, want %g", tc.u, tc.i, got, tc.pred)
			}
		})
	}
}

// TestNoPanic predicts and scores every variant at extreme indices.
func TestNoPanic(t *testing.T) {
	idx := []int32{math.MinInt32, -1, 0, 1, 2, 3, 4, 5, math.MaxInt32}
	for name, m := range variants() {
		if err := m.Check(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, u := range idx {
			for _, i := range idx {
				m.Predict(u, i)
			}
			m.ScoreItems(u, nil)
			m.Recommend(u, 2, nil)
		}
	}
}

func TestPredictAll(t *testing.T) {
	m := handModel(true)
	d := &ratings.Dataset{Users: []int32{0, 1, 5}, Items: []int32{0, 3, 1}, Values: []float32{1, 2, 3}}
	got := m.PredictAll(d, make([]float32, 1, 8))
	if len(got) != 3 {
		t.Fatalf("len = %d, want 3", len(got))
	}
	for k := range got {
		if want := m.Predict(d.Users[k], d.Items[k]); got[k] != want {
			t.Errorf("PredictAll[%d] = %g, want %g", k, got[k], want)
		}
	}
}

// TestScoreItems checks that ScoreItems is PredictRaw, bit for bit, for
// every variant and kind of user.
func TestScoreItems(t *testing.T) {
	for name, m := range variants() {
		for _, u := range []int32{0, 1, 2, -1} {
			s := m.ScoreItems(u, make([]float32, 1))
			if len(s) != m.NumItems {
				t.Fatalf("%s: len = %d, want %d", name, len(s), m.NumItems)
			}
			for i := range s {
				if want := m.PredictRaw(u, int32(i)); math.Float32bits(s[i]) != math.Float32bits(want) {
					t.Errorf("%s: ScoreItems(%d)[%d] = %g, want PredictRaw %g", name, u, i, s[i], want)
				}
			}
		}
	}
}

func TestRecommend(t *testing.T) {
	m := handModel(true)
	// Scores for user 0: a 4.75, b 4.5, c 3.5, d 6.6.
	tests := []struct {
		name  string
		u     int32
		n     int
		rated []int32
		want  []int32
	}{
		{"top 2", 0, 2, nil, []int32{3, 0}},
		{"ties by index", 0, 4, nil, []int32{3, 0, 1, 2}},
		{"excludes rated", 0, 2, []int32{0, 3}, []int32{1, 2}},
		{"n beyond items", 0, 10, []int32{1}, []int32{3, 0, 2}},
		{"all rated", 0, 3, []int32{0, 1, 2, 3}, nil},
		{"n zero", 0, 0, nil, nil},
		{"unknown user by item bias", 9, 2, nil, []int32{0, 3}},
		{"rated out of range ignored", 0, 1, []int32{-1, 3, 17}, []int32{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := m.Recommend(tc.u, tc.n, tc.rated)
			var items []int32
			for k, s := range got {
				items = append(items, s.Item)
				if want := m.PredictRaw(tc.u, s.Item); s.Score != want {
					t.Errorf("score of item %d = %g, want %g", s.Item, s.Score, want)
				}
				if k > 0 && got[k-1].Score < s.Score {
					t.Errorf("not sorted by score: %v", got)
				}
			}
			if !slices.Equal(items, tc.want) {
				t.Errorf("Recommend(%d, %d, %v) = %v, want items %v", tc.u, tc.n, tc.rated, got, tc.want)
			}
		})
	}
}

func TestRecommendUser(t *testing.T) {
	titled := handModel(true)
	titled.ItemTitles = []string{"Alpha", "Beta", "Gamma", "Delta"}
	bpr := variants()["bpr"]
	tests := []struct {
		name    string
		m       *Model
		user    string
		n       int
		exclude []string
		want    []Recommendation
		err     string
	}{
		{"raw scores, clamped ratings, no titles", handModel(true), "alice", 2, nil,
			[]Recommendation{rec(1, "d", "", 6.6, 5), rec(2, "a", "", 4.75, 4.75)}, ""},
		{"titles and exclusions", titled, "alice", 2, []string{"d", "zzz", "d"},
			[]Recommendation{rec(1, "a", "Alpha", 4.75, 4.75), rec(2, "b", "Beta", 4.5, 4.5)}, ""},
		{"ranking scores raw, no rating", bpr, "bob", 1, nil, []Recommendation{rec(1, "d", "", 6, -1)}, ""},
		{"no user side", variants()["mean"], "anyone", 1, []string{"a"}, []Recommendation{rec(1, "b", "", 3.5, 3.5)}, ""},
		{"unknown user", handModel(true), "carol", 2, nil, nil, `user "carol" is not in the model (2 users)`},
		{"no user IDs", &Model{NumUsers: 1, ItemIDs: []string{}, Scale: ratings.Stars5}, "x", 1, nil, nil, "no user IDs"},
		{"no item IDs", variants()["itemmean"], "x", 1, nil, nil, "no item IDs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.m.RecommendUser(tc.user, tc.n, tc.exclude)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RecommendUser = %s, want %s", recString(got), recString(tc.want))
			}
		})
	}
}

func TestIndexConcurrent(t *testing.T) {
	m := handModel(false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k, id := range m.ItemIDs {
				if i, ok := m.ItemIndex(id); !ok || i != int32(k) {
					t.Errorf("goroutine %d: ItemIndex(%q) = %d, %v", g, id, i, ok)
				}
			}
			if u, ok := m.UserIndex("bob"); !ok || u != 1 {
				t.Errorf("UserIndex(bob) = %d, %v", u, ok)
			}
			if _, ok := m.UserIndex("a"); ok {
				t.Error("an item ID found as a user")
			}
		}()
	}
	wg.Wait()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *Model)
		want string
	}{
		{"negative dim", func(m *Model) { m.Dim = -1 }, "Dim"},
		{"short U", func(m *Model) { m.U = m.U[1:] }, "len(U)"},
		{"short V", func(m *Model) { m.V = m.V[1:] }, "len(V)"},
		{"BU", func(m *Model) { m.BU = []float32{1} }, "user biases"},
		{"BI", func(m *Model) { m.BI = []float32{1} }, "item biases"},
		{"Offset", func(m *Model) { m.Offset = []float32{} }, "offsets"},
		{"one weight", func(m *Model) { m.UserWeight = []float32{1, 1} }, "together"},
		{"weights", func(m *Model) { m.UserWeight, m.ItemWeight = []float32{1, 1}, []float32{1} }, "item weights"},
		{"Rated", func(m *Model) { m.Rated = []bool{true} }, "Rated"},
		{"user IDs", func(m *Model) { m.UserIDs = []string{"x"} }, "user IDs"},
		{"item IDs", func(m *Model) { m.ItemIDs = []string{"x"} }, "item IDs"},
		{"titles", func(m *Model) { m.ItemTitles = []string{} }, "titles"},
		{"scale", func(m *Model) { m.Scale.Min = 9 }, "scale"},
		{"config not JSON", func(m *Model) { m.Config = []byte("{") }, "Config"},
		{"config not an object", func(m *Model) { m.Config = []byte("[1]") }, "Config"},
	}
	if err := handModel(true).Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := handModel(false)
			tc.edit(m)
			if err := m.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want an error about %s", err, tc.want)
			}
		})
	}
}

func BenchmarkScoreItems(b *testing.B) {
	const nu, ni, k = 10, 5000, 32
	m := &Model{Dim: k, NumUsers: nu, NumItems: ni, U: make([]float32, nu*k), V: make([]float32, ni*k),
		Mean: 3, BU: make([]float32, nu), BI: make([]float32, ni), Scale: ratings.Stars5}
	for j := range m.V {
		m.V[j] = float32(j%7) / 7
	}
	dst := make([]float32, ni)
	for b.Loop() {
		dst = m.ScoreItems(3, dst)
	}
}

// rec is a Recommendation; a negative rating stands for none.
func rec(rank int, item, title string, score, rating float32) Recommendation {
	r := Recommendation{Rank: rank, Item: item, Title: title, Score: score}
	if rating >= 0 {
		r.Rating = &rating
	}
	return r
}

func recString(rs []Recommendation) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "{%d %s %q score %v", r.Rank, r.Item, r.Title, r.Score)
		if r.Rating != nil {
			fmt.Fprintf(&b, " rating %v", *r.Rating)
		}
		b.WriteString("} ")
	}
	return b.String()
}
