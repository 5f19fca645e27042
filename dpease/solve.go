package dpease

import (
	"fmt"
	"math"
)

// Blend returns the personal weight of the last solve (zero before the
// Gram round or with Shrink off).
func (s *Server) Blend() Blend { return s.blend }

// Personal reports whether the item factors v (NumItems×(M+1)) carry
// any item-item weight; false means every list is the popularity
// coordinate's, DP popularity.
func Personal(v []float32, dim int) bool {
	for j := 0; j+dim <= len(v); j += dim {
		for _, x := range v[j : j+dim-1] {
			if x != 0 {
				return true
			}
		}
	}
	return false
}

// Blend is what the released Gram says about how much personalisation it
// can carry (PersonalWeight).
type Blend struct {
	// EntrySNR is the signal-to-noise ratio of one off-diagonal Gram
	// entry: (Var − σ²)/σ², Var the released entries' variance and σ²
	// the known noise variance (0 when the excess is not detectable).
	EntrySNR float64
	// History is the typical number of top items in a user's history,
	// 1 + 2·(off-diagonal sum)/(diagonal sum) of the release.
	History float64
	// Weight is the posterior-mean (Wiener) weight of a history-sum
	// score, History·EntrySNR/(History·EntrySNR + 1): the share of the
	// personal score kept; 0 means the list is DP popularity.
	Weight float64
}

// PersonalWeight reads the released m×m Gram triangle g and its known
// per-entry noise σ = sigma and returns the weight of the personal part
// of every score. A history of h items sums h weights whose signals add
// coherently (h·s) while their noise adds in quadrature (√h·σ_B), so the
// score's signal-to-noise ratio is h·SNR for an entry SNR; the Wiener
// (posterior-mean) weight of the score is h·SNR/(h·SNR + 1). The entry
// SNR is the off-diagonal entries' variance in excess of σ² over σ²
// (detectable only above ShrinkDetect standard errors of the noise's
// sample variance), and h the release's typical history. Post-processing
// of the release.
func PersonalWeight(g []float64, m int, sigma float64) Blend {
	n := m * (m - 1) / 2
	var bl Blend
	if n < 2 || !(sigma > 0) {
		return bl
	}
	var off, diag float64
	for i := range m {
		diag += g[pairIndex(i, i, m)]
		for j := i + 1; j < m; j++ {
			off += g[pairIndex(i, j, m)]
		}
	}
	mean := off / float64(n)
	var ss float64
	for i := range m {
		for j := i + 1; j < m; j++ {
			d := g[pairIndex(i, j, m)] - mean
			ss += d * d
		}
	}
	v, s2 := ss/float64(n-1), sigma*sigma
	if excess := v - s2; excess > ShrinkDetect*s2*math.Sqrt(2/float64(n)) {
		bl.EntrySNR = excess / s2
	}
	bl.History = 1
	if diag > 0 && off > 0 {
		bl.History = 1 + 2*off/diag
	}
	x := bl.History * bl.EntrySNR
	bl.Weight = x / (x + 1)
	return bl
}

// ShrinkDetect is the number of standard errors of the noise's sample
// variance by which the released off-diagonal variance must exceed the
// noise variance for PersonalWeight to find a signal.
const ShrinkDetect = 3

// chooseM returns the number of items in the Gram release from the
// released noisy counts c (post-processing): cfg's M, or with the
// validation hook snr > 0 the number of items whose noisy count clears
// snr·σ_c, between 1 and cfg's M.
func (s *Server) chooseM(c []float64) int {
	m := min(s.cfg.TopItems, s.n)
	if !(s.snr > 0) {
		return m
	}
	return max(1, min(m, signalItems(c, s.snr*s.countsSigma())))
}

// PopDiag reports whether the solve takes the top items' popularity from
// the Gram's diagonal: after the counts release, when fewer than M items'
// noisy counts clear PopDiagSNR·σ_c (a function of the released counts
// alone).
func (s *Server) PopDiag() bool {
	k := s.cfg.PopDiagSNR
	return !s.popMode && k > 0 && s.st.Counts != nil && (math.IsInf(k, 1) || signalItems(s.st.Counts, k*s.countsSigma()) < s.m)
}

// signalItems returns the number of entries of c at or above thr.
func signalItems(c []float64, thr float64) int {
	k := 0
	for _, x := range c {
		if x >= thr {
			k++
		}
	}
	return k
}

// Lambda returns the ridge of the EASE solve.
func (s *Server) Lambda() float64 {
	return s.cfg.Lambda + s.cfg.LambdaNoise*s.gramPoolSigma()*math.Sqrt(float64(s.m))
}

