package mf

import "github.com/privrec/privrec/internal/vec"

// The SGD inner loop is vec.SGD (vec.SGDBiased): one pass over a block's
// ratings, in SIMD assembly where the CPU has it (see package vec), which
// fuses each rating's dot product and paired update and prefetches the
// rows of the ratings ahead.

// entry is one training rating with its user and item indices (positions
// in the grid's row order).
type entry = vec.Rating

// step holds the constants of one block pass.
type step struct {
	stride int // of a factor row
	n      int // the elements of a row the kernels work on
	mean   float32
	c, lr  float32 // c = 1 − lr·reg
	cb     float32 // cb = 1 − lr·regBias
	biased bool
	u, v   []float32
	bu, bi []float32
}

// sgd runs one SGD pass over es in order and returns the sum of the squared
// errors seen before each update. Every index in es is in range: arrange
// builds es from data checkIndices accepted.
func (s *step) sgd(es []entry) float64 {
	if s.biased {
		return vec.SGDBiased(es, s.u, s.v, s.bu, s.bi, s.stride, s.n, s.mean, s.c, s.lr, s.cb)
	}
	return vec.SGD(es, s.u, s.v, s.stride, s.n, s.c, s.lr)
}
