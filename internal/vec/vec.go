// Package vec holds the float32 vector kernels the training loops share:
// the dot product, the fused SGD step, the paired update, axpy, and a
// whole block's SGD pass.
//
// Each kernel has a pure Go version (DotGo, StepGo, UpdateGo, AxpyGo,
// SGDGo, SGDBiasedGo), unrolled by four so that the compiler keeps
// independent sums in registers, and on amd64 an AVX-512 and an AVX2+FMA
// version. The exported entry points (Dot, Step, Update, Axpy, SGD,
// SGDBiased) pick one by the Level chosen once at start-up from the CPU
// (golang.org/x/sys/cpu): AVX-512 (F and DQ) if present, else AVX2 with
// FMA, else pure Go. The environment variable PRIVREC_SIMD=off forces the
// pure Go kernels, and SetLevel switches in tests and benchmarks. The pure
// Go loops are the reference: the tests hold the SIMD kernels to them
// within float32 rounding at every length 0..300.
//
// SGD runs a block of ratings in one call: per rating the error, the
// paired update of the two factor rows and (SGDBiased) the biases, and a
// prefetch of the rows of the rating two places ahead. A caller that pads
// its rows to whole cache lines (MakeAligned, a stride that is a multiple
// of 16) and runs the kernels over the padding avoids every tail loop;
// package mf does.
//
// The kernels do not give the same bits as the pure Go loops: they sum the
// dot product in another order and fuse multiply and add. Training with
// them is still deterministic on one machine, at any number of workers,
// but a model trained on a CPU with AVX-512 differs in the last bits from
// one trained on a CPU without it (or with PRIVREC_SIMD=off).
//
// # Why generated assembly, not simd/archsimd
//
// Go 1.26's simd/archsimd package needs GOEXPERIMENT=simd at build time;
// a plain go build, go run or go test (what the README and CI use) would
// not see it and would silently fall back to the pure Go loops, so the
// fast path would be off by default. The amd64 kernels are therefore Go
// assembly (vec_amd64.s), generated with avo (github.com/mmcloughlin/avo
// v0.5.0, from the Go module proxy, pinned in go.mod) by the program in
// ./asm, which is committed:
//
//	go generate ./internal/vec
//
// Assembly functions are not inlined, so a call costs a few nanoseconds;
// Step pays that once per rating, SGD once per block. The build tag
// purego drops the assembly.
package vec

import (
	"os"
	"strings"
	"unsafe"
)

//go:generate go run github.com/privrec/privrec/tools/vecasm -out vec_amd64.s -stubs stubs_amd64.go

// Level is a kernel implementation.
type Level int

// The kernel levels, slowest first.
const (
	Generic Level = iota // pure Go
	AVX2                 // AVX2 and FMA, 8 lanes
	AVX512               // AVX-512 F and DQ, 16 lanes
)

// String returns the level's name: generic, avx2 or avx512.
func (l Level) String() string {
	switch l {
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return "generic"
}

// level is the kernel the exported entry points use.
var level = detect()

// Best returns the fastest level this CPU supports, ignoring
// PRIVREC_SIMD.
func Best() Level { return best }

// Current returns the level in use.
func Current() Level { return level }

func detect() Level {
	if v := strings.ToLower(os.Getenv("PRIVREC_SIMD")); v == "off" || v == "0" || v == "generic" || v == "purego" {
		return Generic
	}
	return best
}

// SetLevel makes the kernels use l, or the best level this CPU supports
// if it is below l, and returns the previous level. It is meant for tests
// and benchmarks, and must not be called while kernels run.
func SetLevel(l Level) Level {
	prev := level
	level = min(l, best)
	return prev
}

// Dot returns a·b; len(b) must be at least len(a).
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	switch level {
	case AVX512:
		return dotAVX512(a, b)
	case AVX2:
		return dotAVX2(a, b)
	}
	return DotGo(a, b)
}

// Step is one SGD step on the pair (p, q) toward the target t: it computes
// the error e = t − p·q, applies p ← c·p + lr·e·q and q ← c·q + lr·e·p
// (both with the old p and q), and returns e. With c = 1 − lr·λ this is
// p += lr(e·q − λp), q += lr(e·p − λq). len(q) must be at least len(p).
func Step(p, q []float32, t, c, lr float32) float32 {
	q = q[:len(p)]
	switch level {
	case AVX512:
		return stepAVX512(p, q, t, c, lr)
	case AVX2:
		return stepAVX2(p, q, t, c, lr)
	}
	return StepGo(p, q, t, c, lr)
}

// Update applies p ← c·p + g·q and q ← c·q + g·p elementwise (both with
// the old values); len(q) must be at least len(p).
func Update(p, q []float32, c, g float32) {
	q = q[:len(p)]
	switch level {
	case AVX512:
		updateAVX512(p, q, c, g)
	case AVX2:
		updateAVX2(p, q, c, g)
	default:
		UpdateGo(p, q, c, g)
	}
}

