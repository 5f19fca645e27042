package ratings

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/rng"
)

func TestSyntheticErrors(t *testing.T) {
	ok := SyntheticConfig{Users: 10, Items: 20, Rank: 2, PerUser: 5}
	if _, err := Synthetic(ok, 1); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	tests := []struct {
		name string
		edit func(c *SyntheticConfig)
	}{
		{"no users", func(c *SyntheticConfig) { c.Users = 0 }},
		{"no items", func(c *SyntheticConfig) { c.Items = 0 }},
		{"rank 0", func(c *SyntheticConfig) { c.Rank = 0 }},
		{"PerUser 0", func(c *SyntheticConfig) { c.PerUser = 0 }},
		{"PerUser > Items", func(c *SyntheticConfig) { c.PerUser = 21 }},
		{"MinPerUser > PerUser", func(c *SyntheticConfig) { c.MinPerUser = 6 }},
		{"negative noise", func(c *SyntheticConfig) { c.Noise = -1 }},
		{"NaN noise", func(c *SyntheticConfig) { c.Noise = math.NaN() }},
		{"infinite noise", func(c *SyntheticConfig) { c.Noise = math.Inf(1) }},
		{"negative Zipf", func(c *SyntheticConfig) { c.Zipf = -0.5 }},
		{"inverted scale", func(c *SyntheticConfig) { c.Scale = Scale{Min: 5, Max: 1, Step: 1} }},
		{"negative step", func(c *SyntheticConfig) { c.Scale = Scale{Min: 1, Max: 5, Step: -1} }},
		{"too many ratings", func(c *SyntheticConfig) { c.Users, c.Items, c.PerUser = 1<<20, 1<<12, 1<<11 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if _, err := Synthetic(c, 1); !errors.Is(err, ErrBadParameter) {
				t.Errorf("error = %v, want ErrBadParameter", err)
			}
		})
	}
}

