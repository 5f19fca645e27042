package eval

import (
	"math"
	"testing"
)

type randScorer struct{ n int }

func (r randScorer) ScoreItems(u int32, dst []float32) []float32 {
	dst = dst[:0]
	for i := range r.n {
		dst = append(dst, float32((int(u)*7919+i*104729)%97)/97)
	}
	return dst
}

// TestRankAtMatchesRank checks RankAt against the sequential Rank at each
// cut-off and for several worker counts.
func TestRankAtMatchesRank(t *testing.T) {
	const nu, ni = 50, 40
	var tr, te [][3]float32
	for u := range nu {
		for i := range ni {
			h := (u*31 + i*17) % 11
			switch {
			case h < 3:
				tr = append(tr, [3]float32{float32(u), float32(i), float32(1 + h)})
			case h < 6:
				te = append(te, [3]float32{float32(u), float32(i), float32(h - 1)})
			}
		}
	}
	train, test := dataset(nu, ni, tr...), dataset(nu, ni, te...)
	s := randScorer{ni}
	ks := []int{1, 5, 10}
	for _, w := range []int{1, 3, 8} {
		got := RankAt(s, train, test, ks, 4, w)
		for j, k := range ks {
			want := Rank(s, train, test, k, 4)
			g := got[j]
			for _, p := range [][2]float64{{g.Precision, want.Precision}, {g.Recall, want.Recall}, {g.NDCG, want.NDCG}, {g.AUC, want.AUC}} {
				if math.Abs(p[0]-p[1]) > 1e-12 {
					t.Fatalf("workers %d k %d: got %v, want %v", w, k, g, want)
				}
			}
			if g.Users != want.Users || g.K != k {
				t.Fatalf("workers %d: got %v, want %v", w, g, want)
			}
		}
	}
}

func TestParseKs(t *testing.T) {
	ks, err := ParseKs("10,20,10")
	if err != nil || len(ks) != 2 || ks[0] != 10 || ks[1] != 20 {
		t.Fatalf("ParseKs = %v, %v", ks, err)
	}
	for _, bad := range []string{"", "0", "x", "10,-1"} {
		if _, err := ParseKs(bad); err == nil {
			t.Errorf("ParseKs(%q): no error", bad)
		}
	}
}
