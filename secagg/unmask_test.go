package secagg

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refExpand adds (or subtracts) PRG(key) into dst the plain way: the whole
// AES-128-CTR keystream, words read little-endian one by one.
func refExpand(dst []uint32, key *[16]byte, sub bool) {
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err)
	}
	ks := make([]byte, 4*len(dst))
	cipher.NewCTR(blk, make([]byte, aes.BlockSize)).XORKeyStream(ks, ks)
	for i := range dst {
		w := binary.LittleEndian.Uint32(ks[4*i:])
		if sub {
			dst[i] -= w
		} else {
			dst[i] += w
		}
	}
}

// resultReference is Server.Result written straightforwardly, one client
// at a time: circl's Shamir recovery (recoverSeed), crypto/ecdh, the plain
// expansion. The optimized Result must give the same bits.
func resultReference(s *Server) ([]uint32, error) {
	sum := slices.Clone(s.sum)
	for u := range s.p.N {
		if !s.in3[u] {
			continue
		}
		set := s.self[uint32(u)]
		if set == nil || len(set.holders) < s.p.T {
			return nil, fmt.Errorf("%w: self mask of %d", ErrTooFew, u)
		}
		seed, err := recoverSeed(s.p.T, set.holders, set.values)
		if err != nil {
			return nil, err
		}
		k := selfMaskKey(&seed, &s.p.Seed, uint32(u))
		refExpand(sum, &k, true)
	}
	for v := range s.p.N {
		if !s.sent[v] || s.in3[v] {
			continue
		}
		var surv []uint32
		for _, u := range s.g.Neighbours(uint32(v)) {
			if s.in3[u] {
				surv = append(surv, u)
			}
		}
		if len(surv) == 0 {
			continue
		}
		set := s.mask[uint32(v)]
		if set == nil || len(set.holders) < s.p.T {
			return nil, fmt.Errorf("%w: mask key of %d", ErrTooFew, v)
		}
		seed, err := recoverSeed(s.p.T, set.holders, set.values)
		if err != nil {
			return nil, err
		}
		priv := maskKeyFromSeed(&seed, &s.p.Seed)
		if !bytes.Equal(priv.PublicKey().Bytes(), s.keys[v].MaskKey) {
			return nil, fmt.Errorf("%w: mask key of %d", ErrShares, v)
		}
		for _, u := range surv {
			pub, err := ecdh.X25519().NewPublicKey(s.keys[u].MaskKey)
			if err != nil {
				return nil, err
			}
			k, err := pairwiseKey(priv, pub, &s.p.Seed, uint32(v), u)
			if err != nil {
				return nil, err
			}
			refExpand(sum, &k, u < uint32(v))
		}
	}
	for i := range sum {
		sum[i] &= s.p.mask()
	}
	return sum, nil
}

// roundToResult runs a round sequentially with the clients dropping as
// drop says, up to the server's Result.
func roundToResult(t *testing.T, p Params, in [][]uint32, drop []Phase, seed uint64) *Server {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv, err := NewServer(p)
	must(err)
	rnd := testRand(seed)
	cs := make([]*Client, p.N)
	for u := range cs {
		cs[u], err = NewClient(uint32(u), p, rnd)
		must(err)
		if drop[u] == DropBeforeKeys {
			continue
		}
		m, err := cs[u].AdvertiseKeys()
		must(err)
		must(srv.AddKeys(m))
	}
	kb, err := srv.FinishKeys()
	must(err)
	for _, b := range kb {
		if drop[b.To] == DropBeforeShares {
			continue
		}
		m, err := cs[b.To].ShareKeys(b)
		must(err)
		must(srv.AddShares(m))
	}
	sd, err := srv.FinishShares()
	must(err)
	for _, d := range sd {
		if drop[d.To] == DropBeforeInput {
			continue
		}
		m, err := cs[d.To].MaskedInput(d, in[d.To])
		must(err)
		must(srv.AddMaskedInput(m))
	}
	ur, err := srv.FinishMaskedInput()
	must(err)
	for _, r := range ur {
		if drop[r.To] == DropBeforeUnmask {
			continue
		}
		m, err := cs[r.To].Unmask(r)
		must(err)
		must(srv.AddUnmask(m))
	}
	return srv
}

// TestResultMatchesReference compares the optimized unmasking with
// resultReference on random inputs with dropouts at every phase, vector
// lengths around the workers' coordinate ranges, and fewer bits than 32;
// both must also equal the plain sum.
func TestResultMatchesReference(t *testing.T) {
	tests := []struct {
		n, k, th, bits, l int
		frac              float64
	}{
		{n: 12, k: 11, th: 6, bits: 32, l: 1, frac: 0.25},
		{n: 30, k: 10, th: 5, bits: 32, l: rangeWords + 3, frac: 0.2},
		{n: 40, k: 14, th: 7, bits: 20, l: 2*rangeWords - 1, frac: 0.15},
		{n: 25, k: 24, th: 12, bits: 31, l: 1001, frac: 0.3},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("n=%d/K=%d/T=%d/bits=%d/len=%d", tc.n, tc.k, tc.th, tc.bits, tc.l), func(t *testing.T) {
			p := testParams(tc.n, tc.k, tc.th, tc.bits, tc.l)
			r := rand.New(testRand(uint64(100 + i)))
			in := randomInputs(r, p)
			drop := dropSome(r, tc.n, tc.frac, DropBeforeInput, DropBeforeUnmask, DropBeforeShares, DropBeforeInput)
			srv := roundToResult(t, p, in, drop, uint64(200+i))
			want, err := resultReference(srv)
			if err != nil {
				t.Fatal(err)
			}
			got, err := resultCopy(srv).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Result differs from the reference at %d of %d words", countDiff(got, want), len(want))
			}
			if plain := plainSum(p, in, drop); !slices.Equal(got, plain) {
				t.Fatalf("Result differs from the plain sum at %d of %d words", countDiff(got, plain), len(plain))
			}
		})
	}
}

