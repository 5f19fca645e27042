package eval

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// rankFixture is a hand-made ranking over 8 items.
//
// User 0: train {0}; test 1 (5★), 2 (4★), 3 (2★). Candidate order by
// descending score, ties by item: 3 (.9), 1 (.8), 5 (.7), 2 (.5), 4 (.5),
// 7 (.5), 6 (.1). AUC negatives (neither train nor test): 4, 5, 6, 7.
// User 1: no train; test 4 (3★). Order: 7, 6, 5, 3, 4 (.35), 2, 1, 0.
// User 2: train {0..5}; test 6 (5★). Items 6 and 7 tie at .3.
func rankFixture() (Scorer, *ratings.Dataset, *ratings.Dataset) {
	s := tableScorer{
		{9, .8, .5, .9, .5, .7, .1, .5},
		{.1, .2, .3, .4, .35, .5, .6, .7},
		{9, 9, 9, 9, 9, 9, .3, .3},
	}
	train := dataset(3, 8, [3]float32{0, 0, 5},
		[3]float32{2, 0, 1}, [3]float32{2, 1, 1}, [3]float32{2, 2, 1}, [3]float32{2, 3, 1}, [3]float32{2, 4, 1}, [3]float32{2, 5, 1})
	test := dataset(3, 8, [3]float32{0, 1, 5}, [3]float32{0, 2, 4}, [3]float32{0, 3, 2},
		[3]float32{1, 4, 3}, [3]float32{2, 6, 5})
	return s, train, test
}

func TestRank(t *testing.T) {
	l3 := 1 / math.Log2(3) // discount of position 2
	tests := []struct {
		name     string
		k        int
		relevant float32
		want     Ranking
	}{
		{
			// User 0: relevant {1, 2}; top 3 = 3, 1, 5 → 1 hit at position 2.
			//   P = 1/3, R = 1/2, NDCG = l3/(1+l3).
			//   AUC: item 1 beats 4, 5, 6, 7 → 4; item 2 ties 4 and 7, loses to 5,
			//   beats 6 → 2; AUC = 6/8.
			// User 1: no relevant item, not evaluated.
			// User 2: relevant {6}; top = 6, 7 (tie broken by index) → P = 1/3,
			//   R = 1, NDCG = 1, AUC = 1/2 (tie with 7).
			name: "relevant>=4", k: 3, relevant: 4,
			want: Ranking{K: 3, Users: 2,
				Precision: (1.0/3 + 1.0/3) / 2, Recall: (0.5 + 1) / 2,
				NDCG: (l3/(1+l3) + 1) / 2, AUC: (0.75 + 0.5) / 2},
		},
		{
			// Every test item relevant (relevant <= Scale.Min = 1).
			// User 0: relevant {1, 2, 3}; top 3 = 3, 1, 5 → hits at 1, 2:
			//   P = 2/3, R = 2/3, NDCG = (1+l3)/(1+l3+1/2); AUC: item 3 → 4,
			//   item 1 → 4, item 2 → 2; 10/12.
			// User 1: relevant {4} at position 5 → P = R = NDCG = 0; AUC: 4 beats
			//   0, 1, 2 of the 7 negatives → 3/7.
			// User 2 as above.
			name: "all relevant", k: 3, relevant: 0,
			want: Ranking{K: 3, Users: 3,
				Precision: (2.0/3 + 0 + 1.0/3) / 3, Recall: (2.0/3 + 0 + 1) / 3,
				NDCG: ((1+l3)/(1+l3+0.5) + 0 + 1) / 3, AUC: (10.0/12 + 3.0/7 + 0.5) / 3},
		},
		{
			// k = 1. User 0: top = 3, not relevant → 0, 0, 0. User 2: 1, 1, 1.
			name: "k=1", k: 1, relevant: 4,
			want: Ranking{K: 1, Users: 2, Precision: 0.5, Recall: 0.5, NDCG: 0.5, AUC: 0.625},
		},
		{
			// k beyond the candidate lists: all relevant items are retrieved.
			// User 0: hits at positions 2 and 4: DCG = l3 + 1/log2(5), IDCG = 1 + l3.
			name: "k=10", k: 10, relevant: 4,
			want: Ranking{K: 10, Users: 2, Precision: (0.2 + 0.1) / 2, Recall: 1,
				NDCG: ((l3+1/math.Log2(5))/(1+l3) + 1) / 2, AUC: 0.625},
		},
		{
			name: "k=0", k: 0, relevant: 4,
			want: Ranking{K: 0, Users: 2, Precision: math.NaN(), Recall: math.NaN(), NDCG: math.NaN(), AUC: 0.625},
		},
		{
			name: "nobody relevant", k: 3, relevant: 6,
			want: Ranking{K: 3, Precision: math.NaN(), Recall: math.NaN(), NDCG: math.NaN(), AUC: math.NaN()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, train, test := rankFixture()
			got := Rank(s, train, test, tc.k, tc.relevant)
			w := tc.want
			if got.K != w.K || got.Users != w.Users || !near(got.Precision, w.Precision, 1e-12) ||
				!near(got.Recall, w.Recall, 1e-12) || !near(got.NDCG, w.NDCG, 1e-12) || !near(got.AUC, w.AUC, 1e-12) {
				t.Errorf("Rank =\n%+v, want\n%+v", got, w)
			}
		})
	}
}

