package dpals

import (
	"math"
	"math/rand/v2"
	"testing"
)

// shrinkCase returns ni items' released pooled counts and sums with
// count noise σ_g and sum noise σ_h: true counts heavy-tailed (most items
// rare), true biases b_j = 0.3·log(1 + c_j)/3 − 0.2 + N(0, 0.3²).
func shrinkCase(ni int, sg, sh float64, seed uint64) (g, h, c, b []float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	g, h, c, b = make([]float64, ni), make([]float64, ni), make([]float64, ni), make([]float64, ni)
	for j := range ni {
		c[j] = math.Exp(7*r.Float64()) - 1 // 0 .. 1100, log-uniform
		b[j] = 0.1*math.Log1p(c[j]) - 0.2 + 0.3*r.NormFloat64()
		g[j] = c[j] + sg*r.NormFloat64()
		h[j] = c[j]*b[j] + sh*r.NormFloat64()
	}
	return g, h, c, b
}

// TestShrinkBiases: on releases with known noise, the posterior means
// are closer to the true biases than the ridge ratio H/(G + λ) the bias
// rounds used before, rare items end near the prior and not above the
// well-measured good items, the fitted prior recovers the data's, and
// the posterior counts are closer to the
// true counts than the noisy ones.
func TestShrinkBiases(t *testing.T) {
	const ni, sg, sh = 3000, 85.0, 38.0
	for _, seed := range []uint64{1, 2, 3} {
		g, h, c, b := shrinkCase(ni, sg, sh, seed)
		pb, pc, pr := shrinkBiases(g, h, sg*sg, sh*sh, 1, nil)
		lam := 1 + 1.5*sg
		var ePost, eRidge, cPost, cRaw float64
		var topRare, ridgeRare int
		ridge := make([]float64, ni)
		for j := range ni {
			ridge[j] = h[j] / (max(g[j], 0) + lam)
			r := h[j] / (max(g[j], 0) + lam)
			ePost += (pb[j] - b[j]) * (pb[j] - b[j])
			eRidge += (r - b[j]) * (r - b[j])
			cPost += (pc[j] - c[j]) * (pc[j] - c[j])
			cRaw += (g[j] - c[j]) * (g[j] - c[j])
		}
		// The 30 largest posterior biases: how many rest on a count
		// below the count noise's σ?
		for _, j := range topK(pb, 30) {
			if c[j] < sg {
				topRare++
			}
		}
		for _, j := range topK(ridge, 30) {
			if c[j] < sg {
				ridgeRare++
			}
		}
		t.Logf("seed %d: squared error posterior %.4g, ridge %.4g; counts %.4g against %.4g; rare in top 30: %d (ridge %d); prior m %.3f slope %.3f τ %.3f",
			seed, ePost, eRidge, cPost, cRaw, topRare, ridgeRare, pr.M, pr.Slope, math.Sqrt(pr.Tau2))
		if !(ePost < 0.8*eRidge) {
			t.Errorf("seed %d: posterior squared error %.4g, ridge's %.4g: want below 0.8 of it", seed, ePost, eRidge)
		}
		if math.Abs(pr.Slope-0.1) > 0.05 || math.Abs(math.Sqrt(pr.Tau2)-0.3) > 0.1 {
			t.Errorf("seed %d: fitted prior slope %.3f, τ %.3f; the data's are 0.1 and 0.3", seed, pr.Slope, math.Sqrt(pr.Tau2))
		}
		if !(cPost < cRaw) {
			t.Errorf("seed %d: posterior counts' squared error %.4g, the noisy counts' %.4g", seed, cPost, cRaw)
		}
		if topRare > 3 || topRare >= ridgeRare {
			t.Errorf("seed %d: %d of the 30 largest posterior biases rest on counts below σ_g (ridge: %d)", seed, topRare, ridgeRare)
		}
	}
}

// topK returns the indices of the k largest values of x.
func topK(x []float64, k int) []int {
	idx := make([]int, 0, k)
	for range k {
		best := -1
		for j, v := range x {
			taken := false
			for _, q := range idx {
				if q == j {
					taken = true
					break
				}
			}
			if !taken && (best < 0 || v > x[best]) {
				best = j
			}
		}
		idx = append(idx, best)
	}
	return idx
}

// BenchmarkShrinkBiases: one cold fit over ML-1M's catalog size.
func BenchmarkShrinkBiases(b *testing.B) {
	g, h, _, _ := shrinkCase(3899, 85, 38, 1)
	for b.Loop() {
		shrinkBiases(g, h, 85*85, 38*38, 1, nil)
	}
}

// TestShrinkBiasesFinite: a small catalog with large gaps between the
// counts (grid points no item weighs) still gets finite posteriors.
func TestShrinkBiasesFinite(t *testing.T) {
	g := []float64{0, 0.5, 1, 3000, 3001, -40, 12000}
	h := []float64{0, 2, -1, 900, 950, 5, 2400}
	b, c, pr := shrinkBiases(g, h, 4, 9, 1, nil)
	b2, c2, _ := shrinkBiases(g, h, 4, 9, 1, pr) // warm-started
	for j := range g {
		for _, x := range []float64{b[j], c[j], b2[j], c2[j]} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("item %d: b %v, c %v; warm b %v, c %v", j, b[j], c[j], b2[j], c2[j])
			}
		}
	}
}
