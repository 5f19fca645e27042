package shard

import (
	"runtime"
	"sync"

	"github.com/privrec/privrec/secagg"
)

// expandBytes is the keystream buffer size (words are 4 bytes).
const expandBytes = 16 << 10

// addRange adds (sub=false) or subtracts PRG(key)[off : off+len(dst)]
// into dst modulo 2^32, where PRG is secagg's mask generator, expanding
// only that range (secagg.AddMaskRange, with its vector adds). buf is
// unused scratch kept for the callers' signature.
func addRange(dst []uint32, key *[16]byte, off int, sub bool, _ []byte) {
	if err := secagg.AddMaskRange(dst, key, off, sub); err != nil {
		panic(err) // unreachable: offsets are shard starts, never negative
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
