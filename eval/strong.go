package eval

import (
	"fmt"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// HistoryScorer scores every item for a user the model never saw, known
// only by the items of their history (a fold-in): the strong-
// generalisation protocol's scorer. Implementations must allow
// concurrent calls with distinct dst slices.
type HistoryScorer interface {
	ScoreHistory(items []int32, dst []float32) []float32
}

// StrongSplit is the strong-generalisation split of Liang et al. (WWW
// 2018): a fraction heldOut of the users, chosen at random by seed, is
// held out entirely; Train holds every rating of the other users. Each
// held-out user's ratings are split at random, foldFrac (0.8 in the paper)
// into Fold, the history the model folds in at test time, and the rest
// into Test. All three share d's index space.
func StrongSplit(d *ratings.Dataset, heldOut, foldFrac float64, seed uint64) (train, fold, test *ratings.Dataset, err error) {
	if !(heldOut > 0 && heldOut < 1) || !(foldFrac > 0 && foldFrac < 1) {
		return nil, nil, nil, fmt.Errorf("eval: strong split held-out %v, fold %v: want both in (0, 1)", heldOut, foldFrac)
	}
	r := rng.New(seed, 0x7374726f6e67) // "strong"
	held := make([]bool, d.NumUsers())
	for u := range held {
		held[u] = r.Float64() < heldOut
	}
	var tr, fo, te []int
	for k, u := range d.Users {
		switch {
		case !held[u]:
			tr = append(tr, k)
		case r.Float64() < foldFrac:
			fo = append(fo, k)
		default:
			te = append(te, k)
		}
	}
	return d.Subset(tr), d.Subset(fo), d.Subset(te), nil
}

// RankStrong ranks the held-out users of a StrongSplit: each user's Fold
// items are their history, given to s, and are not candidates; the rest
// is RankAt's protocol (relevant = test rating ≥ relevant, every other
// item a candidate, Recall@K and NDCG@K at every k of ks). Coverage is
// measured; rare@K is NaN, as the model's training counts are not given.
func RankStrong(s HistoryScorer, fold, test *ratings.Dataset, ks []int, relevant float32, workers int) []Ranking {
	return rankAt(historyScorer{s, fold.ByUser()}, fold, test, ks, relevant, workers, nil)
}

// historyScorer scores user u from u's row of the fold-in ratings.
type historyScorer struct {
	s    HistoryScorer
	rows *ratings.CSR
}

func (h historyScorer) ScoreItems(u int32, dst []float32) []float32 {
	var items []int32
	if int(u) < h.rows.Rows() {
		items, _ = h.rows.Row(int(u))
	}
	return h.s.ScoreHistory(items, dst)
}