func TestSyntheticShape(t *testing.T) {
	tests := []struct {
		name  string
		cfg   SyntheticConfig
		exact bool // every user has exactly PerUser ratings
	}{
		{"uniform", SyntheticConfig{Users: 50, Items: 60, Rank: 3, PerUser: 10, MinPerUser: 10, Noise: 0.5}, true},
		{"zipf", SyntheticConfig{Users: 50, Items: 60, Rank: 3, PerUser: 10, MinPerUser: 10, Zipf: 1.2}, true},
		{"steep zipf, half the items", SyntheticConfig{Users: 30, Items: 40, Rank: 2, PerUser: 20, MinPerUser: 20, Zipf: 3}, true},
		{"zipf, most items", SyntheticConfig{Users: 30, Items: 40, Rank: 2, PerUser: 35, MinPerUser: 35, Zipf: 1}, true},
		{"zipf, all items", SyntheticConfig{Users: 20, Items: 30, Rank: 2, PerUser: 30, MinPerUser: 30, Zipf: 2}, true},
		{"uniform, all items", SyntheticConfig{Users: 20, Items: 30, Rank: 2, PerUser: 30, MinPerUser: 30}, true},
		{"half stars", SyntheticConfig{Users: 50, Items: 60, Rank: 3, PerUser: 10, Noise: 1, Scale: HalfStars5}, false},
		{"continuous", SyntheticConfig{Users: 50, Items: 60, Rank: 3, PerUser: 10, Noise: 1, Scale: Scale{Min: -1, Max: 1}}, false},
		{"rank 1", SyntheticConfig{Users: 10, Items: 10, Rank: 1, PerUser: 1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Synthetic(tc.cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			want := tc.cfg.Scale
			if want == (Scale{}) {
				want = Stars5
			}
			if d.Scale != want || d.NumUsers() != tc.cfg.Users || d.NumItems() != tc.cfg.Items {
				t.Fatalf("scale %v, %d users, %d items; want %v, %d, %d", d.Scale, d.NumUsers(), d.NumItems(), want, tc.cfg.Users, tc.cfg.Items)
			}
			byUser := d.ByUser()
			for u := 0; u < byUser.Rows(); u++ {
				items, _ := byUser.Row(u)
				if n := len(items); n < max(1, tc.cfg.MinPerUser) || (tc.exact && n != tc.cfg.PerUser) {
					t.Fatalf("user %d has %d ratings; want PerUser = %d, MinPerUser = %d", u, n, tc.cfg.PerUser, tc.cfg.MinPerUser)
				}
				for j := 1; j < len(items); j++ {
					if items[j] == items[j-1] {
						t.Fatalf("user %d rates item %d twice", u, items[j])
					}
				}
			}
			// Values spread over the scale rather than piling up in one spot.
			values := slices.Clone(d.Values)
			slices.Sort(values)
			if len(slices.Compact(values)) < 3 {
				t.Errorf("only %d distinct values", len(slices.Compact(values)))
			}
		})
	}
}

func TestSyntheticCounts(t *testing.T) {
	cfg := SyntheticConfig{Users: 2000, Items: 500, Rank: 2, PerUser: 20, MinPerUser: 5}
	d, err := Synthetic(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	perUser, _ := d.Counts()
	// Mean 5 + 15 = 20; the sample mean of 2000 exponentials has sd 0.34.
	mean := float64(d.Len()) / float64(cfg.Users)
	if math.Abs(mean-20) > 1.5 {
		t.Errorf("mean ratings per user %.2f, want 20 ± 1.5", mean)
	}
	lo, hi := slices.Min(perUser), slices.Max(perUser)
	if lo < 5 || hi < 60 {
		t.Errorf("ratings per user range %d..%d, want a minimum of 5 and a long tail", lo, hi)
	}
}

// TestSyntheticZipf checks the popularity skew: with exponent 1 over 1000
// items the top 10% of items get about two thirds of the draws; uniform
// draws give them about 10%.
func TestSyntheticZipf(t *testing.T) {
	share := func(zipf float64) float64 {
		d, err := Synthetic(SyntheticConfig{Users: 1000, Items: 1000, Rank: 2, PerUser: 20, MinPerUser: 20, Zipf: zipf}, 5)
		if err != nil {
			t.Fatal(err)
		}
		_, perItem := d.Counts()
		slices.Sort(perItem)
		slices.Reverse(perItem)
		top := 0
		for _, c := range perItem[:100] {
			top += c
		}
		return float64(top) / float64(d.Len())
	}
	if s := share(1); s < 0.45 {
		t.Errorf("Zipf 1: top 10%% of items hold %.2f of ratings, want > 0.45", s)
	}
	if s := share(0); s > 0.2 {
		t.Errorf("uniform: top 10%% of items hold %.2f of ratings, want < 0.2", s)
	}
}

// TestSyntheticLowRank checks the planted model: without noise or
// rounding, the rating matrix has rank Rank, so its minors of size Rank+1
// vanish while those of size Rank do not. Minors touching a value clamped
// to the scale are skipped.
func TestSyntheticLowRank(t *testing.T) {
	const n = 8
	for _, rank := range []int{1, 2} {
		sc := Scale{Min: -2, Max: 2} // continuous: u·v = rating
		d, err := Synthetic(SyntheticConfig{Users: n, Items: n, Rank: rank, PerUser: n, MinPerUser: n, Scale: sc}, 6)
		if err != nil {
			t.Fatal(err)
		}
		var m [n][n]float64
		for k := range d.Values {
			m[d.Users[k]][d.Items[k]] = float64(d.Values[k])
		}
		// combos lists the increasing index tuples of the given size.
		var combos func(size, from int) [][]int
		combos = func(size, from int) [][]int {
			if size == 0 {
				return [][]int{nil}
			}
			var out [][]int
			for a := from; a < n; a++ {
				for _, rest := range combos(size-1, a+1) {
					out = append(out, append([]int{a}, rest...))
				}
			}
			return out
		}
		// maxMinor returns the largest |minor| of the given size and how
		// many minors were free of clamped values.
		maxMinor := func(size int) (float64, int) {
			worst, checked := 0.0, 0
			rows := combos(size, 0)
			cols := rows
		next:
			for _, r := range rows {
				for _, c := range cols {
					var sub [3][3]float64
					for x := range size {
						for y := range size {
							v := m[r[x]][c[y]]
							if v <= float64(sc.Min) || v >= float64(sc.Max) {
								continue next
							}
							sub[x][y] = v
						}
					}
					checked++
					worst = max(worst, math.Abs(det(sub, size)))
				}
			}
			return worst, checked
		}
		if v, c := maxMinor(rank + 1); v > 1e-5 || c < 10 {
			t.Errorf("rank %d: largest of %d minors of size %d is %g, want ~0", rank, c, rank+1, v)
		}
		if v, _ := maxMinor(rank); v < 1e-2 {
			t.Errorf("rank %d: minors of size %d are at most %g, want clearly nonzero", rank, rank, v)
		}
	}
}

func det(m [3][3]float64, n int) float64 {
	switch n {
	case 1:
		return m[0][0]
	case 2:
		return m[0][0]*m[1][1] - m[0][1]*m[1][0]
	}
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
		m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}

// TestItemPickerSuccessiveSampling compares the inclusion frequencies of
// the item sampler with the exact inclusion probabilities of successive
// sampling (each draw proportional to weight among the items not yet
// drawn), computed by enumerating all draw orders. The cases cover the
// rejection path, the Efraimidis-Spirakis path, and a steep skew where
// rejection runs out of tries half way and the fallback finishes the set.
// Each frequency has sd below 0.0016 over 100000 sets; the bound of 0.01 is
// over 6 sd, and the seed is fixed.
func TestItemPickerSuccessiveSampling(t *testing.T) {
	tests := []struct {
		name string
		n, m int
		zipf float64
	}{
		{"rejection", 6, 3, 1},
		{"keys", 6, 4, 1},
		{"uniform keys", 6, 4, 0},
		{"rejection then keys", 8, 4, 6},
	}
	const sets = 100000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newItemPicker(rng.New(9, 1), tc.n, tc.zipf)
			w := p.w
			if w == nil {
				w = make([]float64, tc.n)
				for i := range w {
					w[i] = 1
				}
			}
			want := make([]float64, tc.n)
			var walk func(depth int, prob, left float64, used []bool)
			walk = func(depth int, prob, left float64, used []bool) {
				if depth == tc.m {
					for i, u := range used {
						if u {
							want[i] += prob
						}
					}
					return
				}
				for i := range w {
					if !used[i] {
						used[i] = true
						walk(depth+1, prob*w[i]/left, left-w[i], used)
						used[i] = false
					}
				}
			}
			total := 0.0
			for _, x := range w {
				total += x
			}
			walk(0, 1, total, make([]bool, tc.n))

			got := make([]float64, tc.n)
			var buf []int32
			for s := range sets {
				buf = p.draw(tc.m, buf[:0], s)
				if len(buf) != tc.m {
					t.Fatalf("drew %d items, want %d", len(buf), tc.m)
				}
				for _, i := range buf {
					got[i] += 1.0 / sets
				}
			}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 0.01 {
					t.Errorf("item %d (weight %.3g) drawn in %.4f of sets, want %.4f", i, w[i], got[i], want[i])
				}
			}
		})
	}
}
