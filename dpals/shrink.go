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
//   - b_j ~ N(m, τ²) across items;
//   - c_j ~ π, a discrete prior on a grid of counts (a nonparametric
//     maximum-likelihood prior, as in Kiefer–Wolfowitz / Efron's
//     g-modelling), since the counts are heavy-tailed;
//   - G_j | c_j ~ N(c_j, v_g) and H_j | b_j, c_j ~ N(c_j·b_j, v_h +
//     RegItem·τ²·c_j), the last term the items' own sampling variance (it
//     makes the posterior mean the noise-free ridge H/(c + RegItem) when
//     v_h = 0).
//
// m, τ² and π are fitted by EM on the released (G, H) of every catalog
// item; the posterior mean of b_j given (G_j, H_j) mixes, over the grid,
// the Gaussian posterior mean m + c τ²(H − c m)/(c² τ² + v_h + RegItem·τ²·c).
// An item with c_j ≪ √v_h/τ keeps b_j ≈ m; one with c_j ≫ √v_h/τ keeps
// its ratio. The posterior mean of c_j is returned too: the released count
// feature of the final table uses it (a noisy count alone made rare items
// look popular).

// ebGrid is the number of grid points of the count prior; ebIters the
// EM iterations of a fit (warm-started from the previous round's fit).
const (
	ebGrid      = 160
	ebIters     = 40
	ebWarmIters = 10
	ebWindow    = 7.0
)

// ebPrior is the fitted prior of the posterior-mean biases.
type ebPrior struct {
	M, Tau2 float64   // the item biases' prior mean and variance
	Grid    []float64 // the count grid (weighted counts, as G)
	Pi      []float64 // the prior's weight of each grid point
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
	pr = &ebPrior{M: 0, Tau2: 0.25}
	warm := prev != nil && len(prev.Pi) == ebGrid && len(prev.Grid) == ebGrid && prev.Grid[ebGrid-1] >= gmax*0.9 && prev.Grid[ebGrid-1] <= gmax*1.1
	if warm {
		pr.M, pr.Tau2 = prev.M, prev.Tau2
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
	// The counts' likelihood does not depend on m and τ²: computed once,
	// as logs relative to each item's best grid point.
	// Grid points more than ebWindow σ from G_j carry a weight below
	// e^(−ebWindow²/2) and are left out: each item keeps the window
	// [lo_j, hi_j) of the grid.
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
	post := make([]float64, ebGrid)
	newPi := make([]float64, ebGrid)
	for it := 0; it <= iters; it++ {
		last := it == iters
		clear(newPi)
		var sb, sv float64
		for j := range n {
			lo, hi := win[j][0], win[j][1]
			bj, vj, cj := pr.posterior(lo, lg[j*ebGrid+lo:j*ebGrid+hi], h[j], vh, kappa, post[:hi-lo])
			b[j], c[j] = bj, cj
			if !last {
				for k, p := range post[:hi-lo] {
					newPi[lo+k] += p
				}
				sb += bj
				sv += vj + bj*bj
			}
		}
		if last {
			break
		}
		// M step: π, m and τ² (τ² from E[b²] − m² over the items).
		for k := range newPi {
			pr.Pi[k] = newPi[k] / float64(n)
		}
		pr.M = sb / float64(n)
		pr.Tau2 = max(sv/float64(n)-pr.M*pr.M, 1e-6)
	}
	return b, c, pr
}

// posterior returns item j's posterior mean and variance of b and the
// posterior mean of c, given its count log-likelihoods lgj over the grid
// points lo, lo+1, ... and its sum h; post receives those points'
// posterior weights.
func (pr *ebPrior) posterior(lo int, lgj []float64, h, vh, kappa float64, post []float64) (mean, variance, count float64) {
	m, t2 := pr.M, pr.Tau2
	best := math.Inf(-1)
	grid, pi := pr.Grid[lo:lo+len(lgj)], pr.Pi[lo:lo+len(lgj)]
	for k, ck := range grid {
		if pi[k] <= 0 {
			post[k] = math.Inf(-1)
			continue
		}
		s2 := ck*ck*t2 + vh + kappa*t2*ck
		d := h - ck*m
		l := lgj[k] - 0.5*d*d/s2 - 0.5*math.Log(s2) + math.Log(pi[k])
		post[k] = l
		best = max(best, l)
	}
	var z, e1, e2, ec float64
	for k, ck := range grid {
		w := math.Exp(post[k] - best)
		post[k] = w
		z += w
		s2 := ck*ck*t2 + vh + kappa*t2*ck
		mk := m + ck*t2*(h-ck*m)/s2
		vk := t2 - ck*ck*t2*t2/s2
		e1 += w * mk
		e2 += w * (vk + mk*mk)
		ec += w * ck
	}
	for k := range post {
		post[k] /= z
	}
	mean = e1 / z
	return mean, max(e2/z-mean*mean, 0), ec / z
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
