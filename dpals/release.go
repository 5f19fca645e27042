package dpals

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/rng"
)

// release adds the noise of step st to its noise-free sums and updates the
// public state.
func (s *server) release(st step, sums []float64) {
	sig := noiseSigmas(s.cfg, st, &s.led, s.stats)
	switch st.kind {
	case kindMean:
		s.releaseMean(sums, sig[0])
	case kindBias:
		s.releaseBias(st.idx, sums, sig[0], sig[1])
	case kindInit:
		s.releaseInit(sums, sig[0])
	case kindFactor:
		s.releaseFactor(s.cfg.BiasRounds+st.idx, sums, sig[0], sig[1], sig[2])
	}
}

// releaseMean releases the global mean: each user contributes (m_u − 3,
// 1), m_u the mean of the user's ratings, clipped to [1, 5]: L2
// sensitivity √5. μ = 3 + S̃/max(Ñ, 1), clamped to [1, 5].
func (s *server) releaseMean(sums []float64, sigma float64) {
	x, n := sums[0], sums[1]
	s.record("mean", []float64{x, n})
	r := s.noise(0)
	x += sigma * s.gauss(r)
	n += sigma * s.gauss(r)
	s.mu = min(max(3+x/max(n, 1), 1), 5)
}

// releaseBias releases bias round r: the noised per-item sums g_j = Σ_u
// w_uj (weighted count, sensitivity 1) and h_j = Σ_u w_uj·clip(r − μ −
// b_u) (sensitivity Clip, or ClipNorm), and sets b_j to its posterior
// mean given them (shrinkBiases: empirical Bayes under the noise variances
// the mechanism added), pooled over the bias rounds so far with PoolBias.
func (s *server) releaseBias(r int, sums []float64, sg, sh float64) {
	g, h := sums[:s.ni], sums[s.ni:2*s.ni]
	s.record("counts", g)
	s.record("sums", h)
	nz := s.noise(uint64(1 + r))
	for j := range s.ni {
		g[j] += sg * s.gauss(nz)
		h[j] += sh * s.gauss(nz)
	}
	pg, ph, vg, vh := g, h, sg*sg, sh*sh
	if s.cfg.PoolBias {
		if s.poolG == nil {
			s.poolG, s.poolH = make([]float64, s.ni), make([]float64, s.ni)
		}
		s.poolVar += sg * sg
		s.poolVarH += sh * sh
		for j := range s.ni {
			s.poolG[j] += g[j]
			s.poolH[j] += h[j]
		}
		pg, ph, vg, vh = s.poolG, s.poolH, s.poolVar, s.poolVarH
	}
	s.bi, s.countPost, s.prior = shrinkBiases(pg, ph, vg, vh, s.cfg.RegItem, s.prior)
	if s.cfg.PoolBias {
		for j := range s.countPost {
			s.countPost[j] /= float64(r + 1)
		}
	}
	s.stats["bias_prior_mean"] = s.prior.M
	s.stats["bias_prior_slope"] = s.prior.Slope
	s.stats["bias_prior_sd"] = math.Sqrt(s.prior.Tau2)
	s.setWeights(g)
	s.bBias = slices.Clone(s.bi)
}

// setWeights sets the popularity weights p_j = (c̃_j + 1)^(−Beta) from
// released weighted counts (post-processing).
func (s *server) setWeights(count []float64) {
	s.count = slices.Clone(count)
	for j, c := range count {
		s.weight[j] = math.Pow(max(c, 0)+1, -s.cfg.Beta)
	}
}

// initV draws the initial item factors from public randomness and marks
// the active items: the TopItems with the largest released counts of the
// last bias round (post-processing), or all.
func (s *server) initV() {
	g := rng.New(s.seed, streamInit)
	s.v = make([]float64, s.ni*s.k)
	for k := range s.v {
		s.v[k] = s.cfg.InitScale * g.NormFloat64()
	}
	s.active = make([]bool, s.ni)
	m := s.cfg.TopItems
	if m == 0 || m >= s.ni {
		for j := range s.active {
			s.active[j] = true
		}
		return
	}
	for _, j := range s.topItems(m) {
		s.active[j] = true
	}
	for j, on := range s.active {
		if !on {
			clear(s.v[j*s.k : j*s.k+s.k])
		}
	}
}

