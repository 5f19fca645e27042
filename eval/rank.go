package eval

import (
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/ratings"
)

// Scorer scores every item for user u into dst (len = number of items) and
// returns it.
type Scorer interface {
	ScoreItems(u int32, dst []float32) []float32
}

// Ranking holds top-K ranking metrics averaged over Users users.
type Ranking struct {
	// Precision, Recall and NDCG are the means over evaluated users of
	// precision@K, recall@K and NDCG@K (binary gain).
	Precision, Recall, NDCG float64
	// AUC is the mean over evaluated users that have at least one negative
	// item of the per-user AUC.
	AUC float64
	// Coverage is the share of the catalog (the training data's items)
	// that appears in at least one evaluated user's top K; Rare is the
	// share of those top-K slots taken by items with fewer than
	// RareBelow training ratings (rare@K). Only RankAt sets them; NaN
	// when not measured.
	Coverage, Rare float64
	// K is the cut-off of the @K metrics.
	K int
	// Users is the number of users evaluated.
	Users int
}

// RareBelow is the training-rating count below which an item is rare in
// Ranking.Rare (rare@K).
const RareBelow = 20

// String formats the ranking as "P@10 0.1234 R@10 0.0567 NDCG@10 0.1500 AUC 0.8900 (users=6040)".
func (r Ranking) String() string {
	return fmt.Sprintf("P@%d %.4f R@%d %.4f NDCG@%d %.4f AUC %.4f (users=%d)",
		r.K, r.Precision, r.K, r.Recall, r.K, r.NDCG, r.AUC, r.Users)
}

// Item marks used by Rank.
const (
	markNone     uint8 = iota // not interacted: a candidate and an AUC negative
	markTrain                 // in the user's training ratings: not a candidate
	markTest                  // a non-relevant test item: a candidate, not an AUC negative
	markRelevant              // a relevant test item: a candidate and an AUC positive
)

// Rank evaluates s as a top-k recommender.
//
// A test rating is relevant if its value is at least relevant; with relevant
// <= test.Scale.Min every test rating is relevant. Each user with at least one
// relevant test item that is not also in the user's training ratings is
// evaluated. The user's candidates are all items not in their training
// ratings, ordered by descending score; ties are broken by ascending item
// index, and NaN scores rank lowest.
//
//   - precision@k = hits/k and recall@k = hits/R, where hits is the number of
//     relevant items among the first k candidates and R the number of
//     relevant items;
//   - NDCG@k = DCG/IDCG with DCG = Σ 1/log2(p+1) over the 1-based positions
//     p ≤ k of relevant items and IDCG the DCG of a perfect ranking;
//   - AUC is the fraction of (relevant item, negative item) pairs in which
//     the relevant item scores higher, a tie counting 1/2, where negatives
//     are the items in neither the user's training nor test ratings (the
//     leave-one-out AUC of BPR). Users without a negative item are left out
//     of the AUC mean.
//
// Metrics are averaged over users; with no evaluated user they are NaN, as
// are the @k metrics when k < 1. Per evaluated user, Rank costs one
// ScoreItems call and, for small k, a bounded selection of the top k plus a
// binary search of each negative's score among the sorted relevant scores
// (O(n log R)); for large k, one sort of the candidates. It allocates only per
// call, never per user or item.
//
// train and test must share an item index space and s must score exactly
// that many items; Rank panics otherwise, as these are programming errors.
func Rank(s Scorer, train, test *ratings.Dataset, k int, relevant float32) Ranking {
	return rank(s, train, test, k, relevant, k > maxSelectK || k*8 > train.NumItems())
}

