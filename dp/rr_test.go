package dp

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/rng"
)

// binomialOK reports whether k successes of n fit probability p within z
// standard errors.
func binomialOK(k, n int, p, z float64) bool {
	se := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(k)-float64(n)*p) <= z*se
}

func TestRandomizedResponseRate(t *testing.T) {
	// n is large enough that the 0.85 × scale variant is ruled out even at
	// ε = 0.1, where the two keep rates differ by 0.0044.
	const n = 2_000_000
	for i, eps := range []float64{0.1, 1, 3} {
		r := rng.New(21, uint64(i))
		keep := 0
		for range n {
			if RandomizedResponse(r, true, eps) {
				keep++
			}
		}
		p := math.Exp(eps) / (1 + math.Exp(eps))
		if !binomialOK(keep, n, p, 4.5) {
			t.Errorf("ε = %v: kept %d of %d, want p = %.4f", eps, keep, n, p)
		}
		if binomialOK(keep, n, RRKeepProb(eps/0.85), 4.5) {
			t.Errorf("ε = %v: rate also fits the under-noised p; test has no power", eps)
		}
	}
}

func TestSolveTwoStageRR(t *testing.T) {
	tests := []struct {
		epsI      float64
		h, nItems int
		z         float64
	}{
		{1, 1, 100, 5}, {0.25, 20, 3700, 165}, {4, 20, 3700, 165}, {1, 50, 1682, 106},
	}
	for _, tc := range tests {
		rr, err := SolveTwoStageRR(2*tc.epsI, tc.epsI, tc.h, tc.nItems, tc.z)
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		ps, qs := rr.SendProbs()
		if got := rr.IRREpsilon(tc.h); math.Abs(got-tc.epsI) > 1e-9 {
			t.Errorf("%+v: ε_I = %v", tc, got)
		}
		if got := rr.PRREpsilon(tc.h); math.Abs(got-2*tc.epsI) > 1e-9 {
			t.Errorf("%+v: ε_P = %v", tc, got)
		}
		if z := float64(tc.h)*qs + float64(tc.nItems-tc.h)*ps; math.Abs(z-tc.z) > 1e-9 {
			t.Errorf("%+v: expected uploads %v", tc, z)
		}
		if rr.P < 0 || rr.P > 1 || rr.Q < 0 || rr.Q > 1 || rr.F <= 0 || rr.F >= 1 {
			t.Errorf("%+v: parameters out of range %+v", tc, rr)
		}
	}
	bad := []struct {
		name string
		f    func() error
	}{
		{"z too small for f", func() error { _, err := SolveTwoStageRR(0.1, 1, 1, 100, 0.5); return err }},
		{"z ≥ items", func() error { _, err := SolveTwoStageRR(2, 1, 1, 100, 100); return err }},
		{"h = 0", func() error { _, err := SolveTwoStageRR(2, 1, 0, 100, 5); return err }},
		{"eps 0", func() error { _, err := SolveTwoStageRR(2, 0, 1, 100, 5); return err }},
	}
	for _, b := range bad {
		if err := b.f(); !errors.Is(err, ErrParam) {
			t.Errorf("%s: error %v, want ErrParam", b.name, err)
		}
	}
}

func TestPRRDeterministicAndRates(t *testing.T) {
	rr := TwoStageRR{F: 0.4, P: 0.1, Q: 0.6}
	secret := []byte("0123456789abcdef-user-42")
	a, b := NewPRRSource(secret), NewPRRSource(secret) // b: "after a restart"
	other := NewPRRSource([]byte("another user's secret......"))
	const n = 100000
	ones, same := 0, 0
	for j := range int32(n) {
		x := rr.PRR(a, j, false)
		if x != rr.PRR(b, j, false) {
			t.Fatalf("item %d: PRR differs after restart", j)
		}
		if x {
			ones++
		}
		if x == rr.PRR(other, j, false) {
			same++
		}
	}
	if !binomialOK(ones, n, rr.F/2, 4.5) {
		t.Errorf("unrated items reported rated: %d of %d, want p = %v", ones, n, rr.F/2)
	}
	// Two users agree when neither flips to 1 (both 0) or both flip to 1.
	pAgree := (1-rr.F/2)*(1-rr.F/2) + (rr.F/2)*(rr.F/2)
	if !binomialOK(same, n, pAgree, 4.5) {
		t.Errorf("two secrets agree on %d of %d, want p = %v", same, n, pAgree)
	}
	zeros := 0
	for j := range int32(n) {
		if !rr.PRR(a, j, true) {
			zeros++
		}
	}
	if !binomialOK(zeros, n, rr.F/2, 4.5) {
		t.Errorf("rated items reported unrated: %d of %d", zeros, n)
	}
	// IRR send rates.
	r := rng.New(4)
	s1, s0 := 0, 0
	for range n {
		if rr.IRR(r, true) {
			s1++
		}
		if rr.IRR(r, false) {
			s0++
		}
	}
	if !binomialOK(s1, n, rr.Q, 4.5) || !binomialOK(s0, n, rr.P, 4.5) {
		t.Errorf("IRR rates %d, %d of %d, want q = %v, p = %v", s1, s0, n, rr.Q, rr.P)
	}
	// End-to-end send rates of unrated and rated items are p*, q*.
	ps, qs := rr.SendProbs()
	u, v := 0, 0
	for j := range int32(n) {
		if rr.IRR(r, rr.PRR(a, j, false)) {
			u++
		}
		if rr.IRR(r, rr.PRR(a, j, true)) {
			v++
		}
	}
	if !binomialOK(u, n, ps, 4.5) || !binomialOK(v, n, qs, 4.5) {
		t.Errorf("end-to-end send rates %d, %d of %d, want p* = %v, q* = %v", u, v, n, ps, qs)
	}
}

