package audit

import (
	"math"
	"slices"

	"github.com/privrec/privrec/rng"
)

// z95 is the two-sided 95% normal quantile.
const z95 = 1.959963984540054

// Wilson returns the Wilson score interval at 95% for k successes in n
// trials. It is (0, 1) for n = 0.
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p, fn, z2 := float64(k)/float64(n), float64(n), z95*z95
	c := (p + z2/(2*fn)) / (1 + z2/fn)
	h := z95 / (1 + z2/fn) * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
	return math.Max(0, c-h), math.Min(1, c+h)
}

// accuracy is a count of correct guesses.
type accuracy struct{ ok, n int }

func (a *accuracy) add(correct bool) {
	a.n++
	if correct {
		a.ok++
	}
}

// value returns the accuracy and its Wilson interval.
func (a accuracy) value() (v, lo, hi float64) {
	lo, hi = Wilson(a.ok, a.n)
	if a.n == 0 {
		return math.NaN(), lo, hi
	}
	return float64(a.ok) / float64(a.n), lo, hi
}

// moments are the sums a least-squares fit of y on x needs.
type moments struct{ n, x, y, xx, xy, yy float64 }

func (m *moments) add(x, y float64) {
	m.n++
	m.x += x
	m.y += y
	m.xx += x * x
	m.xy += x * y
	m.yy += y * y
}

func (m *moments) plus(o moments) {
	m.n += o.n
	m.x += o.x
	m.y += o.y
	m.xx += o.xx
	m.xy += o.xy
	m.yy += o.yy
}

// ratio returns the RMSE of the best affine map a + b·x of the guesses
// onto the truth y, over the RMSE of the best constant (the mean of y):
// sqrt(1 − ρ²) for the correlation ρ of x and y. 0 is exact recovery, 1
// is no better than the mean. Calibrating the attacker's guesses against
// the truth favours the attacker, so the audit errs on the safe side.
func (m moments) ratio() float64 {
	if m.n < 2 {
		return math.NaN()
	}
	vy := m.yy - m.y*m.y/m.n
	vx := m.xx - m.x*m.x/m.n
	if !(vy > 0) {
		return math.NaN()
	}
	if !(vx > 1e-12*vy) {
		return 1
	}
	cxy := m.xy - m.x*m.y/m.n
	r2 := math.Min(1, cxy*cxy/(vx*vy))
	return math.Sqrt(1 - r2)
}

// bootRatio returns moments.ratio of the pooled clusters and a 95%
// percentile-bootstrap interval from resampling whole clusters (users)
// with replacement.
func bootRatio(clusters []moments, reps int, seed uint64) (v, lo, hi float64) {
	var all moments
	for _, c := range clusters {
		all.plus(c)
	}
	v = all.ratio()
	if len(clusters) < 2 {
		return v, math.NaN(), math.NaN()
	}
	r := rng.New(seed, streamBoot)
	stats := make([]float64, 0, reps)
	for range reps {
		var s moments
		for range clusters {
			s.plus(clusters[r.IntN(len(clusters))])
		}
		if x := s.ratio(); !math.IsNaN(x) {
			stats = append(stats, x)
		}
	}
	if len(stats) == 0 {
		return v, math.NaN(), math.NaN()
	}
	slices.Sort(stats)
	q := func(p float64) float64 { return stats[min(len(stats)-1, int(p*float64(len(stats))))] }
	return v, q(0.025), q(0.975)
}