// rank is Rank with the choice of algorithm: fullSort sorts all candidates,
// otherwise the top k are selected and the AUC found by binary search.
func rank(s Scorer, train, test *ratings.Dataset, k int, relevant float32, fullSort bool) Ranking {
	n := train.NumItems()
	if test.NumItems() != n {
		panic(fmt.Sprintf("eval.Rank: train has %d items, test has %d", n, test.NumItems()))
	}
	allRelevant := relevant <= test.Scale.Min
	tr, te := train.ByUser(), test.ByUser()

	// Discounts 1/log2(p+1) for positions p = 1..k, and their prefix sums
	// (IDCG for R relevant items is idcg[min(R, k)]).
	kk := max(k, 0)
	disc := make([]float64, kk)
	idcg := make([]float64, kk+1)
	for p := range disc {
		disc[p] = 1 / math.Log2(float64(p+2))
		idcg[p+1] = idcg[p] + disc[p]
	}

	mark := make([]uint8, n)
	scores := make([]float32, n)
	// With a small k, a bounded selection of the top k candidates is much
	// cheaper than sorting all of them; the AUC then needs only the sorted
	// scores of the relevant items.
	var keys []uint64
	var pos []uint32
	if fullSort {
		keys = make([]uint64, 0, n)
	} else {
		keys = make([]uint64, 0, kk+1)
		pos = make([]uint32, 0, 64)
	}

	var sumP, sumR, sumN, sumAUC float64
	var users, aucUsers int
	for u := 0; u < te.Rows(); u++ {
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
				panic(fmt.Sprintf("eval.Rank: scorer returned %d scores for %d items", len(scores), n))
			}
			var auc float64
			var ok bool
			if fullSort {
				keys = candidateKeys(keys[:0], scores, mark)
				slices.Sort(keys)
				auc, ok = aucSorted(keys, mark, nrel)
			} else {
				keys = topKeys(keys[:0], kk, scores, mark)
				pos = relevantBits(pos[:0], tIdx, scores, mark)
				auc, ok = aucSearch(pos, scores, mark)
			}

			hits, dcg := 0, 0.0
			for p := 0; p < kk && p < len(keys); p++ {
				if mark[uint32(keys[p])] == markRelevant {
					hits++
					dcg += disc[p]
				}
			}
			if kk > 0 {
				sumP += float64(hits) / float64(kk)
				sumR += float64(hits) / float64(nrel)
				sumN += dcg / idcg[min(nrel, kk)]
			}
			if ok {
				sumAUC += auc
				aucUsers++
			}
			users++
		}
		unmarkUser(mark, rIdx, tIdx)
	}

	r := Ranking{K: k, Users: users}
	nan := math.NaN()
	r.Precision, r.Recall, r.NDCG, r.AUC = nan, nan, nan, nan
	if users > 0 && kk > 0 {
		r.Precision = sumP / float64(users)
		r.Recall = sumR / float64(users)
		r.NDCG = sumN / float64(users)
	}
	if aucUsers > 0 {
		r.AUC = sumAUC / float64(aucUsers)
	}
	return r
}

// markUser marks a user's items in mark (all markNone on entry): the
// training items rIdx markTrain, then each test item tIdx not already
// marked (in train, or a duplicate test rating) markRelevant when its
// value tVal is at least relevant (or allRelevant), else markTest. It
// returns the number of relevant items.
func markUser(mark []uint8, rIdx, tIdx []int32, tVal []float32, relevant float32, allRelevant bool) int {
	for _, i := range rIdx {
		mark[i] = markTrain
	}
	nrel := 0
	for j, i := range tIdx {
		if mark[i] != markNone {
			continue
		}
		if allRelevant || tVal[j] >= relevant {
			mark[i] = markRelevant
			nrel++
		} else {
			mark[i] = markTest
		}
	}
	return nrel
}

// unmarkUser resets the marks markUser set to markNone.
func unmarkUser(mark []uint8, rIdx, tIdx []int32) {
	for _, i := range rIdx {
		mark[i] = markNone
	}
	for _, i := range tIdx {
		mark[i] = markNone
	}
}

// maxSelectK is the largest k for which Rank selects the top k candidates
// by insertion instead of sorting all of them.
const maxSelectK = 256

// key returns the sort key of item i with score f: ascending key order is
// descending score, then ascending item. The high 32 bits hold the bitwise
// complement of the order-preserving encoding of the score, the low 32 bits
// the item index.
func key(f float32, i int) uint64 { return uint64(^orderedBits(f))<<32 | uint64(i) }

