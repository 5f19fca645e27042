package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

const eps32 = 1.0 / (1 << 23)

// levels returns the levels this CPU can run, Generic first.
func levels() []Level {
	ls := []Level{Generic}
	for l := AVX2; l <= Best(); l++ {
		ls = append(ls, l)
	}
	return ls
}

// with runs f with the kernels at level l.
func with(l Level, f func()) {
	prev := SetLevel(l)
	defer SetLevel(prev)
	f()
}

// guarded returns a slice of n random values in [−2, 2) that starts off
// elements into a buffer whose other elements hold the sentinel −7.5, and
// the buffer, so that writes outside the slice can be caught.
func guarded(r *rand.Rand, n, off int) (s, buf []float32) {
	buf = make([]float32, off+n+32)
	for j := range buf {
		buf[j] = -7.5
	}
	s = buf[off : off+n]
	for j := range s {
		s[j] = float32(4*r.Float64() - 2)
	}
	return s, buf
}

func checkGuard(t *testing.T, name string, buf []float32, off, n int) {
	t.Helper()
	for j, x := range buf {
		if (j < off || j >= off+n) && x != -7.5 {
			t.Fatalf("%s: element %d outside the slice [%d, %d) written: %g", name, j, off, off+n, x)
		}
	}
}

// near reports whether got is within tol of want.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestKernelsMatchGo holds every SIMD level to the pure Go kernels at
// every length 0..300, at unaligned offsets, and checks that nothing
// outside the slices is written.
func TestKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range levels()[1:] {
		for n := 0; n <= 300; n++ {
			off := n % 7
			name := fmt.Sprintf("%v/n=%d", l, n)
			a, abuf := guarded(r, n, off)
			b, bbuf := guarded(r, n, off+1)
			var sabs float64
			for j := range a {
				sabs += math.Abs(float64(a[j]) * float64(b[j]))
			}
			dotTol := float64(n+2) * eps32 * sabs

			// Dot.
			var got float32
			with(l, func() { got = Dot(a, b) })
			if want := DotGo(a, b); !near(float64(got), float64(want), 2*dotTol) {
				t.Fatalf("%s: Dot = %g, pure Go %g (tol %g)", name, got, want, 2*dotTol)
			}

			// Update and Step against copies run through the Go kernels.
			c, g := float32(0.97), float32(0.013)
			p0, q0 := append([]float32(nil), a...), append([]float32(nil), b...)
			pw, qw := append([]float32(nil), a...), append([]float32(nil), b...)
			UpdateGo(pw, qw, c, g)
			with(l, func() { Update(a, b, c, g) })
			for j := range a {
				tp := 2 * eps32 * (math.Abs(float64(c*p0[j])) + math.Abs(float64(g*q0[j])))
				tq := 2 * eps32 * (math.Abs(float64(c*q0[j])) + math.Abs(float64(g*p0[j])))
				if !near(float64(a[j]), float64(pw[j]), tp) || !near(float64(b[j]), float64(qw[j]), tq) {
					t.Fatalf("%s: Update at %d: p %g q %g, pure Go %g %g", name, j, a[j], b[j], pw[j], qw[j])
				}
			}
			checkGuard(t, name+" Update p", abuf, off, n)
			checkGuard(t, name+" Update q", bbuf, off+1, n)

			copy(a, p0)
			copy(b, q0)
			copy(pw, p0)
			copy(qw, q0)
			target, lr := float32(0.5), float32(0.01)
			ew := StepGo(pw, qw, target, c, lr)
			var e float32
			with(l, func() { e = Step(a, b, target, c, lr) })
			if !near(float64(e), float64(ew), 2*dotTol+eps32) {
				t.Fatalf("%s: Step error %g, pure Go %g", name, e, ew)
			}
			ge := float64(lr * e)
			for j := range a {
				// The errors differ by up to dotTol, so the gains do.
				dg := math.Abs(float64(lr)) * 2 * dotTol
				tp := 2*eps32*(math.Abs(float64(c*p0[j]))+math.Abs(ge*float64(q0[j]))) + dg*math.Abs(float64(q0[j]))
				tq := 2*eps32*(math.Abs(float64(c*q0[j]))+math.Abs(ge*float64(p0[j]))) + dg*math.Abs(float64(p0[j]))
				if !near(float64(a[j]), float64(pw[j]), tp) || !near(float64(b[j]), float64(qw[j]), tq) {
					t.Fatalf("%s: Step at %d: p %g q %g, pure Go %g %g", name, j, a[j], b[j], pw[j], qw[j])
				}
			}
			checkGuard(t, name+" Step p", abuf, off, n)
			checkGuard(t, name+" Step q", bbuf, off+1, n)

			// Axpy.
			copy(a, p0)
			copy(pw, p0)
			AxpyGo(pw, b, -0.3)
			with(l, func() { Axpy(a, b, -0.3) })
			for j := range a {
				tol := 2 * eps32 * (math.Abs(float64(p0[j])) + math.Abs(0.3*float64(b[j])))
				if !near(float64(a[j]), float64(pw[j]), tol) {
					t.Fatalf("%s: Axpy at %d: %g, pure Go %g", name, j, a[j], pw[j])
				}
			}
			checkGuard(t, name+" Axpy y", abuf, off, n)
			checkGuard(t, name+" Axpy x", bbuf, off+1, n)
		}
	}
}

