package dpals

import "math"

// addFeatures appends UserFeatures public item features to the item
// factors, so that each device fits its own coefficients on them in its
// final solve (free: it reads only the user's own ratings and public
// quantities): the item bias b_j (the user's own slope on the item
// average, beside the shared slope 1), then the standardized log of the
// item's released weighted count (how the user rates popular against rare
// items). The coefficients get the ridge RegFeature, the factors keep
// RegUser.
func (t *trainer) addFeatures() {
	f := min(t.cfg.UserFeatures, 2)
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
	for j := range t.ni {
		row := v[j*k : j*k+k]
		copy(row, t.v[j*t.k:j*t.k+t.k])
		row[t.k] = t.bi[j]
		if f >= 2 {
			row[t.k+1] = lc[j]
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
