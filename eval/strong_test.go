package eval

import (
	"testing"
)

// countScorer scores item i by how many history items share its parity:
// enough to check that RankStrong hands each user their own history.
type countScorer struct{ n int }

func (c countScorer) ScoreHistory(items []int32, dst []float32) []float32 {
	dst = dst[:0]
	for i := range c.n {
		var s float32
		for _, j := range items {
			if int(j)%2 == i%2 {
				s++
			}
		}
		dst = append(dst, s+float32(i)/1000)
	}
	return dst
}

func TestStrongSplitAndRank(t *testing.T) {
	var rs [][3]float32
	for u := range 40 {
		for i := range 20 {
			if (u+i)%2 == 0 { // even users like even items
				rs = append(rs, [3]float32{float32(u), float32(i), 5})
			}
		}
	}
	d := dataset(40, 20, rs...)
	train, fold, test, err := StrongSplit(d, 0.25, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len()+fold.Len()+test.Len() != d.Len() || fold.Len() == 0 || test.Len() == 0 {
		t.Fatalf("sizes %d + %d + %d of %d", train.Len(), fold.Len(), test.Len(), d.Len())
	}
	inTrain := map[int32]bool{}
	for _, u := range train.Users {
		inTrain[u] = true
	}
	for _, u := range append(fold.Users, test.Users...) {
		if inTrain[u] {
			t.Fatalf("held-out user %d has training ratings", u)
		}
	}
	// A user's relevant items are exactly the unseen items of their
	// parity, which the scorer puts first: NDCG 1 at every k.
	r := RankStrong(countScorer{20}, fold, test, []int{5}, 4, 2)[0]
	if r.Users == 0 || r.NDCG < 0.9999 || r.AUC < 0.9999 {
		t.Errorf("ranking with each user's own history: %v", r)
	}
	if _, _, _, err := StrongSplit(d, 0, 0.8, 1); err == nil {
		t.Error("held-out 0: no error")
	}
}