// Axpy adds a·x to y elementwise; len(x) must be at least len(y).
func Axpy(y, x []float32, a float32) {
	x = x[:len(y)]
	switch level {
	case AVX512:
		axpyAVX512(y, x, a)
	case AVX2:
		axpyAVX2(y, x, a)
	default:
		AxpyGo(y, x, a)
	}
}

// Rating is one training rating: the row indices of its user and item
// factor vectors and its value.
type Rating struct {
	U, I int32
	R    float32
}

// prefetchAhead is how many ratings ahead SGD prefetches the factor rows.
var prefetchAhead = 2

// SetPrefetch makes SGD prefetch the rows of the rating ahead places on
// (0: none) and returns the previous setting. It is meant for benchmarks
// and must not be called while kernels run.
func SetPrefetch(ahead int) int {
	prev := prefetchAhead
	prefetchAhead = max(ahead, 0)
	return prev
}

// SGD runs one pass of SGD over es in order: for each rating, Step on the
// user row u[U·stride:][:n] and the item row v[I·stride:][:n] toward R.
// It returns the sum of the squared errors (each squared in float32,
// summed in float64).
//
// The SIMD versions do not check the indices: the caller guarantees that
// every U·stride+n ≤ len(u) and I·stride+n ≤ len(v) (the pure Go version
// panics otherwise). n ≤ stride.
func SGD(es []Rating, u, v []float32, stride, n int, c, lr float32) float64 {
	switch level {
	case AVX512:
		return sgdAVX512(es, u, v, stride, n, prefetchAhead, c, lr)
	case AVX2:
		return sgdAVX2(es, u, v, stride, n, prefetchAhead, c, lr)
	}
	return SGDGo(es, u, v, stride, n, c, lr)
}

// SGDBiased is SGD for the model μ + b_u + b_i + p·q: the target of Step
// is R − (μ + b_u + b_i), and then both biases b ← cb·b + lr·e. The
// caller guarantees the indices as for SGD, and also U < len(bu) and
// I < len(bi).
func SGDBiased(es []Rating, u, v, bu, bi []float32, stride, n int, mean, c, lr, cb float32) float64 {
	switch level {
	case AVX512:
		return sgdBiasedAVX512(es, u, v, bu, bi, stride, n, prefetchAhead, mean, c, lr, cb)
	case AVX2:
		return sgdBiasedAVX2(es, u, v, bu, bi, stride, n, prefetchAhead, mean, c, lr, cb)
	}
	return SGDBiasedGo(es, u, v, bu, bi, stride, n, mean, c, lr, cb)
}

// SGDGo is the pure Go SGD.
func SGDGo(es []Rating, u, v []float32, stride, n int, c, lr float32) float64 {
	var sse float64
	for _, e := range es {
		uo, io := int(e.U)*stride, int(e.I)*stride
		err := StepGo(u[uo:uo+n:uo+n], v[io:io+n:io+n], e.R, c, lr)
		sse += float64(err * err)
	}
	return sse
}

// SGDBiasedGo is the pure Go SGDBiased.
func SGDBiasedGo(es []Rating, u, v, bu, bi []float32, stride, n int, mean, c, lr, cb float32) float64 {
	var sse float64
	for _, e := range es {
		uo, io := int(e.U)*stride, int(e.I)*stride
		b, d := &bu[e.U], &bi[e.I]
		err := StepGo(u[uo:uo+n:uo+n], v[io:io+n:io+n], e.R-(mean+*b+*d), c, lr)
		sse += float64(err * err)
		g := lr * err
		*b = cb**b + g
		*d = cb**d + g
	}
	return sse
}

// MakeAligned returns a zeroed slice of n float32 whose first element is
// aligned to 64 bytes, a cache line.
func MakeAligned(n int) []float32 {
	const line = 16 // float32 per 64 bytes
	s := make([]float32, n+line-1)
	if len(s) == 0 {
		return s
	}
	off := int(uintptr(unsafe.Pointer(&s[0]))%64) / 4
	if off != 0 {
		off = line - off
	}
	return s[off : off+n : off+n]
}

// DotGo is the pure Go Dot.
func DotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	k := 0
	for ; k+4 <= len(a); k += 4 {
		s0 += a[k] * b[k]
		s1 += a[k+1] * b[k+1]
		s2 += a[k+2] * b[k+2]
		s3 += a[k+3] * b[k+3]
	}
	for ; k < len(a); k++ {
		s0 += a[k] * b[k]
	}
	return (s0 + s1) + (s2 + s3)
}

// StepGo is the pure Go Step.
func StepGo(p, q []float32, t, c, lr float32) float32 {
	e := t - DotGo(p, q)
	UpdateGo(p, q, c, lr*e)
	return e
}

// UpdateGo is the pure Go Update.
func UpdateGo(p, q []float32, c, g float32) {
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

// AxpyGo is the pure Go Axpy.
func AxpyGo(y, x []float32, a float32) {
	x = x[:len(y)]
	k := 0
	for ; k+4 <= len(y); k += 4 {
		y[k] += a * x[k]
		y[k+1] += a * x[k+1]
		y[k+2] += a * x[k+2]
		y[k+3] += a * x[k+3]
	}
	for ; k < len(y); k++ {
		y[k] += a * x[k]
	}
}
