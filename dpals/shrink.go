package dpals

import (
	"math"
)

// Posterior-mean item biases.
//
// A bias round releases, per item j, a noisy weighted count G_j = c_j +
// N(0, v_g) and a noisy weighted residual sum H_j = c_j·b_j + N(0, v_h),
// v_g and v_h the noise variances the mechanism added (pooled over the
// bias rounds with PoolBias). The ratio H_j/G_j, even ridged, is noise
// for an item whose count c_j is small against √v_h: such items got the
// largest biases and topped every list. shrinkBiases replaces it by the
// posterior mean of b_j under a hierarchical model fitted to the released
// vectors alone (empirical Bayes; post-processing, so the privacy claim
// is unchanged):
//
//   - b_j | c_j ~ N(m + s·log(1 + c_j), τ²) across items: the prior mean
//     may follow the item's count (on MovieLens rarely rated items are
//     rated lower); the line is fitted like the rest, so where the data
//     show no such trend s is about 0;
//   - c_j ~ π, a discrete prior on a grid of counts (a nonparametric
//     maximum-likelihood prior, as in Kiefer–Wolfowitz / Efron's
//     g-modelling), since the counts are heavy-tailed;
//   - G_j | c_j ~ N(c_j, v_g) and H_j | b_j, c_j ~ N(c_j·b_j, v_h +
//     RegItem·τ²·c_j), the last term the items' own sampling variance (it
//     makes the posterior mean the noise-free ridge H/(c + RegItem) when
//     v_h = 0).
//
// m, s, τ² and π are fitted by EM on the released (G, H) of every
// catalog item; the posterior mean of b_j given (G_j, H_j) mixes, over the
// grid, the Gaussian posterior mean m_c + c τ²(H − c m_c)/(c² τ² + v_h +
// RegItem·τ²·c), m_c = m + s·log(1 + c). An item with c_j ≪ √v_h/τ keeps
// b_j ≈ m_c; one with c_j ≫ √v_h/τ keeps its ratio. The posterior mean of c_j is returned too: the released count
// feature of the final table uses it (a noisy count alone made rare items
// look popular).

// ebGrid is the number of grid points of the count prior; ebIters the
// EM iterations of a fit, ebWarmIters those of a fit warm-started from
// the previous round's; ebWindow the half-width, in σ of the count noise,
// of the grid points an item's posterior keeps; ebCut the log-weight
// below an item's best grid point at which a point is dropped.
const (
	ebGrid      = 80
	ebIters     = 20
	ebWarmIters = 3
	ebWindow    = 7.0
	ebCut       = -36.0
	ebPiFloor   = 1e-12
)

// ebSlope fits the prior mean's slope in the log count (false: a
// constant prior mean; the validation comparison of docs/results).
var ebSlope = true

// ebPrior is the fitted prior of the posterior-mean biases.
type ebPrior struct {
	// M and Slope give the item biases' prior mean at count c,
	// M + Slope·log(1 + c); Tau2 is their prior variance.
	M, Slope, Tau2 float64
	Grid           []float64 // the count grid (weighted counts, as G)
	Pi             []float64 // the prior's weight of each grid point
}

