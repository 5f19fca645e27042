package secagg

import (
	"encoding/binary"
	"math/big"
	"math/bits"
)

// The Shamir field is the scalar field of Ristretto255 (shamir.go): the
// integers modulo the prime ℓ = 2^252 + 27742317777372353535851937790883648493.
// circl's scalars (through go-ristretto) spend most of a reconstruction
// in their multiplication and inversion; the server's batched
// reconstruction (lagrange.go) uses this minimal Montgomery arithmetic
// instead: four 64-bit limbs, R = 2^256, one inversion (math/big) per
// batch. Only the server's unmasking uses it; values are public there
// (the revealed shares), so nothing here needs to run in constant time.

// fe is an element of the scalar field as four little-endian 64-bit limbs,
// always reduced (< ℓ). Whether it holds the value x or its Montgomery form
// x·R mod ℓ is up to the caller.
type fe [4]uint64

var (
	orderL = fe{0x5812631a5cf5d3ed, 0x14def9dea2f79cd6, 0, 0x1000000000000000}
	// feMInv is -ℓ^{-1} mod 2^64.
	feMInv = func() uint64 {
		inv := uint64(1)
		for range 6 { // Newton: each step doubles the correct low bits
			inv *= 2 - orderL[0]*inv
		}
		return -inv
	}()
	feR  = feFromBig(new(big.Int).Mod(new(big.Int).Lsh(big.NewInt(1), 256), feBig(&orderL))) // R mod ℓ: Montgomery 1
	feR2 = feFromBig(new(big.Int).Mod(new(big.Int).Lsh(big.NewInt(1), 512), feBig(&orderL))) // R² mod ℓ
)

func feBig(a *fe) *big.Int {
	var b [32]byte
	for i, w := range a {
		binary.BigEndian.PutUint64(b[24-8*i:], w)
	}
	return new(big.Int).SetBytes(b[:])
}

func feFromBig(x *big.Int) fe {
	var b [32]byte
	x.FillBytes(b[:])
	var a fe
	for i := range a {
		a[i] = binary.BigEndian.Uint64(b[24-8*i:])
	}
	return a
}

// feSetCanonical sets a from 32 little-endian bytes and reports whether
// they encode an integer below ℓ (the check circl's UnmarshalBinary makes).
func feSetCanonical(a *fe, b []byte) bool {
	for i := range a {
		a[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return feLess(a, &orderL)
}

// feBytes writes a (a plain value, not Montgomery) as 32 little-endian
// bytes.
func feBytes(b []byte, a *fe) {
	for i, w := range a {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
}

func feLess(a, b *fe) bool {
	_, borrow := bits.Sub64(a[0], b[0], 0)
	_, borrow = bits.Sub64(a[1], b[1], borrow)
	_, borrow = bits.Sub64(a[2], b[2], borrow)
	_, borrow = bits.Sub64(a[3], b[3], borrow)
	return borrow == 1
}

// feMul sets z = x·y·R^{-1} mod ℓ (CIOS Montgomery multiplication). With
// both in Montgomery form the result is the product in Montgomery form;
// with one plain and one Montgomery it is the plain product.
func feMul(z, x, y *fe) {
	var t0, t1, t2, t3, t4 uint64
	for i := range 4 {
		yi := y[i]
		var c, cc, hi, lo uint64
		hi, lo = bits.Mul64(x[0], yi)
		t0, cc = bits.Add64(lo, t0, 0)
		c = hi + cc
		hi, lo = bits.Mul64(x[1], yi)
		lo, cc = bits.Add64(lo, t1, 0)
		hi += cc
		t1, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		hi, lo = bits.Mul64(x[2], yi)
		lo, cc = bits.Add64(lo, t2, 0)
		hi += cc
		t2, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		hi, lo = bits.Mul64(x[3], yi)
		lo, cc = bits.Add64(lo, t3, 0)
		hi += cc
		t3, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		var t5 uint64
		t4, t5 = bits.Add64(t4, c, 0)

		m := t0 * feMInv
		hi, lo = bits.Mul64(m, orderL[0])
		_, cc = bits.Add64(lo, t0, 0)
		c = hi + cc
		hi, lo = bits.Mul64(m, orderL[1])
		lo, cc = bits.Add64(lo, t1, 0)
		hi += cc
		t0, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		// orderL[2] is zero.
		t1, cc = bits.Add64(t2, c, 0)
		c = cc
		hi, lo = bits.Mul64(m, orderL[3])
		lo, cc = bits.Add64(lo, t3, 0)
		hi += cc
		t2, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		t3, cc = bits.Add64(t4, c, 0)
		t4 = t5 + cc
	}
	// t < 2ℓ < 2^254: t4 is zero; subtract ℓ once if needed.
	var b uint64
	s0, b := bits.Sub64(t0, orderL[0], 0)
	s1, b := bits.Sub64(t1, orderL[1], b)
	s2, b := bits.Sub64(t2, orderL[2], b)
	s3, b := bits.Sub64(t3, orderL[3], b)
	_, b = bits.Sub64(t4, 0, b)
	if b == 0 {
		t0, t1, t2, t3 = s0, s1, s2, s3
	}
	z[0], z[1], z[2], z[3] = t0, t1, t2, t3
}

// feAdd sets z = x + y mod ℓ.
func feAdd(z, x, y *fe) {
	var c uint64
	var s fe
	s[0], c = bits.Add64(x[0], y[0], 0)
	s[1], c = bits.Add64(x[1], y[1], c)
	s[2], c = bits.Add64(x[2], y[2], c)
	s[3], _ = bits.Add64(x[3], y[3], c) // < 2ℓ < 2^254: no carry out
	var d fe
	var b uint64
	d[0], b = bits.Sub64(s[0], orderL[0], 0)
	d[1], b = bits.Sub64(s[1], orderL[1], b)
	d[2], b = bits.Sub64(s[2], orderL[2], b)
	d[3], b = bits.Sub64(s[3], orderL[3], b)
	if b == 0 {
		s = d
	}
	*z = s
}

// feNeg sets z = -x mod ℓ.
func feNeg(z, x *fe) {
	if *x == (fe{}) {
		*z = fe{}
		return
	}
	var b uint64
	z[0], b = bits.Sub64(orderL[0], x[0], 0)
	z[1], b = bits.Sub64(orderL[1], x[1], b)
	z[2], b = bits.Sub64(orderL[2], x[2], b)
	z[3], _ = bits.Sub64(orderL[3], x[3], b)
}

// feInvMont sets z to the inverse of x, both in Montgomery form, and
// reports false if x is zero. It goes through math/big: a batch needs one.
func feInvMont(z, x *fe) bool {
	var plain fe
	feMul(&plain, x, &fe{1}) // x·R·R^{-1}: the value
	v := feBig(&plain)
	if v.Sign() == 0 {
		return false
	}
	v.ModInverse(v, feBig(&orderL))
	inv := feFromBig(v)
	feMul(z, &inv, &feR2) // to Montgomery form
	return true
}
