package eval

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// DefaultKs are the cut-offs of the top-N protocol: Recall@10, NDCG@10,
// Recall@20 and NDCG@20.
var DefaultKs = []int{10, 20}

// RankAt evaluates s as a top-N recommender at every cut-off in ks, with
// the protocol of Rank: a test rating of at least relevant marks a relevant
// item, every item the user has not rated in train is a candidate, users
// without a relevant test item outside train are skipped. It returns one
// Ranking per k, in the order of ks; the AUC is the same in all of them.
//
// Users are ranked in parallel by workers goroutines (0: GOMAXPROCS), so s
// must allow concurrent ScoreItems calls with distinct dst slices (a
// *model.Model does). Per user it costs one ScoreItems call and a bounded
// selection of the top max(ks) candidates; the result does not depend on
// workers except for the rounding of the sums (users are summed in index
// order per worker block, then the blocks in order).
//
// Each Ranking also holds the lists' catalog coverage (the share of
// train's items in at least one evaluated user's top k) and rare@k (the
// share of top-k slots holding an item with fewer than RareBelow ratings
// in train).
func RankAt(s Scorer, train, test *ratings.Dataset, ks []int, relevant float32, workers int) []Ranking {
	return rankAt(s, train, test, ks, relevant, workers, itemCounts(train))
}

// itemCounts returns the number of ratings of each item of d.
func itemCounts(d *ratings.Dataset) []int {
	c := make([]int, d.NumItems())
	for _, i := range d.Items {
		c[i]++
	}
	return c
}

