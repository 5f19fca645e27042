package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// chunkBytes is the size of the keystream buffer: small enough to stay in
// L1/L2 cache, large enough to amortize the call overhead.
const chunkBytes = 16 << 10

// zeroChunk is the plaintext whose encryption is the keystream.
var zeroChunk [chunkBytes]byte

// littleEndian reports whether the machine stores words little-endian, so
// that the keystream buffer can be read as words in place.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// expander expands 16-byte keys into word streams with AES-128-CTR (zero
// IV: every key is derived for one stream only) and adds or subtracts them
// into a vector. The buffer is reused, so expansion allocates only the
// cipher state per call, never per word. Words are read little-endian, so
// clients and server agree across platforms. An expander is not safe for
// concurrent use.
type expander struct {
	buf [chunkBytes / 4]uint32 // the keystream, as bytes through bytes()
}

func (e *expander) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&e.buf[0])), chunkBytes)
}

// add adds (sub=false) or subtracts (sub=true) PRG(key) into dst modulo
// 2^32.
func (e *expander) add(dst []uint32, key *[16]byte, sub bool) {
	e.addAt(dst, key, 0, sub)
}

// addAt adds (sub=false) or subtracts (sub=true) words [off, off+len(dst))
// of PRG(key) into dst modulo 2^32, without expanding words [0, off): the
// CTR counter starts at the block holding word off.
func (e *expander) addAt(dst []uint32, key *[16]byte, off int, sub bool) {
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // unreachable: the key length is fixed
	}
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off)/4) // 4 words a block
	s := cipher.NewCTR(blk, iv[:])
	if skip := off % 4; skip > 0 && len(dst) > 0 {
		var b [aes.BlockSize]byte
		s.XORKeyStream(b[:], b[:])
		n := min(len(dst), 4-skip)
		addWordsLE(dst[:n], b[4*skip:4*(skip+n)], sub)
		dst = dst[n:]
	}
	for len(dst) > 0 {
		n := min(len(dst), chunkBytes/4)
		ks := e.bytes()[:4*n]
		s.XORKeyStream(ks, zeroChunk[:4*n])
		d := dst[:n]
		if littleEndian {
			addWords(d, e.buf[:n], sub)
		} else {
			addWordsLE(d, ks, sub)
		}
		dst = dst[n:]
	}
}

// addWordsGo adds (or subtracts) w into d modulo 2^32; len(w) >= len(d).
// It is addWords without SIMD, and its reference in the tests.
func addWordsGo(d, w []uint32, sub bool) {
	w = w[:len(d)]
	if sub {
		for i := range d {
			d[i] -= w[i]
		}
		return
	}
	for i := range d {
		d[i] += w[i]
	}
}

// addWordsLE adds (or subtracts) the little-endian words of ks into d.
func addWordsLE(d []uint32, ks []byte, sub bool) {
	ks = ks[:4*len(d)]
	for i := range d {
		w := binary.LittleEndian.Uint32(ks[4*i:])
		if sub {
			d[i] -= w
		} else {
			d[i] += w
		}
	}
}

// AddMaskRange adds (sub=false) or subtracts (sub=true) into dst, modulo
// 2^32, the words [off, off+len(dst)) of the mask stream of key — the
// AES-128-CTR stream (zero IV, words little-endian) that clients and
// server expand every self and pairwise mask with — without expanding
// words [0, off). A sharded aggregator that holds coordinates [a, b) of
// the masked sum removes a mask with AddMaskRange(sum[a:b], key, a, sub);
// the shards' ranges together give exactly the whole expansion.
func AddMaskRange(dst []uint32, key *[16]byte, off int, sub bool) error {
	if off < 0 {
		return fmt.Errorf("secagg: AddMaskRange at offset %d", off)
	}
	e := expanders.Get().(*expander)
	defer expanders.Put(e)
	e.addAt(dst, key, off, sub)
	return nil
}