// shrinkBiases returns the posterior means of the item biases b and of
// the weighted counts c from the released noisy counts g and sums h with
// noise variances vg and vh; kappa is RegItem. prev, when it has a grid
// of the right range, warm-starts the fit; the fitted prior is returned.
func shrinkBiases(g, h []float64, vg, vh, kappa float64, prev *ebPrior) (b, c []float64, pr *ebPrior) {
	n := len(g)
	b, c = make([]float64, n), make([]float64, n)
	sg := math.Sqrt(max(vg, 1e-12))
	gmax := 0.0
	for _, x := range g {
		gmax = max(gmax, x)
	}
	gmax += 4 * sg
	pr = &ebPrior{Tau2: 0.25}
	warm := prev != nil && len(prev.Pi) == ebGrid && len(prev.Grid) == ebGrid && prev.Grid[ebGrid-1] >= gmax*0.9 && prev.Grid[ebGrid-1] <= gmax*1.1
	if warm {
		pr.M, pr.Slope, pr.Tau2 = prev.M, prev.Slope, prev.Tau2
		pr.Grid, pr.Pi = append([]float64(nil), prev.Grid...), append([]float64(nil), prev.Pi...)
	} else {
		pr.Grid = countGrid(sg, gmax)
		pr.Pi = make([]float64, ebGrid)
		for k := range pr.Pi {
			pr.Pi[k] = 1 / float64(ebGrid)
		}
	}
	if n == 0 {
		return b, c, pr
	}
	// The counts' log-likelihood does not depend on the prior's
	// parameters: computed once. Grid points more than ebWindow σ from
	// G_j carry a weight below e^(−ebWindow²/2) and are left out: each
	// item keeps the window [lo_j, hi_j) of the grid.
	lg := make([]float64, n*ebGrid)
	win := make([][2]int, n)
	for j, x := range g {
		row := lg[j*ebGrid : (j+1)*ebGrid]
		lo, hi := ebGrid, 0
		for k, ck := range pr.Grid {
			d := (x - ck) / sg
			row[k] = -0.5 * d * d
			if math.Abs(d) <= ebWindow {
				lo, hi = min(lo, k), k+1
			}
		}
		if lo >= hi { // G_j far outside the grid: its nearest end
			lo, hi = 0, 1
			if x > 0 {
				lo, hi = ebGrid-1, ebGrid
			}
		}
		win[j] = [2]int{lo, hi}
	}
	iters := ebIters
	if warm {
		iters = ebWarmIters
	}
	gp := newGridPost(pr.Grid)
	post := make([]float64, ebGrid)
	newPi := make([]float64, ebGrid)
	for it := 0; it <= iters; it++ {
		last := it == iters
		gp.set(pr, vh, kappa)
		clear(newPi)
		var ls lsq
		for j := range n {
			lo, hi := win[j][0], win[j][1]
			p := post[lo:hi]
			bj, cj := gp.posterior(lo, lg[j*ebGrid+lo:j*ebGrid+hi], h[j], p)
			b[j], c[j] = bj, cj
			if last {
				continue
			}
			for k, w := range p {
				if w == 0 {
					continue
				}
				q := lo + k
				newPi[q] += w
				ls.add(w, gp.lc[q], gp.mean(q, h[j]), gp.vk[q])
			}
		}
		if last {
			break
		}
		// M step: π, the prior mean's line in log(1 + c), and τ².
		// A floor keeps every grid point possible: an item whose window
		// holds only points no item weighed still gets a posterior.
		var tot float64
		for k := range newPi {
			pr.Pi[k] = max(newPi[k]/float64(n), ebPiFloor)
			tot += pr.Pi[k]
		}
		for k := range pr.Pi {
			pr.Pi[k] /= tot
		}
		pr.M, pr.Slope, pr.Tau2 = ls.solve(ebSlope)
	}
	return b, c, pr
}

// gridPost holds, for one iteration, what each grid point's Gaussian
// posterior needs: with s2 = c²τ² + v_h + κτ²c, the prior mean m_k at
// the point, the gain a_k = cτ²/s2, the posterior variance v_k = τ² −
// c²τ⁴/s2, and the constant and scale of the sum's log-likelihood.
type gridPost struct {
	grid, lc              []float64 // the counts and log(1 + count)
	lpi, mk, ak, vk, inv2 []float64
	cst                   []float64
}

func newGridPost(grid []float64) *gridPost {
	n := len(grid)
	gp := &gridPost{grid: grid, lc: make([]float64, n), lpi: make([]float64, n), mk: make([]float64, n),
		ak: make([]float64, n), vk: make([]float64, n), inv2: make([]float64, n), cst: make([]float64, n)}
	for k, c := range grid {
		gp.lc[k] = math.Log1p(c)
	}
	return gp
}

