// Package linalg holds the small dense linear algebra of privrec's inner
// loops: k×k solves, k the latent dimension, done once per user or item
// per round, in place and without allocation.
package linalg

import "math"

// CholeskySolve solves A x = b for a symmetric positive definite n×n
// matrix A given by its lower triangle (row-major; the upper triangle is
// not read). A is overwritten by its Cholesky factor L and b by x. It
// reports false, leaving a and b partly overwritten, when A is not
// numerically positive definite (a pivot is not > 0) or x is not finite.
func CholeskySolve(a, b []float64, n int) bool {
	for j := range n {
		s := a[j*n+j]
		for k := range j {
			s -= a[j*n+k] * a[j*n+k]
		}
		if !(s > 0) {
			return false
		}
		l := math.Sqrt(s)
		a[j*n+j] = l
		for i := j + 1; i < n; i++ {
			t := a[i*n+j]
			for k := range j {
				t -= a[i*n+k] * a[j*n+k]
			}
			a[i*n+j] = t / l
		}
	}
	for i := range n { // L y = b
		t := b[i]
		for k := range i {
			t -= a[i*n+k] * b[k]
		}
		b[i] = t / a[i*n+i]
	}
	for i := n - 1; i >= 0; i-- { // Lᵀ x = y
		t := b[i]
		for k := i + 1; k < n; k++ {
			t -= a[k*n+i] * b[k]
		}
		b[i] = t / a[i*n+i]
	}
	for _, x := range b[:n] {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
