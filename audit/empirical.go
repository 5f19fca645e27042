package audit

import (
	"math"
	"slices"
	"sort"
)

// The empirical auditor: it checks a claimed ε of a mechanism from its
// outputs alone, by comparing histograms of samples on two neighbouring
// inputs. The server-h attack runs it on the server's view; the tests run
// it on every mechanism of package dp.

// auditConfig tunes an empirical privacy audit of a mechanism. Zero fields
// take defaults.
type auditConfig struct {
	// Bins is the number of output bins (per condition bin), placed at
	// quantiles of the pooled samples so that every bin has mass. Default 50.
	Bins int
	// CondBins is the number of bins of the conditioning variable in
	// auditCond. Default 10.
	CondBins int
	// MinCount skips bins with fewer samples than this under either input
	// when estimating ε (they still count towards Delta). Default 1000.
	MinCount int
	// Alpha is the family-wise probability that sampling error alone makes
	// a correct mechanism fail. Default 1e-3.
	Alpha float64
}

func (c auditConfig) withDefaults() auditConfig {
	if c.Bins <= 0 {
		c.Bins = 50
	}
	if c.CondBins <= 0 {
		c.CondBins = 10
	}
	if c.MinCount <= 0 {
		c.MinCount = 1000
	}
	if !(c.Alpha > 0 && c.Alpha < 1) {
		c.Alpha = 1e-3
	}
	return c
}

// auditResult is the outcome of an empirical audit of a mechanism on two
// neighbouring inputs at a claimed ε.
type auditResult struct {
	// Epsilon is the largest |log(p̂0/p̂1)| over histogram bins with enough
	// mass: the point estimate of the mechanism's ε as seen by the bins.
	Epsilon float64
	// Lower is the largest |log(p̂0/p̂1)| − tol over those bins, where tol is
	// the bin's sampling-error tolerance z·sqrt(1/c0 + 1/c1) with a
	// Bonferroni z over bins: a lower confidence bound on the largest true
	// bin log-ratio. The audit passes when Lower ≤ the claimed ε.
	Lower float64
	// Delta is the empirical hockey-stick divergence at the claimed ε over
	// all bins, the larger of both orders: Σ max(0, p̂0 − e^ε·p̂1). Binning
	// can only lower the true value; sampling error adds a small positive
	// bias of order Σ sqrt(p/n).
	Delta float64
	// DeltaTol is the largest Delta that sampling error alone explains for
	// a mechanism that is exactly ε-DP: sqrt(B·(1+e^{2ε})/n) over the B
	// non-empty cells, about 2.5 times a Cauchy–Schwarz bound on the
	// expected positive bias of Delta.
	DeltaTol float64
	// Bins is the number of bins used for Epsilon and Lower.
	Bins int
	// Pass reports Lower ≤ the claimed ε and Delta ≤ DeltaTol: no bin with
	// enough mass shows a log-ratio above ε, and the mass that escapes the
	// ε bound (in the tails, say) is no more than noise. A pure ε-DP claim
	// fails on either.
	Pass bool
}

// auditSamples audits the claim that outputs x0 and x1 of a mechanism on
// two neighbouring inputs are ε-indistinguishable: it bins both samples at
// quantiles of the pooled sample (discrete outputs get one bin per value)
// and compares bin frequencies; see auditResult. The slices are not
// modified.
func auditSamples(x0, x1 []float64, eps float64, cfg auditConfig) auditResult {
	cfg = cfg.withDefaults()
	pooled := make([]float64, 0, len(x0)+len(x1))
	pooled = append(append(pooled, x0...), x1...)
	slices.Sort(pooled)
	edges := quantileEdges(pooled, cfg.Bins)
	h0 := make([]int, len(edges)+1)
	h1 := make([]int, len(edges)+1)
	for _, x := range x0 {
		h0[sort.SearchFloat64s(edges, x)]++
	}
	for _, x := range x1 {
		h1[sort.SearchFloat64s(edges, x)]++
	}
	return compareHist(h0, h1, len(x0), len(x1), eps, cfg)
}