// set computes the grid's terms for prior pr.
func (gp *gridPost) set(pr *ebPrior, vh, kappa float64) {
	t2 := pr.Tau2
	for k, c := range gp.grid {
		s2 := c*c*t2 + vh + kappa*t2*c
		gp.mk[k] = pr.M + pr.Slope*gp.lc[k]
		gp.ak[k] = c * t2 / s2
		gp.vk[k] = t2 - c*c*t2*t2/s2
		gp.inv2[k] = 0.5 / s2
		gp.lpi[k] = math.Inf(-1)
		if pr.Pi[k] > 0 {
			gp.lpi[k] = math.Log(pr.Pi[k]) - 0.5*math.Log(s2)
		}
	}
}

// mean returns the posterior mean of b at grid point k given the sum h.
func (gp *gridPost) mean(k int, h float64) float64 {
	return gp.mk[k] + gp.ak[k]*(h-gp.grid[k]*gp.mk[k])
}

// posterior returns an item's posterior means of b and c given its count
// log-likelihoods lgj over the grid points lo, lo+1, ... and its sum h;
// post receives those points' posterior weights.
func (gp *gridPost) posterior(lo int, lgj []float64, h float64, post []float64) (mean, count float64) {
	best := math.Inf(-1)
	for i, l := range lgj {
		k := lo + i
		d := h - gp.grid[k]*gp.mk[k]
		l += gp.lpi[k] - d*d*gp.inv2[k]
		post[i] = l
		best = max(best, l)
	}
	var z, e1, ec float64
	for i, l := range post {
		if l-best < ebCut {
			post[i] = 0
			continue
		}
		w := math.Exp(l - best)
		post[i] = w
		z += w
		k := lo + i
		e1 += w * gp.mean(k, h)
		ec += w * gp.grid[k]
	}
	if !(z > 0) || math.IsInf(z, 0) || math.IsNaN(e1) {
		// No finite weight (cannot happen with the floor on π): the
		// prior at the count grid's start.
		clear(post)
		return gp.mk[lo], gp.grid[lo]
	}
	for i := range post {
		post[i] /= z
	}
	return e1 / z, ec / z
}

// lsq accumulates the M step's weighted least squares of the posterior
// means on log(1 + c), and the posterior variances for τ².
type lsq struct{ w, l, ll, b, lb, bb, v float64 }

func (s *lsq) add(w, l, b, v float64) {
	s.w += w
	s.l += w * l
	s.ll += w * l * l
	s.b += w * b
	s.lb += w * l * b
	s.bb += w * b * b
	s.v += w * v
}

// solve returns the line m + slope·l (slope 0 unless withSlope or when
// the counts do not vary) and τ², the mean squared residual plus the mean
// posterior variance.
func (s *lsq) solve(withSlope bool) (m, slope, tau2 float64) {
	if s.w <= 0 {
		return 0, 0, 0.25
	}
	det := s.w*s.ll - s.l*s.l
	if withSlope && det > 1e-9*s.w*s.w {
		slope = (s.w*s.lb - s.l*s.b) / det
	}
	m = (s.b - slope*s.l) / s.w
	// Σ w (b − m − slope·l)², expanded.
	rss := s.bb - 2*m*s.b - 2*slope*s.lb + m*m*s.w + 2*m*slope*s.l + slope*slope*s.ll
	return m, slope, max((rss+s.v)/s.w, 1e-6)
}

// countGrid returns ebGrid counts from 0 to hi: 0, then geometric from a
// twentieth of the count noise's σ, so that small counts, which most items
// have, are resolved finely and large ones to a few per cent.
func countGrid(sg, hi float64) []float64 {
	g := make([]float64, ebGrid)
	lo := max(sg/20, 1e-3)
	if hi <= lo {
		hi = 2 * lo
	}
	r := math.Pow(hi/lo, 1/float64(ebGrid-2))
	x := lo
	for k := 1; k < ebGrid; k++ {
		g[k] = x
		x *= r
	}
	return g
}
