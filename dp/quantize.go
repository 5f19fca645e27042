package dp

import (
	"math"
	"math/rand/v2"
)

// Quantization for secure aggregation: a client's float32 vector becomes
// integers that can be masked and summed mod 2^b, and the server decodes
// the sum back to floats.

// MaxModulusBits is the largest modulus, 2^32, that Quantizer and
// ModulusBits support: uploads travel as uint32.
const MaxModulusBits = 32

// Quantizer maps a client's float32 vector to integers mod 2^Bits for
// secure aggregation: Quantize clips the vector to L2 norm Clip, scales it
// by Scale and rounds each coordinate stochastically (unbiased); Wrap
// reduces the integers mod 2^Bits for the masked sum; Unwrap decodes a sum
// mod 2^Bits to a signed integer in [−2^(Bits−1), 2^(Bits−1)); Dequantize
// divides by Scale.
//
// Clipping is by L2 norm only. It bounds every coordinate too, |x_i| ≤
// Clip, which is what ModulusBits uses; the noise calibration uses the L2
// and L1 sensitivities of Sensitivity.
type Quantizer struct {
	// Clip is the L2 norm bound c, in float units; it must be positive.
	Clip float64
	// Scale is γ, integer units per float unit; it must be positive, and
	// Clip·Scale below 2^52.
	Scale float64
	// Bits is the modulus exponent b, 1 ≤ b ≤ 32 (see ModulusBits).
	Bits int
}

// Validate reports a Quantizer parameter out of range, wrapping ErrParam.
func (q Quantizer) Validate() error {
	if err := positive("clip", q.Clip); err != nil {
		return err
	}
	if err := positive("scale", q.Scale); err != nil {
		return err
	}
	if !(q.Clip*q.Scale < 1<<52) {
		return paramErr("clip·scale = %g must be below 2^52", q.Clip*q.Scale)
	}
	if q.Bits < 1 || q.Bits > MaxModulusBits {
		return paramErr("bits = %d, want 1 to %d", q.Bits, MaxModulusBits)
	}
	return nil
}

// ClipL2 scales x in place so that its L2 norm is at most c (not at all if
// it already is) and returns the norm x had. A c that is not positive
// zeroes x.
func ClipL2(x []float32, c float64) float64 {
	norm := l2Norm(x)
	if !(c > 0) {
		clear(x)
		return norm
	}
	if norm > c {
		f := c / norm
		for i := range x {
			x[i] = float32(float64(x[i]) * f)
		}
		// float32 rounding can leave the norm a hair above c.
		for l2Norm(x) > c {
			for i := range x {
				x[i] = math.Nextafter32(x[i], 0)
			}
		}
	}
	return norm
}

func l2Norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// StochasticRound returns ⌊x⌋ + B with B ~ Bernoulli(x − ⌊x⌋), so that
// E[StochasticRound(r, x)] = x exactly: the Bernoulli compares the exact
// binary expansion of the fraction x − ⌊x⌋ (itself exact in float64) with
// uniform random bits, 64 at a time, so its probability is exactly the
// fraction, not a 53-bit approximation of it. It costs one Uint64 per call
// (another with probability 2^−64). |x| must be below 2^63.
func StochasticRound(r *rand.Rand, x float64) int64 {
	f := math.Floor(x)
	if bernoulliExact(r, x-f) {
		return int64(f) + 1
	}
	return int64(f)
}

// bernoulliExact returns true with probability exactly p, for p in [0, 1).
// At each step p·2^64 = h + p' with h an integer and p' in [0, 1), all
// exact in float64; a uniform 64-bit u is below h with probability h/2^64
// and equal to it with probability 2^−64, in which case the comparison
// continues with p'.
func bernoulliExact(r *rand.Rand, p float64) bool {
	for p > 0 {
		y := p * 0x1p64 // exact: a power of two, and p·2^64 < 2^64 does not overflow
		h := math.Floor(y)
		u, hu := r.Uint64(), uint64(h)
		if u != hu {
			return u < hu
		}
		p = y - h
	}
	return false
}

// Quantize clips x to L2 norm q.Clip (without modifying x), multiplies by
// q.Scale and stochastically rounds each coordinate into dst (len(dst) must
// be at least len(x)): dst[i] = StochasticRound(γ·x_i·min(1, c/‖x‖₂)). Each
// dst[i] is an unbiased estimate of the scaled, clipped coordinate, and
// |dst[i]| ≤ ⌈c·γ⌉. It allocates nothing.
func (q Quantizer) Quantize(r *rand.Rand, x []float32, dst []int64) {
	dst = dst[:len(x)]
	f := q.Scale
	if norm := l2Norm(x); norm > q.Clip {
		f *= q.Clip / norm
	}
	bound := math.Ceil(q.Clip * q.Scale)
	for i, v := range x {
		// Clamp against rounding in f: the bound must hold exactly.
		// (Comparisons, not math.Max and Min, which order NaN and ±0 at
		// a fifth of a quantization's cost; a NaN stays NaN either way.)
		y := float64(v) * f
		if y > bound {
			y = bound
		} else if y < -bound {
			y = -bound
		}
		dst[i] = StochasticRound(r, y)
	}
}

