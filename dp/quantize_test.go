package dp

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/rng"
)

// TestStochasticRoundUnbiased checks E[round(x)] = x: the mean of many
// roundings lies within five standard errors of x, for fractions near 0,
// 1/2 and 1 and negative x, and values are ⌊x⌋ or ⌈x⌉.
func TestStochasticRoundUnbiased(t *testing.T) {
	const draws = 200000
	r := rng.New(21)
	for _, x := range []float64{0.3, -2.7, 5 + 1e-3, -1e-3, 1 - 1e-3, 1234567.5, 3} {
		var s float64
		fl := math.Floor(x)
		for range draws {
			v := StochasticRound(r, x)
			if float64(v) != fl && float64(v) != fl+1 {
				t.Fatalf("round(%g) = %d", x, v)
			}
			s += float64(v)
		}
		p := x - fl
		se := math.Sqrt(p * (1 - p) / draws)
		if m := s / draws; math.Abs(m-x) > 5*se+1e-12*math.Abs(x) {
			t.Errorf("mean of round(%g) = %.6f, want within %.2g", x, m, 5*se)
		}
	}
}

// seqSource replays fixed Uint64 values.
type seqSource struct{ v []uint64 }

func (s *seqSource) Uint64() uint64 { x := s.v[0]; s.v = s.v[1:]; return x }

// TestBernoulliExactBits checks the bitwise comparison on prescribed
// uniforms, including fractions below 2^−64 that a 53-bit uniform would
// round to 0.
func TestBernoulliExactBits(t *testing.T) {
	p := 1.5 * math.Ldexp(1, -64) // bits: 1 at 2^−64, then 1 at 2^−65
	for _, tc := range []struct {
		u    []uint64
		want bool
	}{
		{[]uint64{0}, true},
		{[]uint64{2}, false},
		{[]uint64{1, 1 << 63}, false},  // tie, then u' = 1/2 ≥ p' = 1/2
		{[]uint64{1, 1<<63 - 1}, true}, // tie, then u' < 1/2
	} {
		if got := bernoulliExact(rand.New(&seqSource{tc.u}), p); got != tc.want {
			t.Errorf("u = %v: got %v, want %v", tc.u, got, tc.want)
		}
	}
	tiny := math.Ldexp(1, -80)
	if !bernoulliExact(rand.New(&seqSource{[]uint64{0, 0}}), tiny) {
		t.Error("p = 2^−80 with all-zero bits: want true")
	}
	// 2^−80 is bit 48 of the second 64-bit word.
	if bernoulliExact(rand.New(&seqSource{[]uint64{0, 1 << 48}}), tiny) {
		t.Error("p = 2^−80 with u = 2^−80: want false")
	}
	if !bernoulliExact(rand.New(&seqSource{[]uint64{0, 1<<48 - 1}}), tiny) {
		t.Error("p = 2^−80 with u just below 2^−80: want true")
	}
}

func TestClipAndQuantize(t *testing.T) {
	x := []float32{3, -4, 0, 12} // norm 13
	if n := ClipL2(x, 1); n != 13 {
		t.Errorf("ClipL2 returned norm %g, want 13", n)
	}
	if n := l2Norm(x); n > 1 || n < 1-1e-6 {
		t.Errorf("clipped norm %.9f, want 1", n)
	}
	if x[0] <= 0 || x[1] >= 0 || x[2] != 0 {
		t.Errorf("clipping changed the direction: %v", x)
	}
	y := []float32{0.3, -0.4}
	ClipL2(y, 1) // norm 0.5: unchanged
	if y[0] != 0.3 || y[1] != -0.4 {
		t.Errorf("ClipL2 changed a short vector: %v", y)
	}

	q := Quantizer{Clip: 2, Scale: 100, Bits: 16}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	r := rng.New(22)
	big := []float32{30, -40} // norm 50, clipped to (1.2, −1.6)·100
	dst := make([]int64, 2)
	var s0, s1 float64
	const draws = 20000
	for range draws {
		q.Quantize(r, big, dst)
		if dst[0] < 119 || dst[0] > 121 || dst[1] < -161 || dst[1] > -159 {
			t.Fatalf("Quantize(%v) = %v, want near (120, −160)", big, dst)
		}
		s0 += float64(dst[0])
		s1 += float64(dst[1])
	}
	if big[0] != 30 {
		t.Error("Quantize modified its input")
	}
	// Clipped, scaled values in float32 → float64; unbiased within 0.01.
	if math.Abs(s0/draws-120) > 0.01 || math.Abs(s1/draws+160) > 0.01 {
		t.Errorf("means (%.4f, %.4f), want (120, −160)", s0/draws, s1/draws)
	}
	if a := testing.AllocsPerRun(10, func() { q.Quantize(r, big, dst) }); a != 0 {
		t.Errorf("Quantize allocates %.0f times", a)
	}
	for _, bad := range []Quantizer{{0, 1, 8}, {1, -1, 8}, {1, 1, 0}, {1, 1, 33}, {1e30, 1e30, 8}} {
		if err := bad.Validate(); !errors.Is(err, ErrParam) {
			t.Errorf("%+v: Validate = %v, want ErrParam", bad, err)
		}
	}
	l1, l2 := q.Sensitivity(4)
	if l2 != 202 || l1 != 404 {
		t.Errorf("Sensitivity(4) = (%g, %g), want (404, 202)", l1, l2)
	}
}

