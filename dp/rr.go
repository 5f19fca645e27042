package dp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
	"math/rand/v2"
	"slices"
)

// RRKeepProb returns the probability e^ε/(1+e^ε) with which binary
// randomized response reports the true bit; it is ε-DP for that bit.
func RRKeepProb(eps float64) float64 { return 1 / (1 + math.Exp(-eps)) }

// RandomizedResponse reports bit with probability RRKeepProb(eps) and its
// negation otherwise.
func RandomizedResponse(r *rand.Rand, bit bool, eps float64) bool {
	if r.Float64() < RRKeepProb(eps) {
		return bit
	}
	return !bit
}

// TwoStageRR holds the parameters of SDCF's two-stage randomized response
// (Jiang, Li and Lin 2019, §3.2 and §3.4), which hides which items a user
// rated from a server that sees, every iteration, the items the user sends
// gradients for.
//
// The permanent stage (PRR, eq. 9) replaces the user's rated-bit B_j once
// and for all: B'_j = 1 with probability F/2, 0 with probability F/2, B_j
// otherwise. The instantaneous stage (IRR, eq. 7) draws, each iteration, a
// send-bit S_j = 1 with probability Q if B'_j = 1 and P if B'_j = 0. Averaging
// over iterations recovers at most B', never B.
type TwoStageRR struct {
	F, P, Q float64
}

// SolvePRR returns the PRR flip probability f for a permanent budget epsP
// and a user with h rated items (Thm 1: ε_P = 2h·ln((1 − f/2)/(f/2))), that
// is f = 2/(1 + e^(ε_P/(2h))).
func SolvePRR(epsP float64, h int) (float64, error) {
	if err := positive("epsilon_P", epsP); err != nil {
		return 0, err
	}
	if h < 1 {
		return 0, paramErr("rated items h = %d must be at least 1", h)
	}
	return 2 / (1 + math.Exp(epsP/(2*float64(h)))), nil
}

// SolveTwoStageRR solves SDCF's parameters for a user with h rated items
// out of nItems: f from epsP (Thm 1), then the send probabilities p*, q* of
// unrated and rated items (Lemma 1, eqs. 10–11) from the per-iteration budget
// epsI (Thm 2: ε_I = h·ln(q*(1−p*)/(p*(1−q*)))) and the expected number of
// uploads z = h·q* + (nItems − h)·p* (eq. 12), and finally p, q by inverting
// eqs. 10–11. The paper uses epsP = 2·epsI and z = |R|/|U|. It fails with
// ErrParam when no p, q in [0, 1] meet the constraints (z too small or too
// large for the given f).
func SolveTwoStageRR(epsP, epsI float64, h, nItems int, z float64) (TwoStageRR, error) {
	f, err := SolvePRR(epsP, h)
	if err != nil {
		return TwoStageRR{}, err
	}
	if err := positive("epsilon_I", epsI); err != nil {
		return TwoStageRR{}, err
	}
	if nItems <= h {
		return TwoStageRR{}, paramErr("items %d must exceed rated items %d", nItems, h)
	}
	if !(z > 0) || z >= float64(nItems) {
		return TwoStageRR{}, paramErr("expected uploads z = %g must lie in (0, %d)", z, nItems)
	}
	hf, m := float64(h), float64(nItems-h)
	rho := math.Exp(epsI / hf)
	qs := func(ps float64) float64 { return rho * ps / (1 + (rho-1)*ps) }
	// uploads(p*) = h·q*(p*) + m·p* increases from 0 to nItems; bisect.
	lo, hi := 0.0, 1.0
	for range 200 {
		mid := (lo + hi) / 2
		if hf*qs(mid)+m*mid < z {
			lo = mid
		} else {
			hi = mid
		}
	}
	ps := (lo + hi) / 2
	qsv := qs(ps)
	// [p*; q*] = [[1−f/2, f/2]; [f/2, 1−f/2]]·[p; q], determinant 1 − f.
	g := f / 2
	p := ((1-g)*ps - g*qsv) / (1 - f)
	q := ((1-g)*qsv - g*ps) / (1 - f)
	const tol = 1e-12
	if p < -tol || q > 1+tol || p > 1+tol || q < -tol {
		return TwoStageRR{}, paramErr("no IRR probabilities for epsilon_I = %g, z = %g with f = %g: need p* = %.4g, q* = %.4g within [f/2, 1−f/2]", epsI, z, f, ps, qsv)
	}
	return TwoStageRR{F: f, P: clamp01(p), Q: clamp01(q)}, nil
}

func clamp01(x float64) float64 { return math.Min(1, math.Max(0, x)) }

// SendProbs returns p* and q*, the probabilities that an unrated and a rated
// item are sent in an iteration (Lemma 1, eqs. 10–11).
func (t TwoStageRR) SendProbs() (pStar, qStar float64) {
	g := t.F / 2
	return g*t.Q + (1-g)*t.P, (1-g)*t.Q + g*t.P
}

// PRREpsilon returns the permanent-stage budget of the parameters for a user
// with h rated items (Thm 1).
func (t TwoStageRR) PRREpsilon(h int) float64 {
	g := t.F / 2
	return 2 * float64(h) * math.Log((1-g)/g)
}