func countDiff(a, b []uint32) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestResultSpoiledShares: a revealed share changed, or not a scalar, makes
// Result fail as the reference does (ErrShares, or the reference's error
// for a share that still reconstructs some value), never return a sum.
func TestResultSpoiledShares(t *testing.T) {
	p := testParams(20, 10, 5, 32, 64)
	r := rand.New(testRand(5))
	in := randomInputs(r, p)
	drop := dropSome(r, p.N, 0.2, DropBeforeInput)
	for _, tc := range []struct {
		name  string
		self  bool
		spoil func(b []byte)
	}{
		{"self share changed", true, func(b []byte) { b[0] ^= 1 }},
		{"self share not a scalar", true, func(b []byte) { b[31] = 0xff }},
		{"mask share changed", false, func(b []byte) { b[3] ^= 0x10 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := roundToResult(t, p, in, drop, 9)
			sets := srv.mask
			if tc.self {
				sets = srv.self
			}
			owners := slices.Sorted(func(yield func(uint32) bool) {
				for o := range sets {
					if !yield(o) {
						return
					}
				}
			})
			if len(owners) == 0 {
				t.Fatal("no share set to spoil")
			}
			set := sets[owners[0]]
			set.values[0] = slices.Clone(set.values[0])
			tc.spoil(set.values[0])
			_, werr := resultReference(srv)
			_, err := resultCopy(srv).Result()
			if werr == nil || err == nil {
				t.Fatalf("Result error %v, reference error %v: want both errors", err, werr)
			}
			if errors.Is(werr, ErrShares) != errors.Is(err, ErrShares) {
				t.Fatalf("Result error %v, reference error %v", err, werr)
			}
		})
	}
}

// TestAddMaskRange: the expansions of a key over any split of the
// coordinates into shards, each from its own offset, concatenate to the
// whole expansion, for adding and subtracting.
func TestAddMaskRange(t *testing.T) {
	r := rand.New(testRand(8))
	for _, total := range []int{1, 5, 4097, 3*chunkBytes/4 + 7} {
		for _, sub := range []bool{false, true} {
			var key [16]byte
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			base := make([]uint32, total)
			for i := range base {
				base[i] = r.Uint32()
			}
			want := slices.Clone(base)
			refExpand(want, &key, sub)
			// Random cut points, including empty shards and unaligned ones.
			cuts := []int{0, total}
			for range 4 {
				cuts = append(cuts, r.IntN(total+1))
			}
			slices.Sort(cuts)
			got := slices.Clone(base)
			for i := 1; i < len(cuts); i++ {
				a, b := cuts[i-1], cuts[i]
				if err := AddMaskRange(got[a:b], &key, a, sub); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("len %d, sub %v, cuts %v: shards differ from the whole expansion at %d words", total, sub, cuts, countDiff(got, want))
			}
		}
	}
	if err := AddMaskRange(make([]uint32, 1), new([16]byte), -1, false); err == nil {
		t.Fatal("AddMaskRange at offset -1: no error")
	}
}

// TestAddWords holds addWords (AVX2 on amd64) to the plain loop at every
// length up to 100 and a few long ones, adding and subtracting.
func TestAddWords(t *testing.T) {
	r := rand.New(testRand(13))
	lengths := []int{4095, 4096, 4097}
	for n := range 101 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, sub := range []bool{false, true} {
			d := make([]uint32, n)
			w := make([]uint32, n+5) // longer than d: only len(d) words count
			for i := range d {
				d[i] = r.Uint32()
			}
			for i := range w {
				w[i] = r.Uint32()
			}
			want := slices.Clone(d)
			for i := range want {
				if sub {
					want[i] -= w[i]
				} else {
					want[i] += w[i]
				}
			}
			addWords(d, w, sub)
			if !slices.Equal(d, want) {
				t.Fatalf("len %d sub %v: %d words differ", n, sub, countDiff(d, want))
			}
		}
	}
}

// TestMaskStreamsSharded: shards of the masked sum, each removing every
// stream of MaskStreams over its own coordinates with AddMaskRange, give
// Result's sum; and MaskStreams ends the round like Result.
func TestMaskStreamsSharded(t *testing.T) {
	p := testParams(30, 12, 6, 24, 2*rangeWords+77)
	r := rand.New(testRand(21))
	in := randomInputs(r, p)
	drop := dropSome(r, p.N, 0.2, DropBeforeInput, DropBeforeUnmask)
	srv := roundToResult(t, p, in, drop, 22)
	want, err := resultCopy(srv).Result()
	if err != nil {
		t.Fatal(err)
	}
	masked := slices.Clone(srv.sum)
	keys, err := srv.MaskStreams()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.MaskStreams(); !errors.Is(err, ErrState) {
		t.Fatalf("MaskStreams twice: err = %v, want ErrState", err)
	}
	for _, shards := range []int{1, 3, 7} {
		got := slices.Clone(masked)
		for j := range shards {
			a, b := j*len(got)/shards, (j+1)*len(got)/shards
			for _, k := range keys {
				if err := AddMaskRange(got[a:b], &k.Key, a, k.Sub); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range got {
			got[i] &= p.mask()
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d shards: %d of %d words differ from Result", shards, countDiff(got, want), len(want))
		}
	}
}
