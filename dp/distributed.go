package dp

import (
	"math"
	"math/rand/v2"
	"strings"
)

// ShareScheme names a construction of distributed Laplace noise: n users
// each add a share so that the server only ever sees the sum.
type ShareScheme int

const (
	// GammaShares is the default: each user adds G1 − G2 with G1, G2 ~
	// Gamma(1/n, b); the n shares sum to exactly Laplace(b), and the server
	// learns nothing about the noise.
	GammaShares ShareScheme = iota
	// MixtureShares is the papers' construction (HDPMF Thm 3, LDP-OP
	// Lemma 1): the server draws h ~ Exp(1) and sends it to the users, each
	// adds b·sqrt(2h)·c with c ~ N(0, 1/n). The sum is Laplace(b)
	// marginally, but a server that knows h sees Gaussian noise of known
	// variance 2hb²: not ε-DP against the server (see MixtureServerDelta).
	MixtureShares
)

// String returns "gamma" or "mixture".
func (s ShareScheme) String() string {
	switch s {
	case GammaShares:
		return "gamma"
	case MixtureShares:
		return "mixture"
	}
	return "unknown"
}

// ParseShareScheme returns the scheme String names: "gamma" or "mixture"
// (surrounding spaces ignored); anything else fails with ErrParam.
func ParseShareScheme(name string) (ShareScheme, error) {
	switch strings.TrimSpace(name) {
	case "gamma":
		return GammaShares, nil
	case "mixture":
		return MixtureShares, nil
	}
	return 0, paramErr("share scheme %q, want gamma or mixture", name)
}

// SampleGammaShare returns one user's share of distributed Laplace(b) noise
// among n users: a draw of G1 − G2 with G1, G2 ~ Gamma(1/n, b). Any n such
// shares sum to exactly Laplace(b). It is sampled as b·sqrt(2G)·Z with
// G ~ Gamma(1/n, 1) and Z ~ N(0, 1), which has the same characteristic
// function (1 + b²t²)^(−1/n) and costs one gamma draw instead of two: it is
// the papers' construction with each user drawing its own mixing variable
// G in private instead of sharing the server's h. To tolerate dropouts, provision for the minimum
// number k of shares that must arrive: draw with n = k, so any k arriving
// shares give Laplace(b) and more only add noise.
func SampleGammaShare(r *rand.Rand, b float64, n int) float64 {
	return b * math.Sqrt(2*SampleGamma(r, 1/float64(n), 1)) * r.NormFloat64()
}

// FillGammaShares writes independent GammaShares shares (b, n) into dst, one
// per coordinate.
func FillGammaShares(r *rand.Rand, b float64, n int, dst []float64) {
	a := 1 / float64(n)
	for i := range dst {
		dst[i] = b * math.Sqrt(2*SampleGamma(r, a, 1)) * r.NormFloat64()
	}
}

// gammaShareCut is the cut-off of FillGammaShares32 and FillGammaSharesZ32:
// a Gamma(1/n) term Gamma(1+1/n)·U^n with U^n < e^−gammaShareCut is set to
// zero.
const gammaShareCut = 40

// FillGammaShares32 writes one user's GammaShares share of Laplace(b) noise
// among n users into every coordinate of dst: G1 − G2 with G1, G2 ~
// Gamma(1/n, b), so that n users' shares sum to Laplace(b) per coordinate.
// For n ≤ 1 each coordinate is a plain SampleLaplace(r, b) draw. It is the
// fast float32 sampler for large n (a popular item's gradient shared by
// hundreds of users), and it draws the same law as FillGammaShares in a
// different form, so the two give different streams for one seed.
//
// Each Gamma(a) term, a = 1/n, is drawn in its boost form
// b·Gamma(1+a)·U^n. For large n, U^n is negligible for most U, so the
// 2·len(dst) uniforms are not drawn one by one: the terms whose U^n reaches
// e^−40 are found by geometric skips (one uniform per skip), and only there
// are U, conditioned on that event, and Gamma(1+a) drawn: 2·len(dst)·
// (1 − e^(−40/n)) gamma draws on average, about 80·len(dst)/n for large n.
// It is faster than FillGammaShares for n above roughly 50 (10× at
// n = 1000) and slower for small n ≥ 2 (BenchmarkFillGammaShares32).
//
// Approximation: every term with U^n < e^−40 ≈ 4.2·10^−18 is set to zero
// instead of b·Gamma(1+a)·U^n. Above the cut the law is exactly that of the
// direct method. The expected absolute error this cut adds to one
// coordinate of the sum of the n users' shares is 2b·e^(−40(n+1)/n) <
// 8.5·10^−18·b, far below float32 resolution of the noise (b·6·10^−8). A
// skip is capped at 2^30 terms, which matters only for n ≳ 10^9.
// b must be positive.
func FillGammaShares32(r *rand.Rand, b float64, n int, dst []float32) {
	if laplaceFill32(r, b, n, dst) {
		return
	}
	c := newCutGammas(r, n)
	// Term 2d is G1 of coordinate d, 2d+1 its G2.
	for pos := c.skip(); pos < 2*len(dst); pos += 1 + c.skip() {
		gam, un := c.draw()
		g := b * gam * un
		if pos&1 == 0 {
			dst[pos>>1] += float32(g)
		} else {
			dst[pos>>1] -= float32(g)
		}
	}
}

