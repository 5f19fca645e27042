package shard

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"runtime"
	"sync"

	"github.com/privrec/privrec/secagg"
)

// expandBytes is the keystream buffer size (words are 4 bytes).
const expandBytes = 16 << 10

var zeroBuf [expandBytes]byte

// addRange adds (sub=false) or subtracts PRG(key)[off : off+len(dst)]
// into dst modulo 2^32, where PRG is secagg's mask generator: AES-128-CTR
// with a zero IV, word i little-endian at keystream byte 4i. It seeks to
// word off by starting the counter at block off/4 and discarding the
// first off mod 4 words, so a shard expands only its own range. buf is
// scratch of expandBytes bytes. (Package secagg may grow its own range
// expansion; this one is tested against full expansions.)
func addRange(dst []uint32, key *[16]byte, off int, sub bool, buf []byte) {
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // unreachable: the key length is fixed
	}
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off/4))
	s := cipher.NewCTR(blk, iv[:])
	if skip := 4 * (off % 4); skip > 0 {
		s.XORKeyStream(buf[:skip], zeroBuf[:skip])
	}
	for len(dst) > 0 {
		n := min(len(dst), expandBytes/4)
		ks := buf[:4*n]
		s.XORKeyStream(ks, zeroBuf[:4*n])
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

// Unmask removes the mask streams from sum, which holds the words
// [off, off+len(sum)) of the sum of the masked inputs, and reduces it
// modulo 2^bits, in place. The streams are split over GOMAXPROCS
// workers, each adding into its own accumulator.
func Unmask(sum []uint32, off int, streams []secagg.MaskStream, bits int) {
	workers := min(runtime.GOMAXPROCS(0), len(streams))
	accs := make([][]uint32, workers)
	var wg sync.WaitGroup
	for w := range workers {
		acc := sum
		if w > 0 {
			acc = make([]uint32, len(sum))
			accs[w] = acc
		}
		wg.Go(func() {
			buf := make([]byte, expandBytes)
			for i := w; i < len(streams); i += workers {
				addRange(acc, &streams[i].Key, off, streams[i].Sub, buf)
			}
		})
	}
	wg.Wait()
	for _, acc := range accs[min(1, workers):] {
		for i, x := range acc {
			sum[i] += x
		}
	}
	mask := uint32(1<<bits - 1)
	for i := range sum {
		sum[i] &= mask
	}
}