// Sensitivity returns the L1 and L2 sensitivities, in integer units, of the
// sum of quantized dim-dimensional vectors to adding or removing one
// client: Δ2 = c·γ + √dim, since stochastic rounding moves each coordinate
// by less than 1 (a deterministic bound; Kairouz et al. 2021, Thm. 1, give
// a tighter one that holds with high probability), and Δ1 = min(√dim·Δ2,
// Δ2²), the second because nonzero integers have |v| ≤ v². These are the
// Δ1, Δ2 of the Skellam mechanism's RDP (package accountant/rdp).
func (q Quantizer) Sensitivity(dim int) (l1, l2 float64) {
	l2 = q.Clip*q.Scale + math.Sqrt(float64(dim))
	return min(math.Sqrt(float64(dim))*l2, l2*l2), l2
}

// Wrap writes src mod 2^q.Bits into dst (len(dst) ≥ len(src)), the form in
// which a client masks and uploads its quantized, noised vector. Negative
// values wrap to the top of [0, 2^Bits).
func (q Quantizer) Wrap(src []int64, dst []uint32) {
	dst = dst[:len(src)]
	m := modMask(q.Bits)
	for i, v := range src {
		dst[i] = uint32(uint64(v) & m)
	}
}

// Unwrap decodes values mod 2^q.Bits (such as the masked sum of all
// clients' Wrap outputs) to the signed integers in [−2^(Bits−1),
// 2^(Bits−1)) that they are congruent to, into dst (len(dst) ≥ len(src)).
// It recovers the true sum whenever that lies in the range, which
// ModulusBits sizes Bits to ensure.
func (q Quantizer) Unwrap(src []uint32, dst []int64) {
	dst = dst[:len(src)]
	m := modMask(q.Bits)
	half := int64(1) << (q.Bits - 1)
	for i, v := range src {
		x := int64(uint64(v) & m)
		if x >= half {
			x -= int64(m) + 1
		}
		dst[i] = x
	}
}

// AddMod adds x to acc coordinate-wise mod 2^bits (len(x) ≥ len(acc)): the
// server's (or the secure aggregation protocol's) sum of uploads.
func AddMod(bits int, acc, x []uint32) {
	x = x[:len(acc)]
	m := uint32(modMask(bits))
	for i := range acc {
		acc[i] = (acc[i] + x[i]) & m
	}
}

// Dequantize writes src/q.Scale into dst (len(dst) ≥ len(src)): the decoded
// sum back in float units.
func (q Quantizer) Dequantize(src []int64, dst []float32) {
	dst = dst[:len(src)]
	inv := 1 / q.Scale
	for i, v := range src {
		dst[i] = float32(float64(v) * inv)
	}
}

func modMask(bits int) uint64 { return 1<<uint(bits) - 1 }

// ModulusBits returns the smallest modulus exponent b such that the sum of
// n clients' quantized coordinates (Quantizer{clip, scale} gives each
// |v| ≤ ⌈clip·scale⌉) plus Skellam(noiseMu) noise (the sum of all shares;
// variance 2·noiseMu, integer units) decodes without wrapping, except with
// probability at most tail per coordinate: b is the least with
// n·⌈clip·scale⌉ + t ≤ 2^(b−1), where t = SkellamTailBound(noiseMu, tail)
// so P(|noise| ≥ t) ≤ tail by a Chernoff bound. For a d-dimensional vector
// pass tail/d for a bound on any coordinate wrapping (a union bound). If
// more than n shares may arrive, pass the noise of the most that can. It
// fails with ErrParam for invalid arguments or when b would exceed 32.
func ModulusBits(n int, clip, scale, noiseMu, tail float64) (int, error) {
	if n < 1 {
		return 0, paramErr("n = %d clients, want at least 1", n)
	}
	if err := positive("clip", clip); err != nil {
		return 0, err
	}
	if err := positive("scale", scale); err != nil {
		return 0, err
	}
	if !(noiseMu >= 0) || math.IsInf(noiseMu, 1) {
		return 0, paramErr("noise mu = %g must be finite and non-negative", noiseMu)
	}
	if !(tail > 0 && tail < 1) {
		return 0, paramErr("tail = %g, want a probability in (0, 1)", tail)
	}
	// |sum| ≤ n·⌈cγ⌉ + t − 1 except with probability tail; centered
	// decoding holds |v| ≤ 2^(b−1) − 1.
	need := float64(n)*math.Ceil(clip*scale) + float64(SkellamTailBound(noiseMu, tail))
	for b := 1; b <= MaxModulusBits; b++ {
		if need <= math.Ldexp(1, b-1) {
			return b, nil
		}
	}
	return 0, paramErr("the sum needs |v| up to %.4g, more than 32 bits hold (2^31 − 1)", need-1)
}
