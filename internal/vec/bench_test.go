package vec

import (
	"fmt"
	"testing"
)

// The benchmarks run every level this CPU has side by side, named
// .../impl=L/K=k so that benchstat can compare the levels:
//
//	go test -run - -bench . -count 10 ./internal/vec > kernels.txt
//	benchstat -col /impl kernels.txt

func benchLevels(b *testing.B, f func(b *testing.B, k int)) {
	for _, l := range levels() {
		for _, k := range []int{10, 32, 50, 128} {
			b.Run(fmt.Sprintf("impl=%v/K=%d", l, k), func(b *testing.B) {
				prev := SetLevel(l)
				defer SetLevel(prev)
				f(b, k)
			})
		}
	}
}

func benchVecs(k int) (p, q []float32) {
	p, q = make([]float32, k), make([]float32, k)
	for j := range p {
		p[j], q[j] = 0.1*float32(j%7), 0.05*float32(j%5)
	}
	return p, q
}

var sink float32

func BenchmarkDot(b *testing.B) {
	benchLevels(b, func(b *testing.B, k int) {
		p, q := benchVecs(k)
		var s float32
		for b.Loop() {
			s += Dot(p, q)
		}
		sink = s
	})
}

// BenchmarkStep steps through pairs of 256 user and 256 item rows in a
// scrambled order, as SGD does; stepping one pair over and over would time
// the store-to-load latency of the same rows instead.
func BenchmarkStep(b *testing.B) {
	benchLevels(b, func(b *testing.B, k int) {
		const rows = 256
		us, vs := make([]float32, rows*k), make([]float32, rows*k)
		for j := range us {
			us[j], vs[j] = 0.1*float32(j%7), 0.05*float32(j%5)
		}
		var s float32
		j := 0
		for b.Loop() {
			u, v := (j*37)%rows, (j*101+j/rows)%rows
			j++
			s += Step(us[u*k:u*k+k], vs[v*k:v*k+k], 1, 0.999, 1e-3)
		}
		sink = s
	})
}

func BenchmarkAxpy(b *testing.B) {
	benchLevels(b, func(b *testing.B, k int) {
		p, q := benchVecs(k)
		for b.Loop() {
			Axpy(p, q, 1e-6)
		}
	})
}
