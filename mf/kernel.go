package mf

import "github.com/privrec/privrec/internal/vec"

// The SGD inner loops. They work on flat float32 slices, allocate nothing
// and make no interface or closure calls; the dot product and the paired
// update are unrolled by four.

// entry is one training rating with its user and item indices.
type entry struct {
	u, i int32
	r    float32
}

// update applies p ← c·p + g·q and q ← c·q + g·p_old elementwise, which is
// the SGD step p += η(e·q − λp), q += η(e·p − λq) with c = 1 − ηλ, g = ηe.
func update(p, q []float32, c, g float32) {
	q = q[:len(p)]
	k := 0
	for ; k+4 <= len(p); k += 4 {
		p0, p1, p2, p3 := p[k], p[k+1], p[k+2], p[k+3]
		q0, q1, q2, q3 := q[k], q[k+1], q[k+2], q[k+3]
		p[k], p[k+1], p[k+2], p[k+3] = c*p0+g*q0, c*p1+g*q1, c*p2+g*q2, c*p3+g*q3
		q[k], q[k+1], q[k+2], q[k+3] = c*q0+g*p0, c*q1+g*p1, c*q2+g*p2, c*q3+g*p3
	}
	for ; k < len(p); k++ {
		p0, q0 := p[k], q[k]
		p[k] = c*p0 + g*q0
		q[k] = c*q0 + g*p0
	}
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
		err := e.r - vec.Dot(p, q)
		sse += float64(err * err)
		update(p, q, c, lr*err)
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
		err := e.r - (mean + *bu + *bi + vec.Dot(p, q))
		sse += float64(err * err)
		g := lr * err
		*bu = cb**bu + g
		*bi = cb**bi + g
		update(p, q, c, g)
	}
	return sse
}
