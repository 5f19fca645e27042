package dpals

import (
	"math"
	"regexp"
	"strconv"
)

// addFeatures appends UserFeatures public item features to the item
// factors, so that each device fits its own coefficients on them in its
// final solve (free: it reads only the user's own ratings and public
// quantities): the item bias b_j (the user's own slope on the item
// average, beside the shared slope 1), then the standardized log of the
// item's released weighted count (how the user rates popular against rare
// items), then the item's standardized release year, read from its title
// in the public catalog ("Toy Story (1995)"; 0, the mean, when the title
// has none). The coefficients get the ridge RegFeature, the factors keep
// RegUser.
func (t *trainer) addFeatures() {
	f := min(t.cfg.UserFeatures, 3)
	if f == 0 {
		return
	}
	k := t.k + f
	v := make([]float64, t.ni*k)
	var lc []float64
	if f >= 2 {
		lc = make([]float64, t.ni)
		var s, s2 float64
		for j := range t.ni {
			lc[j] = math.Log1p(max(t.itemCount(j), 0))
			s += lc[j]
			s2 += lc[j] * lc[j]
		}
		m := s / float64(t.ni)
		sd := math.Sqrt(max(s2/float64(t.ni)-m*m, 1e-12))
		for j := range lc {
			lc[j] = (lc[j] - m) / sd
		}
	}
	var yr []float64
	if f >= 3 {
		yr = standardYears(t.d.ItemTitles, t.ni)
	}
	for j := range t.ni {
		row := v[j*k : j*k+k]
		copy(row, t.v[j*t.k:j*t.k+t.k])
		row[t.k] = t.bi[j]
		if f >= 2 {
			row[t.k+1] = lc[j]
		}
		if f >= 3 {
			row[t.k+2] = yr[j]
		}
	}
	t.ridge = make([]float64, k)
	for p := range k {
		t.ridge[p] = t.cfg.RegUser
		if p >= t.k {
			t.ridge[p] = t.cfg.RegFeature
		}
	}
	t.v, t.k = v, k
	t.u = make([]float64, t.nu*k)
}

// itemCount is item j's weighted count per bias round from the released
// bias statistics: the pooled counts over the bias rounds when PoolBias,
// else the last round's.
func (t *trainer) itemCount(j int) float64 {
	if t.cfg.PoolBias && t.poolG != nil {
		return t.poolG[j] / float64(t.cfg.BiasRounds)
	}
	return t.count[j]
}

// yearRE matches a year in parentheses, as MovieLens titles end.
var yearRE = regexp.MustCompile(`\((1[89]\d\d|20\d\d)\)`)

// standardYears returns, for n items, the year in each title (the last
// "(YYYY)"), standardized over the items that have one; items without a
// title or a year get 0.
func standardYears(titles []string, n int) []float64 {
	y := make([]float64, n)
	has := make([]bool, n)
	var s, s2, c float64
	for j := range min(n, len(titles)) {
		m := yearRE.FindAllStringSubmatch(titles[j], -1)
		if len(m) == 0 {
			continue
		}
		x, err := strconv.Atoi(m[len(m)-1][1])
		if err != nil {
			continue
		}
		y[j], has[j] = float64(x), true
		s += y[j]
		s2 += y[j] * y[j]
		c++
	}
	if c == 0 {
		return make([]float64, n)
	}
	m := s / c
	sd := math.Sqrt(max(s2/c-m*m, 1e-12))
	for j := range y {
		if has[j] {
			y[j] = (y[j] - m) / sd
		} else {
			y[j] = 0
		}
	}
	return y
}
