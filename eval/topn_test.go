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

// prefScorer scores items in the fixed order of pref, best first, for
// every user.
type prefScorer []int

func (p prefScorer) ScoreItems(_ int32, dst []float32) []float32 {
	dst = dst[:len(p)]
	for rank, i := range p {
		dst[i] = float32(len(p) - rank)
	}
	return dst
}

// TestRankAtCoverageRare checks catalog coverage and rare@K on a case
// worked by hand: item 4 has 30 training ratings (users 10..39), every
// other item none, so is rare. Every user prefers 4, 0, 1, 2, 3. Users
// 0..9 list 4 then 0, 1, ...; users 10 and 11 rated 4, so list 0, 1, ....
func TestRankAtCoverageRare(t *testing.T) {
	const nu, ni = 40, 5
	var tr, te [][3]float32
	for u := 10; u < 40; u++ {
		tr = append(tr, [3]float32{float32(u), 4, 3})
	}
	for u := range 12 {
		te = append(te, [3]float32{float32(u), 2, 5})
	}
	train, test := dataset(nu, ni, tr...), dataset(nu, ni, te...)
	tests := []struct {
		k              int
		coverage, rare float64
	}{
		{1, 2.0 / 5, 2.0 / 12},         // 4 (×10), 0 (×2)
		{2, 3.0 / 5, 14.0 / 24},        // {4,0} ×10, {0,1} ×2
		{10, 5.0 / 5, 48.0 / (50 + 8)}, // the whole candidate list
	}
	ks := []int{1, 2, 10}
	for _, w := range []int{1, 3} {
		got := RankAt(prefScorer{4, 0, 1, 2, 3}, train, test, ks, 4, w)
		for j, tc := range tests {
			g := got[j]
			if g.K != tc.k || !near(g.Coverage, tc.coverage, 1e-12) || !near(g.Rare, tc.rare, 1e-12) {
				t.Errorf("workers %d k %d: coverage %v rare %v, want %v, %v", w, tc.k, g.Coverage, g.Rare, tc.coverage, tc.rare)
			}
		}
	}
	// Without the model's training counts, strong generalisation leaves
	// rare@K unmeasured.
	if r := RankStrong(historyPref{4, 0, 1, 2, 3}, train, test, ks, 4, 1)[0]; !math.IsNaN(r.Rare) || math.IsNaN(r.Coverage) {
		t.Errorf("RankStrong: rare %v coverage %v, want NaN and a number", r.Rare, r.Coverage)
	}
}

// historyPref is prefScorer as a HistoryScorer.
type historyPref []int

func (p historyPref) ScoreHistory(_ []int32, dst []float32) []float32 {
	return prefScorer(p).ScoreItems(0, dst)
}