// IRREpsilon returns the per-iteration budget of the parameters for a user
// with h rated items (Thm 2).
func (t TwoStageRR) IRREpsilon(h int) float64 {
	ps, qs := t.SendProbs()
	return float64(h) * math.Log(qs*(1-ps)/(ps*(1-qs)))
}

// prr applies eq. 9 given a uniform u in [0, 1).
func (t TwoStageRR) prr(u float64, rated bool) bool {
	switch {
	case u < t.F/2:
		return true
	case u < t.F:
		return false
	}
	return rated
}

// PRR returns the user's permanent bit B'_j for an item. It is a pure
// function of the user's secret and the item, so it is the same after a
// restart and cannot be averaged away by asking again.
func (t TwoStageRR) PRR(s *PRRSource, item int32, rated bool) bool {
	return t.prr(s.Uniform(item), rated)
}

// IRR returns this iteration's send-bit S_j for a permanent bit B'_j.
func (t TwoStageRR) IRR(r *rand.Rand, prr bool) bool {
	if prr {
		return r.Float64() < t.Q
	}
	return r.Float64() < t.P
}

// SampleSendSet draws the instantaneous randomized response of a whole
// sparse bit vector over items [0, n) whose 1-bits are ones (sorted,
// distinct, each in [0, n)): it appends to dst, sorted, each item of ones
// with probability q and each other item with probability p, and returns
// dst. It is IRR applied to every item, q = TwoStageRR.Q and p =
// TwoStageRR.P, but costs O(len(ones) + p·n) draws instead of n: the kept
// items are found by geometric skips.
func SampleSendSet(r *rand.Rand, dst, ones []int32, n int, q, p float64) []int32 {
	for pos := bernoulliSkip(r, q, -1); pos < len(ones); pos = bernoulliSkip(r, q, pos) {
		dst = append(dst, ones[pos])
	}
	ptr := 0
	for pos := bernoulliSkip(r, p, -1); pos < n-len(ones); pos = bernoulliSkip(r, p, pos) {
		// the pos-th item not in ones
		for ptr < len(ones) && int(ones[ptr]) <= pos+ptr {
			ptr++
		}
		dst = append(dst, int32(pos+ptr))
	}
	slices.Sort(dst)
	return dst
}

// bernoulliSkip returns the next index after pos selected by independent
// Bernoulli(p) trials (math.MaxInt when none is).
func bernoulliSkip(r *rand.Rand, p float64, pos int) int {
	switch {
	case p >= 1:
		return pos + 1
	case p <= 0:
		return math.MaxInt
	}
	g := math.Floor(math.Log(1-r.Float64()) / math.Log1p(-p))
	if g > float64(math.MaxInt32) {
		return math.MaxInt
	}
	return pos + 1 + int(g)
}

// PRRSource derives a user's permanent uniforms from a per-user secret:
// HMAC-SHA256(secret, "privrec/prr/v1" ‖ item) mapped to [0, 1). It is not
// safe for concurrent use; give each goroutine its own.
type PRRSource struct {
	mac hash.Hash
	msg [22]byte
	sum [sha256.Size]byte
}

const prrLabel = "privrec/prr/v1"

// NewPRRSource returns a source keyed by secret (at least 16 random bytes,
// kept by the user across restarts).
func NewPRRSource(secret []byte) *PRRSource {
	s := &PRRSource{mac: hmac.New(sha256.New, secret)}
	copy(s.msg[:], prrLabel)
	return s
}

// Uniform returns the user's permanent uniform in [0, 1) for item.
func (s *PRRSource) Uniform(item int32) float64 {
	binary.LittleEndian.PutUint64(s.msg[len(prrLabel):], uint64(uint32(item)))
	s.mac.Reset()
	s.mac.Write(s.msg[:])
	sum := s.mac.Sum(s.sum[:0])
	return float64(binary.LittleEndian.Uint64(sum)>>11) / (1 << 53)
}

// TruncationBound returns SDCF's range factor α (Thm 3): fake errors for
// unrated items are drawn from N(mu, sigma²) restricted to [−α, α], which is
// epsG-DP when ε_g = −ln P(−α < X < α). It solves for α by bisection on the
// erf expression. The paper searches (0, α_max], α_max = max(|μ ± 2σ|); when
// epsG is too small for that range the bracket is widened until it holds.
func TruncationBound(epsG, mu, sigma float64) (float64, error) {
	if err := positive("epsilon_g", epsG); err != nil {
		return 0, err
	}
	if err := positive("sigma", sigma); err != nil {
		return 0, err
	}
	if math.IsNaN(mu) || math.IsInf(mu, 0) {
		return 0, paramErr("mu = %g must be finite", mu)
	}
	target := math.Exp(-epsG) // the mass in [−α, α]
	mass := func(a float64) float64 {
		s := sigma * math.Sqrt2
		return 0.5 * (math.Erf((a-mu)/s) - math.Erf((-a-mu)/s))
	}
	lo, hi := 0.0, math.Max(math.Abs(mu+2*sigma), math.Abs(mu-2*sigma))
	for mass(hi) < target {
		hi *= 2
		if hi > 1e300 {
			return 0, paramErr("no truncation bound for epsilon_g = %g", epsG)
		}
	}
	for range 200 {
		mid := (lo + hi) / 2
		if mass(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}