// candidateKeys appends one sort key per candidate item (mark != markTrain)
// to keys.
func candidateKeys(keys []uint64, scores []float32, mark []uint8) []uint64 {
	for i, f := range scores {
		if mark[i] == markTrain {
			continue
		}
		keys = append(keys, key(f, i))
	}
	return keys
}

// orderedBits maps f to a uint32 whose unsigned order is f's numeric order,
// with −0 equal to +0 and NaN below −Inf.
func orderedBits(f float32) uint32 {
	if f != f {
		return 0
	}
	if f == 0 {
		f = 0 // −0 → +0
	}
	b := math.Float32bits(f)
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}

// topKeys returns in top, sorted ascending, the keys of the k best candidate
// items (mark != markTrain), or of all of them if there are fewer. top must
// have capacity k+1.
func topKeys(top []uint64, k int, scores []float32, mark []uint8) []uint64 {
	if k < 1 {
		return top
	}
	for i, f := range scores {
		if mark[i] == markTrain {
			continue
		}
		c := key(f, i)
		if len(top) == k {
			if c >= top[k-1] {
				continue
			}
			top = top[:k-1]
		}
		// Insert c, keeping top sorted.
		j := len(top)
		top = append(top, c)
		for j > 0 && top[j-1] > c {
			top[j] = top[j-1]
			j--
		}
		top[j] = c
	}
	return top
}

// relevantBits appends the ordered encodings of the scores of the relevant
// items among items to pos, and sorts them ascending.
func relevantBits(pos []uint32, items []int32, scores []float32, mark []uint8) []uint32 {
	for _, i := range items {
		if mark[i] == markRelevant {
			pos = append(pos, orderedBits(scores[i]))
		}
	}
	slices.Sort(pos)
	return pos
}

// aucSearch returns the AUC of one user from the sorted score encodings of
// the relevant items: each negative item (markNone) is located among them by
// binary search. ok is false if there is no negative.
func aucSearch(pos []uint32, scores []float32, mark []uint8) (auc float64, ok bool) {
	var correct float64 // pairs ranked correctly, ties counting 1/2
	nneg := 0
	np := len(pos)
	for i, f := range scores {
		if mark[i] != markNone {
			continue
		}
		nneg++
		b := orderedBits(f)
		// lo = number of relevant scores below b (branch-free lower bound).
		lo := 0
		if np > 0 {
			base, m := 0, np
			for m > 1 {
				half := m >> 1
				if pos[base+half-1] < b {
					base += half
				}
				m -= half
			}
			lo = base
			if pos[base] < b {
				lo++
			}
		}
		eq := 0
		for j := lo; j < np && pos[j] == b; j++ {
			eq++
		}
		correct += float64(np-lo-eq) + 0.5*float64(eq)
	}
	if nneg == 0 {
		return math.NaN(), false
	}
	return correct / (float64(np) * float64(nneg)), true
}

// aucSorted returns the AUC of one user from candidate keys sorted by descending
// score: the fraction of (relevant, negative) pairs with the relevant item
// scored higher, ties counting 1/2. ok is false if there is no negative.
func aucSorted(keys []uint64, mark []uint8, nrel int) (auc float64, ok bool) {
	// Walk from the lowest score up, one group of equal scores at a time.
	var correct float64
	negBelow := 0
	for hi := len(keys); hi > 0; {
		s := keys[hi-1] >> 32
		lo := hi - 1
		for lo > 0 && keys[lo-1]>>32 == s {
			lo--
		}
		pos, neg := 0, 0
		for _, key := range keys[lo:hi] {
			switch mark[uint32(key)] {
			case markRelevant:
				pos++
			case markNone:
				neg++
			}
		}
		correct += float64(pos) * (float64(negBelow) + 0.5*float64(neg))
		negBelow += neg
		hi = lo
	}
	if negBelow == 0 {
		return math.NaN(), false
	}
	return correct / (float64(nrel) * float64(negBelow)), true
}
