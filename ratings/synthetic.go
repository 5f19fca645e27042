package ratings

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/privrec/privrec/rng"
)

// SyntheticConfig describes a planted low-rank rating model for Synthetic.
type SyntheticConfig struct {
	// Users, Items and Rank are the numbers of users, items and latent
	// dimensions; all at least 1.
	Users, Items, Rank int
	// PerUser is the mean number of ratings per user, in [1, Items].
	PerUser int
	// MinPerUser is the least number of ratings per user (below 1 means 1;
	// at most PerUser). A user gets MinPerUser plus an exponentially
	// distributed number of further ratings with mean PerUser − MinPerUser,
	// capped at Items; MinPerUser = PerUser gives every user exactly PerUser
	// ratings.
	MinPerUser int
	// Zipf is the exponent s of item popularity: a user draws items
	// without replacement with probability proportional to 1/rank^s, the
	// popularity ranks being a random permutation of the items. 0 draws
	// items uniformly.
	Zipf float64
	// Noise is the standard deviation of the Gaussian noise added to u·v,
	// which has unit variance, before mapping to the scale.
	Noise float64
	// Scale is the rating scale; the zero Scale means Stars5.
	Scale Scale
}

// maxSyntheticRatings bounds the expected size of a synthetic dataset so
// that positions fit CSR's int32.
const maxSyntheticRatings = 1 << 30

// Synthetic draws a dataset from a planted low-rank model. User factors u
// and item factors v have independent N(0, 1/√Rank) entries, so u·v has
// mean 0 and variance 1. Each user rates a random set of items (see
// SyntheticConfig); the rating of item i by user u is
//
//	mid + (Max − Min)/4 · (u·v + Noise · z),  z ~ N(0, 1),
//
// with mid the middle of the scale, rounded to the scale's Step and clamped
// to [Min, Max]. Ratings are grouped by user, items in increasing order; user
// and item IDs are "1", "2", ... The same cfg and seed give the same
// dataset.
func Synthetic(cfg SyntheticConfig, seed uint64) (*Dataset, error) {
	if cfg.Scale == (Scale{}) {
		cfg.Scale = Stars5
	}
	minPer := max(1, cfg.MinPerUser)
	sc := cfg.Scale
	switch {
	case cfg.Users < 1 || cfg.Users > math.MaxInt32:
		return nil, badParam("synthetic: Users = %d, want 1 <= Users < 2^31", cfg.Users)
	case cfg.Items < 1 || cfg.Items > math.MaxInt32:
		return nil, badParam("synthetic: Items = %d, want 1 <= Items < 2^31", cfg.Items)
	case cfg.Rank < 1 || cfg.Rank > 1<<16:
		return nil, badParam("synthetic: Rank = %d, want 1 <= Rank <= 65536", cfg.Rank)
	case cfg.PerUser < 1 || cfg.PerUser > cfg.Items:
		return nil, badParam("synthetic: PerUser = %d, want 1 <= PerUser <= Items = %d", cfg.PerUser, cfg.Items)
	case minPer > cfg.PerUser:
		return nil, badParam("synthetic: MinPerUser = %d exceeds PerUser = %d", cfg.MinPerUser, cfg.PerUser)
	case float64(cfg.Users)*float64(cfg.PerUser) > maxSyntheticRatings:
		return nil, badParam("synthetic: Users·PerUser = %d·%d exceeds 2^30 ratings", cfg.Users, cfg.PerUser)
	case !(cfg.Noise >= 0) || math.IsInf(cfg.Noise, 0):
		return nil, badParam("synthetic: Noise = %g, want a finite value >= 0", cfg.Noise)
	case !(cfg.Zipf >= 0) || math.IsInf(cfg.Zipf, 0):
		return nil, badParam("synthetic: Zipf = %g, want a finite value >= 0", cfg.Zipf)
	case !(sc.Max > sc.Min) || !(sc.Step >= 0) || math.IsInf(float64(sc.Max-sc.Min), 0):
		return nil, badParam("synthetic: invalid scale %v", sc)
	}

	r := rng.New(seed, streamSynthetic)
	nu, ni, rank := cfg.Users, cfg.Items, cfg.Rank
	sd := math.Pow(float64(rank), -0.25)
	U := make([]float64, nu*rank)
	V := make([]float64, ni*rank)
	for j := range U {
		U[j] = sd * r.NormFloat64()
	}
	for j := range V {
		V[j] = sd * r.NormFloat64()
	}

	pick := newItemPicker(r, ni, cfg.Zipf)
	d := &Dataset{
		Name:    "synthetic",
		Scale:   sc,
		Users:   make([]int32, 0, nu*cfg.PerUser),
		Items:   make([]int32, 0, nu*cfg.PerUser),
		Values:  make([]float32, 0, nu*cfg.PerUser),
		UserIDs: numberedIDs(nu),
		ItemIDs: numberedIDs(ni),
	}
	mid := (float64(sc.Min) + float64(sc.Max)) / 2
	half := float64(sc.Range()) / 4
	extra := float64(cfg.PerUser - minPer)
	for u := 0; u < nu; u++ {
		m := minPer
		if extra > 0 {
			m += int(math.Round(r.ExpFloat64() * extra))
		}
		m = min(m, ni)
		start := len(d.Items)
		d.Items = pick.draw(m, d.Items, u)
		row := d.Items[start:]
		slices.Sort(row)
		uf := U[u*rank : (u+1)*rank]
		for _, i := range row {
			vf := V[int(i)*rank : (int(i)+1)*rank]
			var dot float64
			for k, x := range uf {
				dot += x * vf[k]
			}
			x := mid + half*(dot+cfg.Noise*r.NormFloat64())
			d.Users = append(d.Users, int32(u))
			d.Values = append(d.Values, onScale(sc, x))
		}
	}
	return d, nil
}