// auditCond audits a mechanism whose observer also sees a conditioning
// variable with the same distribution under both inputs (the mixing h of
// MixtureShares, known to the server): sample i of input 0 is the pair
// (c0[i], x0[i]). It bins c at pooled quantiles into CondBins bins, then x
// at pooled quantiles within each condition bin, and compares the
// two-dimensional histograms.
func auditCond(x0, c0, x1, c1 []float64, eps float64, cfg auditConfig) auditResult {
	cfg = cfg.withDefaults()
	type pt struct{ c, x float64 }
	pooled := make([]pt, 0, len(x0)+len(x1))
	for i := range x0 {
		pooled = append(pooled, pt{c0[i], x0[i]})
	}
	for i := range x1 {
		pooled = append(pooled, pt{c1[i], x1[i]})
	}
	slices.SortFunc(pooled, func(a, b pt) int {
		switch {
		case a.c < b.c:
			return -1
		case a.c > b.c:
			return 1
		}
		return 0
	})
	cs := make([]float64, len(pooled))
	for i, p := range pooled {
		cs[i] = p.c
	}
	cedges := quantileEdges(cs, cfg.CondBins)
	// Value edges per condition bin, from the pooled values in that bin.
	groups := make([][]float64, len(cedges)+1)
	offset := make([]int, len(cedges)+2)
	start := 0
	for g := range groups {
		end := len(pooled)
		if g < len(cedges) {
			end = sort.Search(len(cs), func(i int) bool { return cs[i] > cedges[g] })
		}
		xs := make([]float64, 0, end-start)
		for _, p := range pooled[start:end] {
			xs = append(xs, p.x)
		}
		slices.Sort(xs)
		groups[g] = quantileEdges(xs, cfg.Bins)
		offset[g+1] = offset[g] + len(groups[g]) + 1
		start = end
	}
	cells := offset[len(groups)]
	h0 := make([]int, cells)
	h1 := make([]int, cells)
	cell := func(c, x float64) int {
		g := sort.SearchFloat64s(cedges, c)
		return offset[g] + sort.SearchFloat64s(groups[g], x)
	}
	for i := range x0 {
		h0[cell(c0[i], x0[i])]++
	}
	for i := range x1 {
		h1[cell(c1[i], x1[i])]++
	}
	return compareHist(h0, h1, len(x0), len(x1), eps, cfg)
}

// quantileEdges returns the distinct interior bin edges at the 1/bins, …,
// (bins−1)/bins quantiles of sorted; bin i is (edges[i−1], edges[i]].
func quantileEdges(sorted []float64, bins int) []float64 {
	var edges []float64
	n := len(sorted)
	if n == 0 {
		return nil
	}
	for q := 1; q < bins; q++ {
		e := sorted[q*n/bins]
		if len(edges) == 0 || e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	// Make sure the largest value is separated from an empty top bin.
	if last := sorted[n-1]; len(edges) == 0 || last > edges[len(edges)-1] {
		edges = append(edges, last)
	}
	return edges
}

func compareHist(h0, h1 []int, n0, n1 int, eps float64, cfg auditConfig) auditResult {
	var res auditResult
	used := 0
	for b := range h0 {
		if h0[b] >= cfg.MinCount && h1[b] >= cfg.MinCount {
			used++
		}
	}
	res.Bins = used
	z := normQuantile(1 - cfg.Alpha/(2*float64(max(used, 1))))
	f0, f1 := float64(n0), float64(n1)
	res.Lower = math.Inf(-1)
	var d01, d10 float64
	ee := math.Exp(eps)
	nonEmpty := 0
	for b := range h0 {
		if h0[b]+h1[b] > 0 {
			nonEmpty++
		}
		p0, p1 := float64(h0[b])/f0, float64(h1[b])/f1
		d01 += math.Max(0, p0-ee*p1)
		d10 += math.Max(0, p1-ee*p0)
		if h0[b] < cfg.MinCount || h1[b] < cfg.MinCount {
			continue
		}
		lr := math.Abs(math.Log(p0 / p1))
		tol := z * math.Sqrt(1/float64(h0[b])+1/float64(h1[b]))
		res.Epsilon = math.Max(res.Epsilon, lr)
		res.Lower = math.Max(res.Lower, lr-tol)
	}
	res.Delta = math.Max(d01, d10)
	res.DeltaTol = math.Sqrt(float64(nonEmpty) * (1 + ee*ee) / math.Min(f0, f1))
	res.Pass = res.Lower <= eps && res.Delta <= res.DeltaTol
	return res
}

// normQuantile returns Φ⁻¹(p) for p in (0, 1).
func normQuantile(p float64) float64 { return -math.Sqrt2 * math.Erfcinv(2*p) }
