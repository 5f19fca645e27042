package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// historyModel is an EASE-shaped ranking model: Dim = NumItems, user rows
// binary with the given number of ones, V dense.
func historyModel(users, items int, ones []int, seed uint64) *Model {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &Model{Dim: items, NumUsers: users, NumItems: items, Ranking: true, Scale: ratings.Stars5,
		U: make([]float32, users*items), V: make([]float32, items*items)}
	for j := range m.V {
		m.V[j] = float32(r.NormFloat64())
	}
	for u := range users {
		for _, j := range r.Perm(items)[:ones[u%len(ones)]] {
			m.U[u*items+j] = 1
		}
	}
	return m
}

// TestSparseUserRows: a long user row with few nonzeros is scored by a
// gathered sum, which equals the dense dot product up to float32 rounding;
// ScoreItems and PredictRaw agree bit for bit whichever path they take
// (rows with 0, 1, Dim/8 and Dim/8+1 ones, and a row too short to check).
func TestSparseUserRows(t *testing.T) {
	for _, tc := range []struct {
		items  int
		ones   []int
		sparse []bool
	}{
		{items: 400, ones: []int{0, 1, 50, 51, 399}, sparse: []bool{true, true, true, false, false}},
		{items: 100, ones: []int{1, 5}, sparse: []bool{false, false}},
	} {
		t.Run(fmt.Sprint(tc.items), func(t *testing.T) {
			m := historyModel(len(tc.ones), tc.items, tc.ones, 3)
			for u := range int32(m.NumUsers) {
				pu := m.U[int(u)*m.Dim : int(u+1)*m.Dim]
				if _, ok := sparseUser(pu, nil); ok != tc.sparse[u] {
					t.Errorf("user with %d ones: sparse %v, want %v", tc.ones[u], ok, tc.sparse[u])
				}
				got := m.ScoreItems(u, nil)
				sparseScoring = false
				dense := m.ScoreItems(u, nil)
				sparseScoring = true
				for i := range got {
					if p := m.PredictRaw(u, int32(i)); math.Float32bits(p) != math.Float32bits(got[i]) {
						t.Fatalf("user %d item %d: ScoreItems %v, PredictRaw %v", u, i, got[i], p)
					}
					if d := math.Abs(float64(got[i] - dense[i])); d > 1e-5*(1+math.Abs(float64(dense[i]))) {
						t.Fatalf("user %d item %d: gathered %v, dense %v", u, i, got[i], dense[i])
					}
				}
			}
		})
	}
}

// BenchmarkScoreItemsHistory scores an EASE-shaped model of 4,000 items
// for a user with 60 items (1.5%), dense and gathered.
func BenchmarkScoreItemsHistory(b *testing.B) {
	m := historyModel(1, 4000, []int{60}, 1)
	dst := make([]float32, m.NumItems)
	for _, sparse := range []bool{false, true} {
		b.Run(map[bool]string{false: "dense", true: "gathered"}[sparse], func(b *testing.B) {
			sparseScoring = sparse
			defer func() { sparseScoring = true }()
			for b.Loop() {
				dst = m.ScoreItems(0, dst)
			}
		})
	}
}