// TestKernelsExact checks values that every level must get exactly:
// integers small enough that no sum rounds.
func TestKernelsExact(t *testing.T) {
	for _, l := range levels() {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 129, 257} {
			a, b := make([]float32, n), make([]float32, n+3)
			var want float32
			for j := range a {
				a[j], b[j] = float32(j%5-2), float32(j%3+1)
				want += a[j] * b[j]
			}
			var got float32
			with(l, func() { got = Dot(a, b) })
			if got != want {
				t.Errorf("%v: Dot at n=%d = %g, want %g", l, n, got, want)
			}
			p, q := make([]float32, n), make([]float32, n)
			for j := range p {
				p[j], q[j] = float32(j%4), 1
			}
			var e float32
			// t = p·q + 3 gives e = 3; with c = 1 and lr = 0.25 the step adds
			// 0.75·q to p and 0.75·p to q.
			var sum float32
			for _, x := range p {
				sum += x
			}
			with(l, func() { e = Step(p, q, sum+3, 1, 0.25) })
			if e != 3 {
				t.Errorf("%v: Step at n=%d: error %g, want 3", l, n, e)
			}
			for j := range p {
				if wp, wq := float32(j%4)+0.75, 1+0.75*float32(j%4); p[j] != wp || q[j] != wq {
					t.Fatalf("%v: Step at n=%d, element %d: p %g q %g, want %g %g", l, n, j, p[j], q[j], wp, wq)
				}
			}
		}
	}
}

// TestShortSecondOperand checks that a too short b or q panics (a bounds
// check in Go) instead of reading past it.
func TestShortSecondOperand(t *testing.T) {
	for _, l := range levels() {
		for name, f := range map[string]func(){
			"Dot":    func() { Dot(make([]float32, 20), make([]float32, 19)) },
			"Step":   func() { Step(make([]float32, 20), make([]float32, 19), 0, 1, 1) },
			"Update": func() { Update(make([]float32, 20), make([]float32, 19), 1, 1) },
			"Axpy":   func() { Axpy(make([]float32, 20), make([]float32, 19), 1) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v: %s with a short second operand did not panic", l, name)
					}
				}()
				with(l, f)
			}()
		}
	}
}

func TestSetLevelClamps(t *testing.T) {
	t.Logf("best level on this CPU: %v", Best())
	prev := SetLevel(AVX512 + 1)
	defer SetLevel(prev)
	if Current() != Best() {
		t.Errorf("SetLevel above the CPU's best gave %v, want %v", Current(), Best())
	}
	SetLevel(Generic)
	if Current() != Generic {
		t.Errorf("SetLevel(Generic) gave %v", Current())
	}
}

func TestMakeAligned(t *testing.T) {
	for _, n := range []int{0, 1, 3, 16, 17, 100, 1000, 100000} {
		for range 5 {
			s := MakeAligned(n)
			if len(s) != n || cap(s) != n {
				t.Fatalf("MakeAligned(%d): len %d cap %d", n, len(s), cap(s))
			}
			if n > 0 && uintptr(unsafe.Pointer(&s[0]))%64 != 0 {
				t.Fatalf("MakeAligned(%d) at %p, not 64-byte aligned", n, &s[0])
			}
			for _, x := range s {
				if x != 0 {
					t.Fatalf("MakeAligned(%d) not zeroed", n)
				}
			}
			_ = make([]byte, 24) // shift the next allocation
		}
	}
}
