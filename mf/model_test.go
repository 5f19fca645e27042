package mf

import (
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// handModel returns a small model with known parameters: 2 users, 4 items,
// Dim 2.
func handModel(biased bool) *Model {
	m := &Model{
		Dim: 2, NumUsers: 2, NumItems: 4,
		U:       []float32{1, 0, 0, 2},
		V:       []float32{1, 1, 2, 0, 0, 1, 3, 3},
		Mean:    3,
		Biased:  biased,
		Scale:   ratings.Stars5,
		UserIDs: []string{"alice", "bob"},
		ItemIDs: []string{"a", "b", "c", "d"},
	}
	if biased {
		m.BU = []float32{0.5, -0.5}
		m.BI = []float32{0.25, -1, 0, 0.1}
	}
	return m
}

func TestPredict(t *testing.T) {
	tests := []struct {
		name      string
		biased    bool
		u, i      int32
		raw, pred float32
	}{
		{"unbiased dot", false, 0, 1, 2, 2},
		{"unbiased clamped high", false, 1, 3, 6, 5},
		{"unbiased clamped low", false, 0, 2, 0, 1},
		{"unbiased unknown user", false, 2, 0, 3, 3},
		{"unbiased negative item", false, 0, -1, 3, 3},
		{"biased", true, 0, 0, 3 + 0.5 + 0.25 + 1, 4.75},
		{"biased clamped", true, 1, 3, 3 - 0.5 + 0.1 + 6, 5},
		{"biased unknown user", true, 7, 1, 3 - 1, 2},
		{"biased unknown item", true, 1, 4, 3 - 0.5, 2.5},
		{"biased both unknown", true, -3, 99, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := handModel(tc.biased)
			if got := m.PredictRaw(tc.u, tc.i); math.Abs(float64(got-tc.raw)) > 1e-6 {
				t.Errorf("PredictRaw(%d, %d) = %g, want %g", tc.u, tc.i, got, tc.raw)
			}
			if got := m.Predict(tc.u, tc.i); math.Abs(float64(got-tc.pred)) > 1e-6 {
				t.Errorf("Predict(%d, %d) = %g, want %g", tc.u, tc.i, got, tc.pred)
			}
		})
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

func TestScoreItems(t *testing.T) {
	for _, biased := range []bool{false, true} {
		m := handModel(biased)
		for _, u := range []int32{0, 1, 2, -1} {
			s := m.ScoreItems(u, nil)
			if len(s) != m.NumItems {
				t.Fatalf("len = %d", len(s))
			}
			for i := range s {
				if want := m.PredictRaw(u, int32(i)); math.Abs(float64(s[i]-want)) > 1e-6 {
					t.Errorf("biased %v: ScoreItems(%d)[%d] = %g, want PredictRaw %g", biased, u, i, s[i], want)
				}
			}
		}
	}
}

func TestRecommend(t *testing.T) {
	m := handModel(true)
	// Scores for user 0: a 4.75, b 3.5, c 3.5, d 6.6.
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
