package secagg

import (
	"fmt"
	"math/bits"
)

// lagrange reconstructs many Shamir-shared seeds at once, as the server's
// Result needs: one per survivor and one per dropped client with surviving
// neighbours, each from the first T of its revealed shares, like
// recoverSeed. The Lagrange coefficient of holder i at 0 is
//
//	λ_i = Π_{j≠i} x_j / (x_j − x_i) = (Π_j x_j) / d_i,   d_i = x_i · Π_{j≠i} (x_j − x_i),
//
// so a seed is (Π_j x_j) · Σ_i y_i / d_i. The x are small integers (client
// ID + 1), so products of two differences fit in 64 bits and most of d_i
// is computed without field multiplications; the inverses of all d_i of a
// batch come from one field inversion (Montgomery's trick). It gives the
// same bits as recoverSeed: both evaluate at 0 the one polynomial of
// degree < T through the same T points.
type lagrange struct {
	t      int
	rpow   []fe // rpow[m] = R^{m+1} mod ℓ: undoes m plain-by-Montgomery products
	num    []fe // per seed: Π_j x_j, Montgomery form
	ys, ds []fe // per share: the value (plain) and d_i (Montgomery form)
	pre    []fe // prefix products of ds
	ok     []bool
}

func newLagrange(t int) *lagrange {
	l := &lagrange{t: t}
	r := feR
	for range 2*t + 2 {
		l.rpow = append(l.rpow, r)
		feMul(&r, &r, &feR2)
	}
	return l
}

// smallProduct multiplies into p (Montgomery form) the factors given to
// mul, which are below 2^64, with as few field multiplications as fit.
type smallProduct struct {
	l     *lagrange
	acc   uint64 // the product of the factors not yet folded into p
	p     fe     // R^{1-m} · product so far, as an integer
	flush int    // m: plain factors folded into p
}

func (s *smallProduct) reset(l *lagrange) {
	s.l, s.acc, s.p, s.flush = l, 1, feR, 0
}

func (s *smallProduct) mul(f uint64) {
	hi, lo := bits.Mul64(s.acc, f)
	if hi == 0 {
		s.acc = lo
		return
	}
	feMul(&s.p, &s.p, &fe{s.acc})
	s.flush++
	s.acc = f
}

// result returns the product in Montgomery form.
func (s *smallProduct) result() fe {
	feMul(&s.p, &s.p, &fe{s.acc})
	s.flush++
	for s.flush >= len(s.l.rpow) { // only if t grew past the table
		r := s.l.rpow[len(s.l.rpow)-1]
		feMul(&r, &r, &feR2)
		s.l.rpow = append(s.l.rpow, r)
	}
	var out fe
	feMul(&out, &s.p, &s.l.rpow[s.flush])
	return out
}

// recover reconstructs seeds[k] from sets[k] for every k, or sets errs[k].
func (l *lagrange) recover(sets []*shareSet, seeds [][SeedSize]byte, errs []error) {
	t := l.t
	n := len(sets)
	l.num = grow(l.num, n)
	l.ys = grow(l.ys, n*t)
	l.ds = grow(l.ds, n*t)
	l.pre = grow(l.pre, n*t)
	if cap(l.ok) < n {
		l.ok = make([]bool, n)
	}
	l.ok = l.ok[:n]
	var sp smallProduct
	valid := 0 // shares of the seeds still ok, packed
	for k, set := range sets {
		l.ok[k] = false
		errs[k] = nil
		if len(set.holders) < t {
			errs[k] = fmt.Errorf("secagg: %d shares, need %d", len(set.holders), t)
			continue
		}
		ys, ds := l.ys[valid:valid+t], l.ds[valid:valid+t]
		for i := range t {
			if len(set.values[i]) != ShareSize || !feSetCanonical(&ys[i], set.values[i]) {
				errs[k] = fmt.Errorf("%w: share from %d is not a scalar", ErrShares, set.holders[i])
				break
			}
		}
		if errs[k] != nil {
			continue
		}
		hs := set.holders[:t]
		sp.reset(l)
		for _, h := range hs {
			sp.mul(uint64(h) + 1)
		}
		l.num[k] = sp.result()
		for i, hi := range hs {
			xi := uint64(hi) + 1
			sp.reset(l)
			sp.mul(xi)
			neg := false
			for j, hj := range hs {
				if j == i {
					continue
				}
				xj := uint64(hj) + 1
				switch {
				case xj > xi:
					sp.mul(xj - xi)
				case xj < xi:
					sp.mul(xi - xj)
					neg = !neg
				default:
					errs[k] = fmt.Errorf("secagg: share holder %d repeated", hj)
				}
			}
			ds[i] = sp.result()
			if neg {
				feNeg(&ds[i], &ds[i])
			}
		}
		if errs[k] != nil {
			continue
		}
		l.ok[k] = true
		valid += t
	}
	if valid == 0 {
		return
	}
	// Montgomery's trick: every d_i (nonzero: ℓ exceeds any product of
	// differences' prime factors, all below 2^33) inverted with one
	// inversion.
	ds, pre := l.ds[:valid], l.pre[:valid]
	pre[0] = ds[0]
	for i := 1; i < valid; i++ {
		feMul(&pre[i], &pre[i-1], &ds[i])
	}
	var inv fe
	if !feInvMont(&inv, &pre[valid-1]) {
		panic("secagg: zero Lagrange denominator") // unreachable, see above
	}
	for i := valid - 1; i > 0; i-- {
		var di fe
		feMul(&di, &inv, &pre[i-1]) // 1/d_i
		feMul(&inv, &inv, &ds[i])
		ds[i] = di
	}
	ds[0] = inv
	// Each seed: num · Σ y_i / d_i, with y plain and 1/d_i in Montgomery
	// form, so each product, the sum and the final product are plain.
	off := 0
	var b [ShareSize]byte
	for k := range sets {
		if !l.ok[k] {
			continue
		}
		var acc, p fe
		for i := range t {
			feMul(&p, &l.ys[off+i], &ds[off+i])
			feAdd(&acc, &acc, &p)
		}
		off += t
		feMul(&p, &acc, &l.num[k])
		feBytes(b[:], &p)
		for _, x := range b[SeedSize:] {
			if x != 0 {
				errs[k] = fmt.Errorf("%w: reconstructed value is not a seed", ErrShares)
				break
			}
		}
		if errs[k] == nil {
			copy(seeds[k][:], b[:SeedSize])
		}
	}
}

func grow(s []fe, n int) []fe {
	if cap(s) < n {
		return make([]fe, n)
	}
	return s[:n]
}