// gramNoiseSigma returns the standard deviation of the noise in each
// entry of the released Gram: σ_g on the ideal path; on the integer path
// the decoded Skellam noise's, scaled by the share of the noise that
// arrived. A function of the config, the catalog size and the arrival
// counts, never of the data.
func (s *Server) gramNoiseSigma() float64 {
	if s.mask == nil {
		return s.gramPoolSigma()
	}
	// Over cohorts the pooled Gram carries the noise that arrived in
	// each Gram round so far.
	t := s.cfg.cohortRounds()
	var f float64
	for rel := t; rel < t+max(1, s.st.GramRounds); rel++ {
		if s.st.ArrS[rel] > 0 {
			f += math.Min(1, float64(s.st.ArrA[rel])/float64(s.st.ArrS[rel]))
		} else {
			f++
		}
	}
	return s.mask.Steps[1].NoiseSigma(0) * math.Sqrt(f)
}

// solve turns the noisy Gram triangle g into item factors (post-processing).
func (s *Server) solve(g []float64) ([]float32, error) {
	m := s.m
	a := make([]float64, m*m)
	lam := s.Lambda()
	for i := range m {
		for j := i; j < m; j++ {
			x := g[pairIndex(i, j, m)]
			a[i*m+j], a[j*m+i] = x, x
		}
		a[i*m+i] += lam
	}
	p, ok := spdInverse(a, m)
	if !ok {
		return nil, fmt.Errorf("dpease: the noisy Gram plus λ = %.4g is not positive definite: raise lambda or lambda-noise", lam)
	}
	dim := m + 1
	v := make([]float32, s.n*dim)
	maxc := 0.0
	for _, c := range s.st.Counts {
		maxc = math.Max(maxc, c)
	}
	for j := range s.n {
		if maxc > 0 {
			v[j*dim+m] = float32(s.cfg.PopWeight * s.st.Counts[j] / maxc)
		}
	}
	if s.PopDiag() {
		// The top items' coordinate from the Gram's diagonal, in
		// PopWeight·[1, 2], above every other item's (at most PopWeight).
		maxd := 0.0
		for sj := range m {
			maxd = math.Max(maxd, g[pairIndex(sj, sj, m)])
		}
		for sj, j := range s.st.Top {
			x := 0.0
			if maxd > 0 {
				x = math.Max(g[pairIndex(sj, sj, m)], 0) / maxd
			}
			v[int(j)*dim+m] = float32(s.cfg.PopWeight * (1 + x))
		}
	}
	// B[k][j] = −P[k][j] / P[j][j] off the diagonal, 0 on it.
	b := make([]float64, m*m)
	for j := range m {
		pjj := p[j*m+j]
		for k := range m {
			if k != j {
				b[k*m+j] = -p[k*m+j] / pjj
			}
		}
	}
	if s.cfg.Shrink {
		s.blend = PersonalWeight(g, m, s.gramNoiseSigma())
		if s.PopularityMode() {
			s.blend.Weight = 0
		}
		for k := range b {
			b[k] *= s.blend.Weight
		}
	}
	for sj, j := range s.st.Top {
		for k := range m {
			if k != sj {
				v[int(j)*dim+k] = float32(b[k*m+sj])
			}
		}
	}
	return v, nil
}

// spdInverse inverts the symmetric positive definite n×n matrix a (full,
// row-major) in place by Cholesky; false when a is not positive definite.
func spdInverse(a []float64, n int) ([]float64, bool) {
	// Cholesky a = L Lᵀ, L in the lower triangle.
	for j := range n {
		rj := a[j*n : j*n+j]
		s := a[j*n+j]
		for _, x := range rj {
			s -= x * x
		}
		if !(s > 0) {
			return nil, false
		}
		l := math.Sqrt(s)
		a[j*n+j] = l
		for i := j + 1; i < n; i++ {
			ri := a[i*n : i*n+j]
			t := a[i*n+j]
			for k, x := range ri {
				t -= x * rj[k]
			}
			a[i*n+j] = t / l
		}
	}
	// W = L⁻¹ (lower triangular), row by row.
	w := make([]float64, n*n)
	for i := range n {
		w[i*n+i] = 1 / a[i*n+i]
		for j := range i {
			var t float64
			for k := j; k < i; k++ {
				t += a[i*n+k] * w[k*n+j]
			}
			w[i*n+j] = -t / a[i*n+i]
		}
	}
	// a⁻¹ = Wᵀ W: (i, j) = Σ_k W[k][i] W[k][j], k ≥ max(i, j).
	inv := make([]float64, n*n)
	for k := range n {
		wk := w[k*n : k*n+k+1]
		for i, x := range wk {
			if x == 0 {
				continue
			}
			row := inv[i*n : i*n+k+1]
			for j, y := range wk {
				row[j] += x * y
			}
		}
	}
	return inv, true
}