// onScale rounds x to the scale's step and clamps it to the scale.
func onScale(sc Scale, x float64) float32 {
	lo, hi := float64(sc.Min), float64(sc.Max)
	x = min(max(x, lo), hi)
	if sc.Step > 0 {
		step := float64(sc.Step)
		k := math.Round((x - lo) / step)
		if lo+k*step > hi+1e-9 {
			k--
		}
		return sc.Min + float32(k)*sc.Step
	}
	return float32(x)
}

func numberedIDs(n int) []string {
	ids := make([]string, n)
	for j := range ids {
		ids[j] = strconv.Itoa(j + 1)
	}
	return ids
}

// itemPicker draws sets of distinct items, uniformly or with Zipf
// popularity.
type itemPicker struct {
	r     *rand.Rand
	n     int
	cdf   []float64   // cumulative popularity weights; nil for uniform
	w     []float64   // popularity weight of each item; nil for uniform
	stamp []int32     // stamp[i] == owner+1 if item i is in the current set
	cand  []candidate // scratch for the fallback
}

func newItemPicker(r *rand.Rand, n int, zipf float64) *itemPicker {
	p := &itemPicker{r: r, n: n, stamp: make([]int32, n)}
	if zipf > 0 {
		rank := r.Perm(n)
		p.w = make([]float64, n)
		p.cdf = make([]float64, n)
		var total float64
		for i := range p.w {
			p.w[i] = math.Pow(float64(rank[i]+1), -zipf)
			total += p.w[i]
			p.cdf[i] = total
		}
	}
	return p
}

// one draws a single item from the popularity distribution, with
// replacement.
func (p *itemPicker) one() int {
	if p.cdf == nil {
		return p.r.IntN(p.n)
	}
	x := p.r.Float64() * p.cdf[p.n-1]
	lo, hi := 0, p.n-1
	for lo < hi { // first index with cdf > x
		mid := int(uint(lo+hi) >> 1)
		if p.cdf[mid] > x {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// draw appends m distinct items to dst by successive sampling: each item is
// drawn from the popularity distribution restricted to the items not yet
// drawn. owner tags the set in the stamp array, so no per-set allocation
// is needed.
func (p *itemPicker) draw(m int, dst []int32, owner int) []int32 {
	tag := int32(owner + 1)
	got := 0
	// Rejection from the unrestricted distribution is exact successive
	// sampling; it is fast while the drawn items hold little of the
	// popularity mass. Past a budget of tries the rest is drawn by
	// Efraimidis-Spirakis keys over the undrawn items, which continues the
	// same process exactly.
	if 2*m <= p.n || p.cdf == nil {
		budget := 16*m + 64
		if p.cdf == nil && 2*m > p.n {
			budget = 0 // dense uniform sets: go straight to the fallback
		}
		for tries := 0; got < m && tries < budget; tries++ {
			i := p.one()
			if p.stamp[i] != tag {
				p.stamp[i] = tag
				dst = append(dst, int32(i))
				got++
			}
		}
	}
	if got == m {
		return dst
	}
	p.cand = p.cand[:0]
	for i := 0; i < p.n; i++ {
		if p.stamp[i] == tag {
			continue
		}
		w := 1.0
		if p.w != nil {
			w = p.w[i]
		}
		// Key U^(1/w), compared through its log: log(U)/w, larger first.
		p.cand = append(p.cand, candidate{math.Log(1-p.r.Float64()) / w, int32(i)})
	}
	slices.SortFunc(p.cand, func(a, b candidate) int {
		switch {
		case a.key > b.key:
			return -1
		case a.key < b.key:
			return 1
		}
		return int(a.item - b.item)
	})
	for _, c := range p.cand[:m-got] {
		p.stamp[c.item] = tag
		dst = append(dst, c.item)
	}
	return dst
}

type candidate struct {
	key  float64
	item int32
}
