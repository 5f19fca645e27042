package mf

import "github.com/privrec/privrec/internal/vec"

// The SGD inner loops. They work on flat float32 slices, allocate nothing
// and make no interface or closure calls; each rating is one call of
// vec.Step, which fuses the dot product and the paired update (SIMD where
// the CPU has it, see package vec).

// entry is one training rating with its user and item indices.
type entry struct {
	u, i int32
	r    float32
}

// step holds the constants of one block pass.
type step struct {
	dim    int
	mean   float32
	c, lr  float32 // c = 1 − lr·reg
	cb     float32 // cb = 1 − lr·regBias
	biased bool
	u, v   []float32
	bu, bi []float32
}

// sgd runs one SGD pass over es in order and returns the sum of the squared
// errors seen before each update.
func (s *step) sgd(es []entry) float64 {
	if s.biased {
		return s.sgdBiased(es)
	}
	k := s.dim
	U, V := s.u, s.v
	c, lr := s.c, s.lr
	var sse float64
	for _, e := range es {
		uo, io := int(e.u)*k, int(e.i)*k
		p := U[uo : uo+k : uo+k]
		q := V[io : io+k : io+k]
		err := vec.Step(p, q, e.r, c, lr)
		sse += float64(err * err)
	}
	return sse
}

func (s *step) sgdBiased(es []entry) float64 {
	k := s.dim
	U, V, BU, BI := s.u, s.v, s.bu, s.bi
	c, lr, cb, mean := s.c, s.lr, s.cb, s.mean
	var sse float64
	for _, e := range es {
		uo, io := int(e.u)*k, int(e.i)*k
		p := U[uo : uo+k : uo+k]
		q := V[io : io+k : io+k]
		bu, bi := &BU[e.u], &BI[e.i]
		err := vec.Step(p, q, e.r-(mean+*bu+*bi), c, lr)
		sse += float64(err * err)
		g := lr * err
		*bu = cb**bu + g
		*bi = cb**bi + g
	}
	return sse
}
