package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
)

// chunkBytes is the size of the keystream buffer: small enough to stay in
// L1/L2 cache, large enough to amortize the call overhead.
const chunkBytes = 16 << 10

// zeroChunk is the plaintext whose encryption is the keystream.
var zeroChunk [chunkBytes]byte

// expander expands 16-byte keys into word streams with AES-128-CTR (zero
// IV: every key is derived for one stream only) and adds or subtracts them
// into a vector. The buffer is reused, so expansion allocates only the
// cipher state per call, never per word. Words are read little-endian, so
// clients and server agree across platforms. An expander is not safe for
// concurrent use.
type expander struct {
	buf [chunkBytes]byte
}

// add adds (sub=false) or subtracts (sub=true) PRG(key) into dst modulo
// 2^32.
func (e *expander) add(dst []uint32, key *[16]byte, sub bool) {
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // unreachable: the key length is fixed
	}
	var iv [aes.BlockSize]byte
	s := cipher.NewCTR(blk, iv[:])
	for len(dst) > 0 {
		n := min(len(dst), chunkBytes/4)
		ks := e.buf[:4*n]
		s.XORKeyStream(ks, zeroChunk[:4*n])
		d := dst[:n]
		if sub {
			for i := range d {
				d[i] -= binary.LittleEndian.Uint32(ks[4*i:])
			}
		} else {
			for i := range d {
				d[i] += binary.LittleEndian.Uint32(ks[4*i:])
			}
		}
		dst = dst[n:]
	}
}
