package audit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/rng"
)

const auditN = 1000000

// mech builds the outputs of a mechanism on two neighbouring inputs at a
// noise multiplier: 1 is the calibrated mechanism, 0.85 the under-noised
// copy.
type mech func(mult float64) (m0, m1 func(*rand.Rand) float64)

func TestAuditMechanisms(t *testing.T) {
	const eps, sens = 1.0, 1.0
	b := sens / eps
	rr2, err := dp.SolveTwoStageRR(2*eps, eps, 1, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		eps   float64
		n     int
		build mech
	}{
		{"laplace", eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			return func(r *rand.Rand) float64 { return dp.SampleLaplace(r, m*b) },
				func(r *rand.Rand) float64 { return sens + dp.SampleLaplace(r, m*b) }
		}},
		{"gamma shares n=5", eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			sum := func(r *rand.Rand) float64 {
				var s float64
				for range 5 {
					s += dp.SampleGammaShare(r, m*b, 5)
				}
				return s
			}
			return sum, func(r *rand.Rand) float64 { return sens + sum(r) }
		}},
		{"mixture shares n=5, h hidden", eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			sum := func(r *rand.Rand) float64 {
				h := dp.SampleMixing(r)
				var s float64
				for range 5 {
					s += dp.SampleMixShare(r, m*b, h, 5)
				}
				return s
			}
			return sum, func(r *rand.Rand) float64 { return sens + sum(r) }
		}},
		{"L2 laplace K=3", eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			// The audit sees T = ‖y‖ − ‖y − d‖, on whose level sets the
			// privacy loss is constant (ε·T/Δ): post-processing, and tight.
			stat := func(r *rand.Rand, shift float64) float64 {
				var v [3]float64
				dp.FillL2Laplace(r, m*b, v[:])
				v[0] += shift
				w := v
				w[0] -= sens
				return math.Sqrt(dot(v[:], v[:])) - math.Sqrt(dot(w[:], w[:]))
			}
			return func(r *rand.Rand) float64 { return stat(r, 0) }, func(r *rand.Rand) float64 { return stat(r, sens) }
		}},
		{"binary RR", eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			e := eps / m
			return func(r *rand.Rand) float64 { return b2f(dp.RandomizedResponse(r, false, e)) },
				func(r *rand.Rand) float64 { return b2f(dp.RandomizedResponse(r, true, e)) }
		}},
		{"two-stage RR: PRR, h=1", 2 * eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			// Neighbours: the one rated item is a or b; output (B'_a, B'_b).
			f, _ := dp.SolvePRR(2*eps/m, 1)
			p := dp.TwoStageRR{F: f}
			src, item := prrItems()
			out := func(_ *rand.Rand, aRated bool) float64 {
				return 2*b2f(p.PRR(src, item(), aRated)) + b2f(p.PRR(src, item(), !aRated))
			}
			return func(r *rand.Rand) float64 { return out(r, true) }, func(r *rand.Rand) float64 { return out(r, false) }
		}},
		{"two-stage RR: IRR, h=1", eps, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			// One iteration's send bits (S_a, S_b); the per-iteration
			// guarantee of Thm 2 is over a fresh PRR (the paper's p*, q*):
			// each sample asks the keyed source about a new item.
			p := rr2
			if m != 1 {
				var err error
				if p, err = dp.SolveTwoStageRR(2*eps/m, eps/m, 1, 40, 3); err != nil {
					panic(err)
				}
			}
			src, item := prrItems()
			out := func(r *rand.Rand, aRated bool) float64 {
				sa := p.IRR(r, p.PRR(src, item(), aRated))
				sb := p.IRR(r, p.PRR(src, item(), !aRated))
				return 2*b2f(sa) + b2f(sb)
			}
			return func(r *rand.Rand) float64 { return out(r, true) }, func(r *rand.Rand) float64 { return out(r, false) }
		}},
		{"personalized sampling ε=0.5, t=1", 0.5, auditN, func(m float64) (func(*rand.Rand) float64, func(*rand.Rand) float64) {
			// A t-DP count of the sampled ratings; the neighbour lacks
			// the rating of budget 0.5.
			const th = 1.0
			eij := []float64{0.5 / m}
			return func(r *rand.Rand) float64 {
					return float64(len(dp.SampleKeep(r, eij, th, nil))) + dp.SampleLaplace(r, 1/th)
				}, func(r *rand.Rand) float64 {
					return dp.SampleLaplace(r, 1/th)
				}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, mult := range []float64{1, 0.85} {
				m0, m1 := tc.build(mult)
				res := auditDraw(rng.New(77, uint64(i), uint64(mult*100)), m0, m1, tc.n, tc.eps, auditConfig{})
				t.Logf("×%.2f: ε̂ = %.3f, lower bound %.3f (claimed %.3f, %d bins), δ̂ = %.4f",
					mult, res.Epsilon, res.Lower, tc.eps, res.Bins, res.Delta)
				if want := mult == 1; res.Pass != want {
					t.Errorf("×%.2f: pass = %v, want %v", mult, res.Pass, want)
				}
			}
		})
	}
}

// auditDraw draws n outputs of a mechanism on each of two neighbouring
// inputs, m0 and m1, from r, and audits them with auditSamples.
func auditDraw(r *rand.Rand, m0, m1 func(*rand.Rand) float64, n int, eps float64, cfg auditConfig) auditResult {
	x0 := make([]float64, n)
	x1 := make([]float64, n)
	for i := range n {
		x0[i] = m0(r)
		x1[i] = m1(r)
	}
	return auditSamples(x0, x1, eps, cfg)
}