// releaseFactor releases factor round r (numbered after the bias rounds):
// the noised right-hand sides h_j = Σ_u w·y·x (x = (1, u)), and either the
// per-item Gramians' upper triangles or, with SharedGram, the items'
// weighted counts and one global Gramian. It solves
// (G̃_j + λI) (b_j, v_j) = h̃_j + λ(b̄_j, 0) for the active items, b̄_j the
// bias rounds' item bias, λ = RegItem + RegNoise·σ of the count or
// Gramian entries.
func (s *server) releaseFactor(r int, sums []float64, sg, sc, sh float64) {
	k1 := s.k + 1
	nt := k1 * (k1 + 1) / 2
	shared := s.cfg.SharedGram
	var gram, cnt, rhs []float64
	if shared {
		gram, cnt, rhs = sums[:nt], sums[nt:nt+s.ni], sums[nt+s.ni:]
		s.record("global gram", gram)
		s.record("counts", cnt)
	} else {
		gram, rhs = sums[:s.ni*nt], sums[s.ni*nt:]
		cnt = make([]float64, s.ni)
		s.record("gram", gram)
	}
	s.record("rhs", rhs)
	nz := s.noise(uint64(1 + r))
	var global []float64
	if shared {
		for e := range gram {
			gram[e] += sg * s.gauss(nz)
		}
		global = make([]float64, nt)
		for e := range gram {
			global[e] = gram[e] / max(gram[0], 1)
		}
	}
	lam := s.cfg.RegItem + s.cfg.RegNoise*sc
	gj := make([]float64, nt)
	a := make([]float64, k1*k1)
	b := make([]float64, k1)
	for j := range s.ni {
		// Every item's statistics are released (a dense vector over the
		// public catalog); inactive items are not solved.
		hj := rhs[j*k1 : j*k1+k1]
		for e := range hj {
			hj[e] += sh * s.gauss(nz)
		}
		if shared {
			cnt[j] += sc * s.gauss(nz)
			c := max(cnt[j], 0)
			for e := range gj {
				gj[e] = c * global[e]
			}
		} else {
			copy(gj, gram[j*nt:j*nt+nt])
			for e := range gj {
				gj[e] += sg * s.gauss(nz)
			}
			cnt[j] = gj[0]
		}
		if s.active[j] {
			s.solveItem(j, gj, hj, lam, a, b)
		}
	}
}

// solveItem solves item j's (b_j, v_j) from its noisy upper-triangle
// Gramian gj and right-hand side hj with ridge lam, shrinking b_j towards
// the bias rounds' estimate. A Gramian the noise made indefinite gets its
// ridge doubled until the solve succeeds.
func (s *server) solveItem(j int, gj, hj []float64, lam float64, a, b []float64) {
	k1 := s.k + 1
	for try := 0; try < 60; try++ {
		e := 0
		for p1 := range k1 {
			for p2 := p1; p2 < k1; p2++ {
				a[p2*k1+p1] = gj[e] // lower triangle, row p2
				e++
			}
			a[p1*k1+p1] += lam
		}
		copy(b, hj)
		b[0] += lam * s.bBias[j]
		if linalg.CholeskySolve(a, b, k1) {
			s.bi[j] = b[0]
			copy(s.v[j*s.k:j*s.k+s.k], b[1:])
			return
		}
		lam *= 2
	}
	s.stats["failed_solves"]++
}

// releaseInit releases the warm start's item-item second-moment matrix of
// the InitItems items with the largest released counts (its upper
// triangle, row by row) with symmetric Gaussian noise and replaces their
// initial factors by its top Dim eigenvectors, in the manner of Dwork et
// al.'s Analyze Gauss (STOC 2014), scaled by √(λ/λ_max)·InitScale·√m.
func (s *server) releaseInit(upper []float64, sigma float64) {
	m := min(s.cfg.InitItems, s.ni)
	if m == 0 {
		return // no items: an empty matrix, nothing to release
	}
	top := s.topItems(m)
	s.record("init", upper)
	a := make([]float64, m*m)
	e := 0
	for i := range m {
		for k := i; k < m; k++ {
			a[i*m+k] = upper[e]
			e++
		}
	}
	nz := s.noise(releaseInit)
	for i := range m {
		for k := i; k < m; k++ {
			a[i*m+k] += sigma * s.gauss(nz)
			a[k*m+i] = a[i*m+k]
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(m, a), true) {
		s.stats["failed_solves"]++
		return
	}
	vals := eig.Values(nil) // ascending
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	clear(s.v)
	// A Gaussian symmetric m×m matrix of entry σ has spectral norm about
	// 2σ√m: components below InitFloor times that are noise and are left
	// at 0 (the user vectors then leave those dimensions unused).
	floor := s.cfg.InitFloor * 2 * sigma * math.Sqrt(float64(m))
	kept := 0
	for c := range min(s.k, m) {
		col := m - 1 - c
		l := max(vals[col], 0)
		if l <= floor {
			break
		}
		kept++
		sc := s.cfg.InitScale * math.Sqrt(float64(m)) * math.Sqrt(l/vals[m-1])
		for q, j := range top {
			s.v[j*s.k+c] = sc * vecs.At(q, col)
		}
	}
	s.stats["init_dims"] = float64(kept)
	s.stats["init_top_eigenvalue"] = vals[m-1]
	s.stats["init_noise_floor"] = floor
}

// topItems returns the m items with the largest released counts, largest
// first (ties by index).
func (s *server) topItems(m int) []int {
	order := make([]int, s.ni)
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case s.count[a] > s.count[b]:
			return -1
		case s.count[a] < s.count[b]:
			return 1
		}
		return 0
	})
	return order[:m]
}