// rankAt is RankAt with the items' training counts given; with counts nil
// rare@k is NaN.
func rankAt(s Scorer, train, test *ratings.Dataset, ks []int, relevant float32, workers int, counts []int) []Ranking {
	n := train.NumItems()
	if test.NumItems() != n {
		panic(fmt.Sprintf("eval.RankAt: train has %d items, test has %d", n, test.NumItems()))
	}
	kmax := 0
	for _, k := range ks {
		kmax = max(kmax, k)
	}
	if kmax > n {
		kmax = n
	}
	disc := make([]float64, kmax)
	idcg := make([]float64, kmax+1)
	for p := range disc {
		disc[p] = 1 / math.Log2(float64(p+2))
		idcg[p+1] = idcg[p] + disc[p]
	}
	allRelevant := relevant <= test.Scale.Min
	tr, te := train.ByUser(), test.ByUser()
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	nu := te.Rows()
	workers = max(1, min(workers, nu))

	type acc struct {
		p, r, nd   []float64
		rare       []int // rare slots in the top k of ks[j]
		slots      []int // filled slots in the top k of ks[j]
		best       []int32
		auc        float64
		users, aus int
	}
	accs := make([]acc, workers)
	var wg sync.WaitGroup
	block := (nu + workers - 1) / workers
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			a := &accs[w]
			a.p, a.r, a.nd = make([]float64, len(ks)), make([]float64, len(ks)), make([]float64, len(ks))
			a.rare, a.slots = make([]int, len(ks)), make([]int, len(ks))
			// best[i]: the best 0-based list position of item i over
			// this worker's users (kmax: never listed).
			a.best = make([]int32, n)
			for i := range a.best {
				a.best[i] = int32(kmax)
			}
			rareAt := make([]int, kmax+1)
			mark := make([]uint8, n)
			scores := make([]float32, n)
			keys := make([]uint64, 0, kmax+1)
			pos := make([]uint32, 0, 64)
			hitAt := make([]int, kmax+1)
			dcgAt := make([]float64, kmax+1)
			for u := w * block; u < min(nu, (w+1)*block); u++ {
				tIdx, tVal := te.Row(u)
				if len(tIdx) == 0 {
					continue
				}
				var rIdx []int32
				if u < tr.Rows() {
					rIdx, _ = tr.Row(u)
				}
				nrel := markUser(mark, rIdx, tIdx, tVal, relevant, allRelevant)
				if nrel > 0 {
					scores = s.ScoreItems(int32(u), scores)
					if len(scores) != n {
						panic(fmt.Sprintf("eval.RankAt: scorer returned %d scores for %d items", len(scores), n))
					}
					keys = topKeys(keys[:0], kmax, scores, mark)
					pos = relevantBits(pos[:0], tIdx, scores, mark)
					auc, ok := aucSearch(pos, scores, mark)
					// hitAt[p], dcgAt[p]: hits and DCG in the first p.
					for p := 0; p < kmax; p++ {
						hitAt[p+1], dcgAt[p+1], rareAt[p+1] = hitAt[p], dcgAt[p], rareAt[p]
						if p >= len(keys) {
							continue
						}
						item := uint32(keys[p])
						if mark[item] == markRelevant {
							hitAt[p+1]++
							dcgAt[p+1] += disc[p]
						}
						if counts != nil && counts[item] < RareBelow {
							rareAt[p+1]++
						}
						a.best[item] = min(a.best[item], int32(p))
					}
					for j, k := range ks {
						if k < 1 {
							continue
						}
						kc := min(k, kmax)
						a.p[j] += float64(hitAt[kc]) / float64(k)
						a.r[j] += float64(hitAt[kc]) / float64(nrel)
						a.nd[j] += dcgAt[kc] / idcg[min(nrel, kc)]
						a.rare[j] += rareAt[kc]
						a.slots[j] += min(kc, len(keys))
					}
					if ok {
						a.auc += auc
						a.aus++
					}
					a.users++
				}
				unmarkUser(mark, rIdx, tIdx)
			}
		}(w)
	}
	wg.Wait()

	out := make([]Ranking, len(ks))
	var users, aus int
	var aucSum float64
	for _, a := range accs {
		users += a.users
		aus += a.aus
		aucSum += a.auc
	}
	nan := math.NaN()
	best := make([]int32, n)
	for i := range best {
		best[i] = int32(kmax)
		for _, a := range accs {
			if a.best != nil {
				best[i] = min(best[i], a.best[i])
			}
		}
	}
	for j, k := range ks {
		r := Ranking{K: k, Users: users, Precision: nan, Recall: nan, NDCG: nan, AUC: nan, Coverage: nan, Rare: nan}
		if users > 0 && k > 0 {
			var p, rc, nd float64
			var rare, slots int
			for _, a := range accs {
				p += a.p[j]
				rc += a.r[j]
				nd += a.nd[j]
				if a.rare != nil {
					rare += a.rare[j]
					slots += a.slots[j]
				}
			}
			r.Precision, r.Recall, r.NDCG = p/float64(users), rc/float64(users), nd/float64(users)
			covered := 0
			for _, b := range best {
				if int(b) < min(k, kmax) {
					covered++
				}
			}
			if n > 0 {
				r.Coverage = float64(covered) / float64(n)
			}
			if counts != nil && slots > 0 {
				r.Rare = float64(rare) / float64(slots)
			}
		}
		if aus > 0 {
			r.AUC = aucSum / float64(aus)
		}
		out[j] = r
	}
	return out
}

// ParseKs parses a comma-separated list of positive cut-offs, like "10,20".
func ParseKs(s string) ([]int, error) {
	var ks []int
	for f := range splitComma(s) {
		var k int
		if _, err := fmt.Sscanf(f, "%d", &k); err != nil || k < 1 || fmt.Sprint(k) != f {
			return nil, fmt.Errorf("cut-off %q: want a positive integer", f)
		}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("no cut-off in %q", s)
	}
	return ks, nil
}

func splitComma(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		start := 0
		for i := 0; i <= len(s); i++ {
			if i == len(s) || s[i] == ',' {
				if i > start && !yield(s[start:i]) {
					return
				}
				start = i + 1
			}
		}
	}
}