// prrItems returns a keyed PRR source and a counter of fresh items: each
// item's permanent uniform is independent of every other's.
func prrItems() (*dp.PRRSource, func() int32) {
	src := dp.NewPRRSource([]byte("privrec audit test key"))
	var next int32
	return src, func() int32 { next++; return next }
}

// avgParts is Algorithm 1 as dp.DPAverage computes it, stopping before the
// division: the noisy centred sum (Laplace((hi−lo)/ε), half the budget)
// and the noisy count (Laplace(2/ε), the other half).
func avgParts(r *rand.Rand, sum float64, n int, lo, hi, eps float64) (s, c float64) {
	mid := (lo + hi) / 2
	s = sum - float64(n)*mid + dp.SampleLaplace(r, (hi-lo)/eps)
	c = float64(n) + dp.SampleLaplace(r, 2/eps)
	return s, c
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestAuditDPAverage audits Algorithm 1's released pair (noisy sum, noisy
// count), the calibration dp.DPAverage uses, on datasets of 100 and 101
// ratings, the extra one at the top of the range, with a two-dimensional
// histogram.
func TestAuditDPAverage(t *testing.T) {
	t.Parallel()
	const eps, lo, hi = 1.0, 1.0, 5.0
	for _, mult := range []float64{1, 0.85} {
		r := rng.New(91, uint64(mult*100))
		s0, c0 := make([]float64, auditN), make([]float64, auditN)
		s1, c1 := make([]float64, auditN), make([]float64, auditN)
		for i := range auditN {
			s0[i], c0[i] = avgParts(r, 300, 100, lo, hi, eps/mult)
			s1[i], c1[i] = avgParts(r, 305, 101, lo, hi, eps/mult)
		}
		res := auditCond(s0, c0, s1, c1, eps, auditConfig{Bins: 10, CondBins: 5})
		t.Logf("×%.2f: ε̂ = %.3f, lower bound %.3f, %d bins", mult, res.Epsilon, res.Lower, res.Bins)
		if want := mult == 1; res.Pass != want {
			t.Errorf("×%.2f: pass = %v, want %v", mult, res.Pass, want)
		}
	}
}

// TestAuditServerView shows the leak of MixtureShares against a server that
// knows h, and that GammaShares has none: at ε = 1 with b = Δ/ε the
// server's δ for the mixture is dp.MixtureServerDelta ≈ 0.19.
func TestAuditServerView(t *testing.T) {
	t.Parallel()
	const eps, sens, n = 1.0, 1.0, 5
	b := sens / eps
	r := rng.New(123)
	x0, x1 := make([]float64, auditN), make([]float64, auditN)
	h0, h1 := make([]float64, auditN), make([]float64, auditN)
	mix := func(h float64) float64 {
		var s float64
		for range n {
			s += dp.SampleMixShare(r, b, h, n)
		}
		return s
	}
	for i := range auditN {
		h0[i], h1[i] = dp.SampleMixing(r), dp.SampleMixing(r)
		x0[i], x1[i] = mix(h0[i]), sens+mix(h1[i])
	}
	a := auditCond(x0, h0, x1, h1, eps, auditConfig{})
	want := dp.MixtureServerDelta(eps, sens, b)
	t.Logf("mixture, server knows h: ε̂ = %.3f, lower %.3f, δ̂ = %.4f (exact %.4f)", a.Epsilon, a.Lower, a.Delta, want)
	if a.Pass {
		t.Error("mixture shares pass the server's-view audit; the leak is not visible")
	}
	if a.Delta < 0.1 || a.Delta > want+0.03 {
		t.Errorf("mixture δ̂ = %.4f, want clearly above 0 and at most ≈ %.4f", a.Delta, want)
	}
	for i := range auditN {
		var s, u float64
		for range n {
			s += dp.SampleGammaShare(r, b, n)
			u += dp.SampleGammaShare(r, b, n)
		}
		x0[i], x1[i] = s, sens+u
	}
	g := auditSamples(x0, x1, eps, auditConfig{})
	t.Logf("gamma shares, server's view: ε̂ = %.3f, lower %.3f, δ̂ = %.4f", g.Epsilon, g.Lower, g.Delta)
	if !g.Pass {
		t.Error("gamma shares fail the server's-view audit")
	}
	if g.Delta > 0.02 {
		t.Errorf("gamma δ̂ = %.4f, want ≈ 0", g.Delta)
	}
}

func TestAuditSamplesDiscreteAndEmpty(t *testing.T) {
	// Identical samples: ε̂ = 0, passes any ε.
	x := []float64{0, 1, 1, 0, 2, 2, 2, 1}
	res := auditSamples(x, x, 0.1, auditConfig{MinCount: 1})
	if res.Epsilon != 0 || !res.Pass || res.Bins != 3 {
		t.Errorf("identical samples: %+v", res)
	}
	// Disjoint supports: δ̂ = 1.
	res = auditSamples([]float64{0, 0, 0, 0}, []float64{1, 1, 1, 1}, 1, auditConfig{MinCount: 1})
	if math.Abs(res.Delta-1) > 1e-12 {
		t.Errorf("disjoint: δ̂ = %v, want 1", res.Delta)
	}
}
