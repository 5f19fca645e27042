package ldpop

import (
	"math"

	"github.com/privrec/privrec/internal/linalg"
)

// fitWork holds a client's scratch for fitUser.
type fitWork struct {
	a, m, g, x []float64
}

// fitUser sets u to the minimizer of the user's part of objective (2),
//
//	(1/2N) Σ_j (y_j − u·v_j)² + (λ/2)‖u‖²  subject to ‖u‖ ≤ B,
//
// over her N rated items against V (row-major, k per item): the point the
// paper's SGD converges to, with the norm bound the noise assumes. It
// solves (A + μI)u = g, A = (1/N)Σ v_j v_jᵀ + λI and g = (1/N)Σ y_j v_j,
// with μ = 0 when that solution is inside the ball and otherwise μ > 0
// found by bisection so that ‖u‖ = B (‖u(μ)‖ decreases in μ). It reports
// whether the bound was active. A user with no ratings gets u = 0.
func fitUser(u []float32, items []int32, y []float32, V []float32, k int, lambda, bound float64, w *fitWork) bool {
	clear(u)
	if len(items) == 0 {
		return false
	}
	if len(w.a) != k*k {
		w.a, w.m = make([]float64, k*k), make([]float64, k*k)
		w.g, w.x = make([]float64, k), make([]float64, k)
	}
	a, g := w.a, w.g
	clear(a)
	clear(g)
	inv := 1 / float64(len(items))
	for n, j := range items {
		v := V[int(j)*k : int(j)*k+k]
		yv := float64(y[n])
		for p := range k {
			vp := float64(v[p])
			g[p] += yv * vp * inv
			row := a[p*k : p*k+k]
			for q := 0; q <= p; q++ {
				row[q] += vp * float64(v[q]) * inv
			}
		}
	}
	for p := range k { // a holds the lower triangle, all the solve reads
		a[p*k+p] += lambda
	}
	gn := norm(g)
	if gn == 0 {
		return false
	}
	if solveShifted(a, g, 0, k, w) && norm(w.x) <= bound {
		store(u, w.x)
		return false
	}
	lo, hi := 0.0, gn/bound // ‖u(hi)‖ ≤ ‖g‖/hi = B since A ⪰ 0
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if solveShifted(a, g, mid, k, w) && norm(w.x) <= bound {
			hi = mid
		} else {
			lo = mid
		}
		if hi-lo <= 1e-12*hi {
			break
		}
	}
	if !solveShifted(a, g, hi, k, w) {
		return true // cannot happen for hi > 0; u stays 0
	}
	// Guard against rounding: scale into the ball.
	if nx := norm(w.x); nx > bound {
		for p := range w.x {
			w.x[p] *= bound / nx
		}
	}
	store(u, w.x)
	return true
}

// solveShifted solves (a + μI)x = g into w.x by Cholesky (a's lower
// triangle is read); false when the matrix is not numerically positive
// definite.
func solveShifted(a, g []float64, mu float64, k int, w *fitWork) bool {
	copy(w.m, a)
	for p := range k {
		w.m[p*k+p] += mu
	}
	copy(w.x, g)
	return linalg.CholeskySolve(w.m, w.x, k)
}

func norm(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

func store(dst []float32, x []float64) {
	for p, v := range x {
		dst[p] = float32(v)
	}
}
