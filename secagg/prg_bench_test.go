package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/crypto/chacha20"
)

const benchWords = 1 << 20

func addKeystream(dst []uint32, ks []byte) {
	for i := range dst {
		dst[i] += binary.LittleEndian.Uint32(ks[4*i:])
	}
}

func BenchmarkPRGCandidates(b *testing.B) {
	dst := make([]uint32, benchWords)
	key := make([]byte, 32)
	zero := make([]byte, chunkBytes)
	buf := make([]byte, chunkBytes)
	b.Run("AES128CTR", func(b *testing.B) {
		b.SetBytes(4 * benchWords)
		for b.Loop() {
			blk, _ := aes.NewCipher(key[:16])
			s := cipher.NewCTR(blk, make([]byte, 16))
			for off := 0; off < len(dst); off += chunkBytes / 4 {
				s.XORKeyStream(buf, zero)
				addKeystream(dst[off:off+chunkBytes/4], buf)
			}
		}
	})
	b.Run("ChaCha8", func(b *testing.B) {
		b.SetBytes(4 * benchWords)
		for b.Loop() {
			r := rand.NewChaCha8([32]byte(key))
			for off := 0; off < len(dst); off += chunkBytes / 4 {
				r.Read(buf)
				addKeystream(dst[off:off+chunkBytes/4], buf)
			}
		}
	})
	b.Run("ChaCha8Uint64", func(b *testing.B) {
		b.SetBytes(4 * benchWords)
		for b.Loop() {
			r := rand.NewChaCha8([32]byte(key))
			for i := 0; i < len(dst); i += 2 {
				v := r.Uint64()
				dst[i] += uint32(v)
				dst[i+1] += uint32(v >> 32)
			}
		}
	})
	b.Run("ChaCha20", func(b *testing.B) {
		b.SetBytes(4 * benchWords)
		for b.Loop() {
			s, _ := chacha20.NewUnauthenticatedCipher(key, make([]byte, 12))
			for off := 0; off < len(dst); off += chunkBytes / 4 {
				s.XORKeyStream(buf, zero)
				addKeystream(dst[off:off+chunkBytes/4], buf)
			}
		}
	})
}