func TestTruncationBound(t *testing.T) {
	tests := []struct{ epsG, mu, sigma float64 }{
		{4, 0, 1}, {1, 0.2, 0.9}, {0.25, -0.1, 1.1}, {0.0625, 0, 1}, {0.01, 0.3, 2},
	}
	for _, tc := range tests {
		a, err := TruncationBound(tc.epsG, tc.mu, tc.sigma)
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		s := tc.sigma * math.Sqrt2
		mass := 0.5 * (math.Erf((a-tc.mu)/s) - math.Erf((-a-tc.mu)/s))
		if got := -math.Log(mass); math.Abs(got-tc.epsG) > 1e-9*math.Max(1, tc.epsG) {
			t.Errorf("%+v: α = %v gives ε_g = %v", tc, a, got)
		}
	}
	a1, _ := TruncationBound(1, 0, 1)
	a2, _ := TruncationBound(0.5, 0, 1)
	if !(a2 > a1) {
		t.Errorf("smaller ε_g should widen α: %v vs %v", a2, a1)
	}
	if _, err := TruncationBound(0, 0, 1); !errors.Is(err, ErrParam) {
		t.Errorf("ε_g = 0: error %v", err)
	}
	if _, err := TruncationBound(1, 0, -1); !errors.Is(err, ErrParam) {
		t.Errorf("σ < 0: error %v", err)
	}
}

// TestSampleSendSet checks the per-item send rates of the sparse IRR:
// q for the items of ones, p for the others, a sorted result, and the
// edge cases p, q ∈ {0, 1}.
func TestSampleSendSet(t *testing.T) {
	const n = 200
	ones := []int32{0, 3, 4, 50, 51, 52, 120, 199}
	isOne := map[int32]bool{}
	for _, j := range ones {
		isOne[j] = true
	}
	tests := []struct {
		name string
		q, p float64
	}{
		{"all of ones only", 1, 0},
		{"the complement only", 0, 1},
		{"everything", 1, 1},
		{"nothing", 0, 0},
		{"q=0.7 p=0.1", 0.7, 0.1},
		{"q=0.2 p=0.9", 0.2, 0.9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rng.New(9)
			const rounds = 4000
			var gotOnes, gotOthers int
			var buf []int32
			for range rounds {
				buf = SampleSendSet(r, buf[:0], ones, n, tc.q, tc.p)
				for k, j := range buf {
					if j < 0 || j >= n || (k > 0 && buf[k-1] >= j) {
						t.Fatalf("send set %v is not sorted, distinct and in [0, %d)", buf, n)
					}
					if isOne[j] {
						gotOnes++
					} else {
						gotOthers++
					}
				}
			}
			if k, m := gotOnes, rounds*len(ones); !binomialOK(k, m, tc.q, 5) {
				t.Errorf("items of ones sent at rate %.4f, want %g", float64(k)/float64(m), tc.q)
			}
			if k, m := gotOthers, rounds*(n-len(ones)); !binomialOK(k, m, tc.p, 5) {
				t.Errorf("other items sent at rate %.4f, want %g", float64(k)/float64(m), tc.p)
			}
		})
	}
}

func TestParseShareScheme(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ShareScheme
		ok   bool
	}{
		{"gamma", GammaShares, true}, {" mixture ", MixtureShares, true}, {"laplace", 0, false}, {"", 0, false},
	} {
		got, err := ParseShareScheme(tc.in)
		if tc.ok != (err == nil) || (tc.ok && got != tc.want) {
			t.Errorf("ParseShareScheme(%q) = %v, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, ErrParam) {
			t.Errorf("ParseShareScheme(%q): %v does not wrap ErrParam", tc.in, err)
		}
		if tc.ok && got.String() != strings.TrimSpace(tc.in) {
			t.Errorf("%q does not round-trip: %s", tc.in, got)
		}
	}
}
