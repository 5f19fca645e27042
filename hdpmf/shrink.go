package hdpmf

import (
	"math"
	"slices"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/model"
)

// The published item table of HDPMF.
//
// HDPMF trains v_j on ratings stretched by W_ij = β_i·γ_j and predicts
// u_i·v_j/(β_i·γ_j) (the paper's rescaling). Each round adds to item j's
// gradient sum noise of a fixed variance per coordinate, which the
// count-preconditioned step η_t/(n_j + n0) carries into v_j, so after T
// rounds v_j = γ_j·a_j + e_j with Var(e_j) per coordinate at most
//
//	σ_j² = σ²·Σ_t (η_t/(n_j + n0))²  (over the rounds that stepped v_j),
//
// σ² the variance of the round's noise per coordinate (2b² for Laplace
// scale b, 2μ/64² for the integer path's Skellam(μ)): the noise is the
// same for every item while the signal scales with γ_j, so dividing by
// γ_j = 0.1 multiplied an item's noise tenfold and rare, low-weight items
// topped every list with scores far above the scale.
//
// After the last training round the server publishes instead (final
// broadcast and Factors) the posterior mean of the unstretched factors
// a_j = v_j/γ_j under a_j ~ N(m, diag(τ²)) across items, with m and τ²
// fitted to the released V alone (empirical Bayes by moments, weighted as
// Morris's estimator for unequal known variances):
//
//	ṽ_jd = m_d + τ_d²/(τ_d² + σ_j²/γ_j²)·(v_jd/γ_j − m_d),
//
// and m for an item nobody rated. It reads only released quantities (V,
// the setup round's counts n_j, the public γ_j, the public schedule and
// noise calibration): post-processing, so the privacy claim is unchanged.
// The devices then fold in against ṽ exactly as privrec recommend folds a
// user into a published model (model.FoldIn with ridge FoldReg, on the
// user's unstretched ratings), so a device's list and recommend's list
// for the same ratings are the same list.

// FoldReg is the ridge with which an HDPMF device folds its user in
// against the published table in the final round: privrec recommend's
// default --reg, so that recommend --ratings reproduces the device's list.
const FoldReg = 1.0

// posteriorIters is the number of fixed-point iterations of the prior's
// fit.
const posteriorIters = 50

// shrinks reports whether the server publishes the posterior-mean table:
// HDPMF and HDPMF-R, whose noise the server knows from the public
// configuration (DPMF's and PDPMF's is calibrated on the users' data),
// once some training round stepped V (a run whose every round was refused
// publishes V as the server built it: nothing was learned).
func (s *server) shrinks() bool {
	return !s.plain && s.cfg.NoiseVar > 0 && slices.ContainsFunc(s.etaSq, func(x float64) bool { return x > 0 })
}

// table returns the item table the server publishes once the run is
// done: the posterior-mean factors for HDPMF (unstretched by γ) and
// HDPMF-R (left stretched: the ablation without rescaling), else V.
func (s *server) table() []float32 {
	if !s.shrinks() {
		return s.v
	}
	if s.tab == nil {
		g := s.cfg.ItemWeight
		if g == nil {
			g = make([]float64, s.numItems)
			for j := range g {
				g[j] = 1
			}
		}
		s.tab = posteriorTable(s.v, s.counts, g, s.k, s.noiseVar())
	}
	return s.tab
}

// noiseVar returns σ_j² of each item: the noise variance per coordinate
// that the steps of the rounds that stepped v_j carried into it.
func (s *server) noiseVar() []float64 {
	out := make([]float64, s.numItems)
	for j, n := range s.counts {
		p := float64(n) + s.cfg.Pseudo
		out[j] = s.cfg.NoiseVar * s.etaSq[j] / (p * p)
	}
	return out
}

// roundNoiseVar returns the variance per coordinate of an item's summed
// noise in one round of cfg on a scale of range sens: 2b² for the float
// paths' Laplace scale b, the Skellam variance in rating units on the
// integer path (mask, nil on the float paths).
func roundNoiseVar(cfg Config, sens float64, mask *masking) float64 {
	if mask != nil {
		return 2 * mask.mu / (mask.q.Scale * mask.q.Scale)
	}
	b := dp.HDPMFNoiseScale(cfg.Dim, sens, cfg.Eps)
	return 2 * b * b
}

// posteriorTable returns the posterior means ṽ (numItems×k) of the
// unstretched factors from the released V, the counts, the item weights
// γ and the items' noise variances (see above).
func posteriorTable(v []float32, counts []int32, gamma []float64, k int, nv []float64) []float32 {
	ni := len(counts)
	out := make([]float32, ni*k)
	// z_j = v_j/γ_j with noise variance s_j = σ_j²/γ_j², rated items only.
	var idx []int
	s2 := make([]float64, ni)
	for j := range ni {
		if counts[j] > 0 && gamma[j] > 0 {
			idx = append(idx, j)
			s2[j] = nv[j] / (gamma[j] * gamma[j])
		}
	}
	for d := range k {
		z := func(j int) float64 { return float64(v[j*k+d]) / gamma[j] }
		// Start from the plain mean and variance, then iterate the
		// weighted estimates of m and τ².
		var m, t2 float64
		for _, j := range idx {
			m += z(j)
		}
		m /= float64(max(len(idx), 1))
		for _, j := range idx {
			e := z(j) - m
			t2 += e*e - s2[j]
		}
		t2 = max(t2/float64(max(len(idx), 1)), 1e-6)
		for range posteriorIters {
			var sw, swz, sw2, swe float64
			for _, j := range idx {
				w := 1 / (t2 + s2[j])
				sw += w
				swz += w * z(j)
			}
			if sw == 0 {
				break
			}
			m = swz / sw
			for _, j := range idx {
				w := 1 / (t2 + s2[j])
				e := z(j) - m
				sw2 += w * w
				swe += w * w * (e*e - s2[j])
			}
			t2 = max(swe/sw2, 1e-6)
		}
		for j := range ni {
			x := m
			if counts[j] > 0 && gamma[j] > 0 {
				x = m + t2/(t2+s2[j])*(z(j)-m)
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				x = 0
			}
			out[j*k+d] = float32(x)
		}
	}
	return out
}

// foldIn sets the device's user vector and offset from its unstretched
// ratings against the published table v (numItems×k), as
// model.FoldIn folds a user into a published model with ridge FoldReg.
// It reports false when the fold-in failed: the device then predicts its
// mean rating (u = 0, the offset its mean).
func (c *client) foldIn(v []float32) bool {
	if len(c.items) == 0 {
		return false
	}
	pub := &model.Model{Dim: c.sh.k, NumItems: c.sh.m, V: v}
	f, err := pub.FoldIn("", c.items, c.raw, FoldReg)
	if err != nil {
		// The user's mean rating alone.
		var m float64
		for _, x := range c.raw {
			m += float64(x)
		}
		clear(c.u)
		c.off = float32(m / float64(len(c.raw)))
		return false
	}
	copy(c.u, f.U)
	c.off = f.Offset[0]
	return true
}
