package secagg

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFieldArithmetic holds the Montgomery arithmetic to math/big on
// random and edge values.
func TestFieldArithmetic(t *testing.T) {
	r := rand.New(testRand(11))
	l := feBig(&orderL)
	if want, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10); l.Cmp(want) != 0 {
		t.Fatalf("ℓ = %v, want %v", l, want)
	}
	rinv := new(big.Int).ModInverse(new(big.Int).Lsh(big.NewInt(1), 256), l)
	random := func() fe {
		switch r.IntN(4) {
		case 0:
			return fe{}
		case 1:
			return feFromBig(new(big.Int).Sub(l, big.NewInt(int64(1+r.IntN(3)))))
		default:
			b := make([]byte, 32)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return feFromBig(new(big.Int).Mod(new(big.Int).SetBytes(b), l))
		}
	}
	for range 2000 {
		x, y := random(), random()
		var z fe
		feMul(&z, &x, &y)
		want := new(big.Int).Mul(feBig(&x), feBig(&y))
		want.Mul(want, rinv).Mod(want, l)
		if feBig(&z).Cmp(want) != 0 {
			t.Fatalf("feMul(%v, %v) = %v, want %v", feBig(&x), feBig(&y), feBig(&z), want)
		}
		feAdd(&z, &x, &y)
		if want := new(big.Int).Add(feBig(&x), feBig(&y)); feBig(&z).Cmp(want.Mod(want, l)) != 0 {
			t.Fatalf("feAdd(%v, %v) = %v", feBig(&x), feBig(&y), feBig(&z))
		}
		feNeg(&z, &x)
		if want := new(big.Int).Neg(feBig(&x)); feBig(&z).Cmp(want.Mod(want, l)) != 0 {
			t.Fatalf("feNeg(%v) = %v", feBig(&x), feBig(&z))
		}
		var xm, inv, one fe
		feMul(&xm, &x, &feR2)
		if ok := feInvMont(&inv, &xm); ok != (x != fe{}) {
			t.Fatalf("feInvMont(%v) reported %v", feBig(&x), ok)
		} else if ok {
			feMul(&one, &inv, &xm)
			if one != feR {
				t.Fatalf("x · 1/x = %v in Montgomery form, want R", feBig(&one))
			}
		}
	}
}

// TestLagrangeMatchesRecoverSeed checks the batched reconstruction
// against recoverSeed (circl's) on random seeds, holder sets and
// thresholds, with some shares spoiled: the same seed, or an error of the
// same kind, for every set.
func TestLagrangeMatchesRecoverSeed(t *testing.T) {
	r := rand.New(testRand(12))
	for _, th := range []int{1, 2, 3, 7, 31} {
		l := newLagrange(th)
		var sets []*shareSet
		for k := range 40 {
			var seed [SeedSize]byte
			for i := range seed {
				seed[i] = byte(r.Uint32())
			}
			n := th + r.IntN(4)
			if k == 0 {
				n = th - 1 // too few
			}
			ids := r.Perm(1 << 20)[:max(n, 0)]
			holders := make([]uint32, len(ids))
			for i, v := range ids {
				holders[i] = uint32(v)
			}
			if k == 1 && n > 0 {
				holders[0] = 1<<32 - 1 // the largest ID: x = 2^32
			}
			vals, err := shareSeed(testRand(uint64(k)), &seed, max(th, 1), holders)
			if err != nil {
				t.Fatal(err)
			}
			switch k % 5 {
			case 2: // a share changed: a wrong value (or, rarely, still a seed)
				if n > 0 {
					vals[r.IntN(min(n, th))][0] ^= 1
				}
			case 3: // not a canonical scalar
				if n > 0 {
					vals[r.IntN(min(n, th))][31] = 0xff
				}
			}
			sets = append(sets, &shareSet{holders: holders, values: vals})
		}
		seeds := make([][SeedSize]byte, len(sets))
		errs := make([]error, len(sets))
		l.recover(sets, seeds, errs)
		for k, set := range sets {
			want, werr := recoverSeed(th, set.holders, set.values)
			switch {
			case (werr == nil) != (errs[k] == nil):
				t.Fatalf("T=%d set %d: error %v, recoverSeed's %v", th, k, errs[k], werr)
			case werr != nil && errors.Is(werr, ErrShares) != errors.Is(errs[k], ErrShares):
				t.Fatalf("T=%d set %d: error %v, recoverSeed's %v", th, k, errs[k], werr)
			case werr == nil && seeds[k] != want:
				t.Fatalf("T=%d set %d: seed %x, recoverSeed's %x", th, k, seeds[k], want)
			}
			if werr != nil && werr.Error() != errs[k].Error() {
				t.Errorf("T=%d set %d: error %q, recoverSeed's %q", th, k, errs[k], werr)
			}
		}
		if !slices.ContainsFunc(errs, func(e error) bool { return e == nil }) {
			t.Fatalf("T=%d: no set reconstructed", th)
		}
	}
}
