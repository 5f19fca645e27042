//go:build !purego

package secagg

import "golang.org/x/sys/cpu"

// haveAVX2 selects the AVX2 loops of addWords (words_amd64.s).
var haveAVX2 = cpu.X86.HasAVX2

// addWordsAVX2 adds w[i] into d[i] for i < n, n a multiple of 32.
//
//go:noescape
func addWordsAVX2(d, w *uint32, n int)

// subWordsAVX2 subtracts w[i] from d[i] for i < n, n a multiple of 32.
//
//go:noescape
func subWordsAVX2(d, w *uint32, n int)

// addWords adds (or subtracts) w into d modulo 2^32; len(w) >= len(d).
// The keystream is added 32 words at a time with AVX2 where the CPU has
// it: the plain loop cost more than the AES-CTR that made the words.
func addWords(d, w []uint32, sub bool) {
	if n := len(d) &^ 31; haveAVX2 && n > 0 {
		w = w[:len(d)]
		if sub {
			subWordsAVX2(&d[0], &w[0], n)
		} else {
			addWordsAVX2(&d[0], &w[0], n)
		}
		d, w = d[n:], w[n:]
	}
	addWordsGo(d, w, sub)
}