func TestOrderedBits(t *testing.T) {
	xs := []float32{float32(math.Inf(-1)), -3.5, -1e-30, 0, 1e-30, 0.5, 2, float32(math.Inf(1))}
	for j := 1; j < len(xs); j++ {
		if orderedBits(xs[j-1]) >= orderedBits(xs[j]) {
			t.Errorf("orderedBits(%g) >= orderedBits(%g)", xs[j-1], xs[j])
		}
	}
	if orderedBits(float32(math.Copysign(0, -1))) != orderedBits(0) {
		t.Error("−0 and +0 differ")
	}
	if nan := float32(math.NaN()); orderedBits(nan) >= orderedBits(float32(math.Inf(-1))) {
		t.Error("NaN does not rank below −Inf")
	}
}

// randomProblem builds a random train/test split and a scorer with many
// tied scores.
func randomProblem(r *rand.Rand, nu, ni, perUser int) (tableScorer, *ratings.Dataset, *ratings.Dataset) {
	train, test := dataset(nu, ni), dataset(nu, ni)
	s := make(tableScorer, nu)
	for u := range nu {
		s[u] = make([]float32, ni)
		for i := range s[u] {
			s[u][i] = float32(r.IntN(8)) / 4 // ties
		}
		for _, i := range r.Perm(ni)[:perUser] {
			d := train
			if r.IntN(4) == 0 {
				d = test
			}
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32(i))
			d.Values = append(d.Values, float32(1+r.IntN(5)))
		}
	}
	return s, train, test
}

// TestRankAUCBruteForce checks the sorted AUC against the O(n²) pair count.
func TestRankAUCBruteForce(t *testing.T) {
	r := rng.New(1)
	const nu, ni = 30, 40
	s, train, test := randomProblem(r, nu, ni, 20)
	for _, relevant := range []float32{0, 3, 5} {
		var sum float64
		var users int
		for u := range nu {
			kind := make([]int, ni) // 0 negative, 1 train, 2 test, 3 relevant
			for k := range train.Values {
				if train.Users[k] == int32(u) {
					kind[train.Items[k]] = 1
				}
			}
			nrel := 0
			for k, v := range test.Values {
				if test.Users[k] == int32(u) && kind[test.Items[k]] == 0 {
					kind[test.Items[k]] = 2
					if relevant <= 1 || v >= relevant {
						kind[test.Items[k]] = 3
						nrel++
					}
				}
			}
			if nrel == 0 {
				continue
			}
			var correct, pairs float64
			for i := range ni {
				for j := range ni {
					if kind[i] != 3 || kind[j] != 0 {
						continue
					}
					pairs++
					switch a, b := s[u][i], s[u][j]; {
					case a > b:
						correct++
					case a == b:
						correct += 0.5
					}
				}
			}
			if pairs > 0 {
				sum += correct / pairs
				users++
			}
		}
		want := sum / float64(users)
		got := Rank(s, train, test, 5, relevant)
		if !near(got.AUC, want, 1e-12) {
			t.Errorf("relevant %g: AUC = %.12f, brute force %.12f", relevant, got.AUC, want)
		}
		if got.AUC <= 0.3 || got.AUC >= 0.7 {
			t.Errorf("relevant %g: AUC of random scores = %g, want near 0.5", relevant, got.AUC)
		}
	}
}

// TestRankAllocs checks that allocations do not grow with users or items.
func TestRankAllocs(t *testing.T) {
	allocs := func(nu, ni int) float64 {
		s, train, test := randomProblem(rng.New(2), nu, ni, 10)
		return testing.AllocsPerRun(5, func() { Rank(s, train, test, 10, 4) })
	}
	small, big := allocs(10, 50), allocs(200, 500)
	if big != small {
		t.Errorf("Rank allocates %v times for 10×50, %v for 200×500; want a constant", small, big)
	}
}

// BenchmarkRankML1M ranks at MovieLens 1M size: 6040 users × 3706 items,
// about 165 ratings per user.
func BenchmarkRankML1M(b *testing.B) {
	r := rng.New(3)
	const nu, ni = 6040, 3706
	train, test := dataset(nu, ni), dataset(nu, ni)
	for u := range nu {
		for _, i := range r.Perm(ni)[:165] {
			d := train
			if r.IntN(5) == 0 {
				d = test
			}
			d.Users = append(d.Users, int32(u))
			d.Items = append(d.Items, int32(i))
			d.Values = append(d.Values, float32(1+r.IntN(5)))
		}
	}
	s := randomScorer{ni: ni}
	for _, full := range []bool{false, true} {
		b.Run(map[bool]string{false: "select", true: "sort"}[full], func(b *testing.B) {
			for b.Loop() {
				rank(s, train, test, 10, 4, full)
			}
		})
	}
}

// randomScorer scores with a cheap hash, standing in for a model.
type randomScorer struct{ ni int }

func (s randomScorer) ScoreItems(u int32, dst []float32) []float32 {
	dst = dst[:s.ni]
	x := uint32(u)*2654435761 + 1
	for i := range dst {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		dst[i] = float32(x>>8) / (1 << 24)
	}
	return dst
}

// TestRankPaths checks that top-k selection with binary-search AUC and the
// full sort give identical results.
func TestRankPaths(t *testing.T) {
	s, train, test := randomProblem(rng.New(4), 50, 300, 60)
	for _, k := range []int{1, 5, 20, 300, 400} {
		for _, relevant := range []float32{0, 4} {
			sel := rank(s, train, test, k, relevant, false)
			full := rank(s, train, test, k, relevant, true)
			if sel != full {
				t.Errorf("k %d relevant %g: selection %+v, full sort %+v", k, relevant, sel, full)
			}
			if sel.Users == 0 || sel.Precision == 0 {
				t.Errorf("k %d relevant %g: degenerate problem %+v", k, relevant, sel)
			}
		}
	}
}