// FillGammaSharesZ32 writes one user's GammaShares share of Laplace(b)
// noise among n users into every coordinate of dst, in SampleGammaShare's
// form b·sqrt(2G)·Z (G ~ Gamma(1/n, 1), Z ~ N(0, 1)): the same law as
// FillGammaShares32, one gamma and one normal per coordinate instead of
// two gammas, and so a different stream for one seed (LDP-OP's results
// are recorded with this one). For n ≤ 1 each coordinate is a plain
// SampleLaplace(r, b) draw. G is drawn in its boost form Gamma(1+a)·U^n,
// a = 1/n, with FillGammaShares32's geometric skips and cut: coordinates
// whose U^n falls below e^−40 are set to zero (b·sqrt(2G)·Z is then of
// the order of 10^−8·b, under float32 resolution); above the cut the law
// is exact. b must be positive.
func FillGammaSharesZ32(r *rand.Rand, b float64, n int, dst []float32) {
	if laplaceFill32(r, b, n, dst) {
		return
	}
	c := newCutGammas(r, n)
	for d := c.skip(); d < len(dst); d += 1 + c.skip() {
		gam, un := c.draw()
		dst[d] = float32(b * math.Sqrt(2*(gam*un)) * r.NormFloat64())
	}
}

// laplaceFill32 clears dst and, when n ≤ 1 (one user holds all the noise),
// fills it with SampleLaplace(r, b) draws and reports true.
func laplaceFill32(r *rand.Rand, b float64, n int, dst []float32) bool {
	clear(dst)
	if n > 1 {
		return false
	}
	for d := range dst {
		dst[d] = float32(SampleLaplace(r, b))
	}
	return true
}

// cutGammas draws a sequence of independent Gamma(1/n, 1) terms, n ≥ 2,
// in their boost form Gamma(1+1/n)·U^n, setting to zero every term whose
// U^n falls below e^−gammaShareCut: skip returns how many zero terms come
// before the next kept one (found by a geometric skip, one uniform), and
// draw returns that term's Gamma(1+1/n) and U^n (U conditioned on the
// event). Callers alternate skip and draw.
type cutGammas struct {
	r     *rand.Rand
	fn, a float64 // n and 1/n
	lthr  float64 // ln of the threshold on U
	p     float64 // P(U ≥ threshold)
}

func newCutGammas(r *rand.Rand, n int) cutGammas {
	fn := float64(n)
	lthr := -gammaShareCut / fn
	return cutGammas{r: r, fn: fn, a: 1 / fn, lthr: lthr, p: -math.Expm1(lthr)}
}

func (c *cutGammas) skip() int { return geomSkip(c.r, c.lthr) }

func (c *cutGammas) draw() (gam, un float64) {
	lu := math.Log1p(-c.p * c.r.Float64()) // ln U, U uniform on [threshold, 1)
	return SampleGamma(c.r, 1+c.a, 1), math.Exp(c.fn * lu)
}

// geomSkip returns the number of failures before the first success of
// Bernoulli trials that fail with probability e^lq (lq < 0), capped at
// 2^30.
func geomSkip(r *rand.Rand, lq float64) int {
	v := 1 - r.Float64() // (0, 1]
	s := math.Log(v) / lq
	if s > 1<<30 {
		return 1 << 30
	}
	return int(s)
}

// SampleMixing returns the server's mixing variable h ~ Exp(1) of the
// MixtureShares construction.
func SampleMixing(r *rand.Rand) float64 { return r.ExpFloat64() }

// SampleMixShare returns one user's MixtureShares share among n users given
// the server's h: b·sqrt(2h)·c with c ~ N(0, 1/n).
func SampleMixShare(r *rand.Rand, b, h float64, n int) float64 {
	return b * math.Sqrt(2*h/float64(n)) * r.NormFloat64()
}

// FillMixShares writes one user's MixtureShares shares among n users into
// dst, coordinate i using the server's h[i] (len(h) must be at least
// len(dst)): b·sqrt(2h[i]/n)·c with c ~ N(0, 1), computed in float64. An n
// below 1 counts as 1.
func FillMixShares[F float32 | float64](r *rand.Rand, b float64, h []F, n int, dst []F) {
	h = h[:len(dst)]
	c := b * math.Sqrt(2/float64(max(n, 1)))
	for i := range dst {
		dst[i] = F(c * math.Sqrt(float64(h[i])) * r.NormFloat64())
	}
}

// simpson integrates f over [lo, hi] with n (even) panels.
func simpson(f func(float64) float64, lo, hi float64, n int) float64 {
	if n%2 == 1 {
		n++
	}
	h := (hi - lo) / float64(n)
	s := f(lo) + f(hi)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		s += w * f(lo+float64(i)*h)
	}
	return s * h / 3
}

// gaussDelta is the exact privacy profile of the Gaussian mechanism with
// noise σ and sensitivity Δ (Balle and Wang 2018):
// δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).
func gaussDelta(eps, sigma, sens float64) float64 {
	if sigma <= 0 {
		return 1
	}
	a := sens / (2 * sigma)
	c := eps * sigma / sens
	d := normCDF(a-c) - math.Exp(eps)*normCDF(-a-c)
	return math.Max(0, d)
}

func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// MixtureServerDelta returns the δ(ε) that MixtureShares noise of total
// scale b gives a query of sensitivity sens against a server that knows its
// own h: conditioned on h the noise is N(0, 2hb²), so
// δ = E_h[δ_Gauss(ε; σ = b·sqrt(2h), sens)], h ~ Exp(1), integrated
// numerically. At ε = 1 with b = sens/ε it is about 0.19: the papers'
// construction is ε-DP only against parties that do not know h.
func MixtureServerDelta(eps, sens, b float64) float64 {
	// Substitute h = −ln u, u ∈ (0, 1]: E_h[g(h)] = ∫₀¹ g(−ln u) du.
	f := func(u float64) float64 {
		if u <= 0 {
			return 0 // h = ∞: infinite noise
		}
		return gaussDelta(eps, b*math.Sqrt(-2*math.Log(u)), sens)
	}
	return simpson(f, 0, 1, 20000)
}
