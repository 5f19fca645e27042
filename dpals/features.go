package dpals

import (
	"math"
	"regexp"
	"strconv"
)

// finalTable returns the item table of the final round and its columns:
// the item factors followed by UserFeatures public item features, so that
// each device fits its own coefficients on them in its final solve (free:
// it reads only the user's own ratings and public quantities): the item
// bias b_j (the user's own slope on the item average, beside the shared
// slope 1), then the standardized log of the item's released weighted
// count (how the user rates popular against rare items), then the item's
// standardized release year, read from its title in the public catalog
// ("Toy Story (1995)"; 0, the mean, when the title has none). The
// coefficients get the ridge RegFeature, the factors RegUser
// (featureRidge). It depends only on the server's released state.
func (s *server) finalTable() ([]float64, int) {
	f := min(s.cfg.UserFeatures, 3)
	k := s.k + f
	v := make([]float64, s.ni*k)
	var lc []float64
	if f >= 2 {
		lc = make([]float64, s.ni)
		var sm, s2 float64
		for j := range s.ni {
			lc[j] = math.Log1p(max(s.itemCount(j), 0))
			sm += lc[j]
			s2 += lc[j] * lc[j]
		}
		m := sm / float64(s.ni)
		sd := math.Sqrt(max(s2/float64(s.ni)-m*m, 1e-12))
		for j := range lc {
			lc[j] = (lc[j] - m) / sd
		}
	}
	var yr []float64
	if f >= 3 {
		yr = standardYears(s.titles, s.ni)
	}
	for j := range s.ni {
		row := v[j*k : j*k+k]
		if s.v != nil {
			copy(row, s.v[j*s.k:j*s.k+s.k])
		}
		if f >= 1 {
			row[s.k] = s.bi[j]
		}
		if f >= 2 {
			row[s.k+1] = lc[j]
		}
		if f >= 3 {
			row[s.k+2] = yr[j]
		}
	}
	return v, k
}

// featureRidge returns the ridge of each of the k columns of the final
// table whose first kf are item factors: RegUser, then RegFeature.
func featureRidge(cfg Config, kf, k int) []float64 {
	r := make([]float64, k)
	for p := range k {
		r[p] = cfg.RegUser
		if p >= kf {
			r[p] = cfg.RegFeature
		}
	}
	return r
}

// itemCount is item j's weighted count per bias round from the released
// bias statistics: its posterior mean given the released counts and sums
// (shrinkBiases), or, for a server without it, the pooled counts over the
// bias rounds when PoolBias, else the last round's.
func (s *server) itemCount(j int) float64 {
	if s.countPost != nil {
		return s.countPost[j]
	}
	if s.cfg.PoolBias && s.poolG != nil {
		return s.poolG[j] / float64(s.cfg.BiasRounds)
	}
	if s.count == nil { // before the first bias round
		return 0
	}
	return s.count[j]
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
