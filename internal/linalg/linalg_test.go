package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestCholeskySolve(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 7
	m := make([]float64, n*n)
	for k := range m {
		m[k] = r.NormFloat64()
	}
	a := make([]float64, n*n) // MᵀM + I
	for i := range n {
		for j := range n {
			for k := range n {
				a[i*n+j] += m[k*n+i] * m[k*n+j]
			}
		}
		a[i*n+i]++
	}
	want := make([]float64, n)
	b := make([]float64, n)
	for i := range want {
		want[i] = r.NormFloat64()
	}
	for i := range n {
		for j := range n {
			b[i] += a[i*n+j] * want[j]
		}
	}
	if !CholeskySolve(append([]float64(nil), a...), b, n) {
		t.Fatal("CholeskySolve failed on a positive definite matrix")
	}
	for i := range b {
		if math.Abs(b[i]-want[i]) > 1e-9 {
			t.Fatalf("x[%d] = %v, want %v", i, b[i], want[i])
		}
	}
}

// TestCholeskySolveRejects checks the false result for matrices that are
// not positive definite.
func TestCholeskySolveRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    []float64
	}{
		{"negative pivot", []float64{1, 0, 2, 1}},       // [[1,2],[2,1]]: eigenvalue −1
		{"zero matrix", []float64{0, 0, 0, 0}},          // singular
		{"NaN entry", []float64{1, 0, math.NaN(), 1}},   // not a number
		{"indefinite diagonal", []float64{-1, 0, 0, 1}}, // first pivot < 0
	} {
		if CholeskySolve(tc.a, []float64{1, 1}, 2) {
			t.Errorf("%s: CholeskySolve reported success", tc.name)
		}
	}
}

func ExampleCholeskySolve() {
	a := []float64{4, 0, 2, 3} // lower triangle of [[4, 2], [2, 3]]
	x := []float64{2, 1}       // b
	CholeskySolve(a, x, 2)
	fmt.Printf("%.3f %.3f\n", x[0], x[1])
	// Output: 0.500 0.000
}