// TestWrapRoundTrip checks that Unwrap(Wrap(v)) = v for every v in
// [−2^(b−1), 2^(b−1)), at the range's ends and at random, and that a sum
// of wrapped values decodes to the true sum.
func TestWrapRoundTrip(t *testing.T) {
	r := rng.New(23)
	for _, b := range []int{1, 2, 8, 20, 31, 32} {
		q := Quantizer{Clip: 1, Scale: 1, Bits: b}
		half := int64(1) << (b - 1)
		vs := []int64{-half, half - 1, 0, -1}
		for range 1000 {
			vs = append(vs, r.Int64N(2*half)-half)
		}
		w := make([]uint32, len(vs))
		back := make([]int64, len(vs))
		q.Wrap(vs, w)
		q.Unwrap(w, back)
		for i := range vs {
			if back[i] != vs[i] {
				t.Fatalf("b = %d: %d → %d → %d", b, vs[i], w[i], back[i])
			}
			if b < 32 && w[i] >= 1<<b {
				t.Fatalf("b = %d: wrapped %d to %d ≥ 2^b", b, vs[i], w[i])
			}
		}
		// Sums mod 2^b: three addends whose sum stays in range.
		acc := make([]uint32, 3)
		parts := [][]int64{{-half / 2, half / 3, -1}, {-half / 4, -half / 3, 0}, {half / 8, 0, 0}}
		want := make([]int64, 3)
		for _, p := range parts {
			q.Wrap(p, w[:3])
			AddMod(b, acc, w[:3])
			for i := range want {
				want[i] += p[i]
			}
		}
		q.Unwrap(acc, back[:3])
		for i := range want {
			if back[i] != want[i] {
				t.Errorf("b = %d: sum decodes to %d, want %d", b, back[i], want[i])
			}
		}
	}
}

// TestModulusBitsNoWrap simulates secure aggregation at the modulus
// ModulusBits chooses: n clients at the clipping bound (all +c or all −c
// on one coordinate, the worst case), each adding a Skellam(μ/n) share,
// summed mod 2^b; the decoded sum must equal the true integer sum in every
// trial. It also checks the choice is the smallest that the bound allows
// and that b > 32 fails.
func TestModulusBitsNoWrap(t *testing.T) {
	r := rng.New(24)
	for _, tc := range []struct {
		n           int
		clip, scale float64
		mu          float64
	}{{1, 1, 50, 200}, {10, 1, 30, 5000}, {300, 0.5, 20, 45000}} {
		b, err := ModulusBits(tc.n, tc.clip, tc.scale, tc.mu, 1e-12)
		if err != nil {
			t.Fatal(err)
		}
		need := float64(tc.n)*math.Ceil(tc.clip*tc.scale) + float64(SkellamTailBound(tc.mu, 1e-12))
		if need > math.Ldexp(1, b-1) || (b > 1 && need <= math.Ldexp(1, b-2)) {
			t.Errorf("%+v: b = %d is not the least with %g ≤ 2^(b−1)", tc, b, need)
		}
		q := Quantizer{Clip: tc.clip, Scale: tc.scale, Bits: b}
		const dim = 500
		x := make([]float32, dim)
		qs := make([]int64, dim)
		noise := make([]int64, dim)
		w := make([]uint32, dim)
		acc := make([]uint32, dim)
		truth := make([]int64, dim)
		got := make([]int64, dim)
		for trial := range 20 {
			clear(acc)
			clear(truth)
			sign := float32(1 - 2*(trial%2))
			for c := range tc.n {
				clear(x)
				x[c%dim] = sign * float32(tc.clip) // at the bound
				x[(c+1)%dim] = sign * 1e-3
				q.Quantize(r, x, qs)
				FillSkellamShare(r, tc.mu, tc.n, noise)
				for i := range qs {
					qs[i] += noise[i]
					truth[i] += qs[i]
				}
				q.Wrap(qs, w)
				AddMod(b, acc, w)
			}
			q.Unwrap(acc, got)
			for i := range got {
				if got[i] != truth[i] {
					t.Fatalf("%+v, b = %d: coordinate %d decodes to %d, true sum %d", tc, b, i, got[i], truth[i])
				}
			}
		}
	}
	if _, err := ModulusBits(3000, 1, 1e6, 45000, 1e-12); !errors.Is(err, ErrParam) {
		t.Errorf("b > 32: err = %v, want ErrParam", err)
	}
	if b, err := ModulusBits(1, 1, 1, 0, 0.5); err != nil || b != 2 {
		t.Errorf("one client, |v| ≤ 1, no noise: b = %d, %v; want 2", b, err)
	}
}

// BenchmarkQuantize quantizes K = 10 rows as a masked HDPMF client does
// for each rated item: a clip, a scale and ten stochastic roundings.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	x := make([]float32, 10)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	dst := make([]int64, len(x))
	q := Quantizer{Clip: 16, Scale: 64, Bits: 32}
	b.SetBytes(int64(len(x)))
	for b.Loop() {
		q.Quantize(r, x, dst)
	}
}
