package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sgdCase is a random block of ratings over nu users and ni items with
// rows n wide at the given stride; the padding holds the sentinel −7.5.
type sgdCase struct {
	es             []Rating
	u, v, bu, bi   []float32
	stride, n, nes int
}

func newSGDCase(r *rand.Rand, nu, ni, n, stride, count int) sgdCase {
	c := sgdCase{stride: stride, n: n, nes: count}
	row := func(rows int) []float32 {
		x := make([]float32, rows*stride)
		for j := range x {
			if j%stride < n {
				x[j] = float32(0.3 * r.NormFloat64())
			} else {
				x[j] = -7.5
			}
		}
		return x
	}
	c.u, c.v = row(nu), row(ni)
	c.bu, c.bi = make([]float32, nu), make([]float32, ni)
	for j := range c.bu {
		c.bu[j] = float32(0.1 * r.NormFloat64())
	}
	for j := range c.bi {
		c.bi[j] = float32(0.1 * r.NormFloat64())
	}
	for range count {
		c.es = append(c.es, Rating{U: int32(r.IntN(nu)), I: int32(r.IntN(ni)), R: float32(1 + r.IntN(5))})
	}
	return c
}

func (c sgdCase) clone() sgdCase {
	d := c
	d.u, d.v, d.bu, d.bi = slices.Clone(c.u), slices.Clone(c.v), slices.Clone(c.bu), slices.Clone(c.bi)
	return d
}

func closeSlices(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	for j := range got {
		if math.Abs(float64(got[j]-want[j])) > tol || (want[j] == -7.5) != (got[j] == -7.5) {
			t.Fatalf("%s[%d] = %g, pure Go %g", name, j, got[j], want[j])
		}
	}
}

// TestSGDMatchesGo runs a pass of SGD and SGDBiased at every SIMD level
// against the pure Go pass: the factors, biases and the sum of squared
// errors must agree within float32 rounding, the row padding must stay
// untouched, at every prefetch distance.
func TestSGDMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const mean, c, lr, cb = 3.5, 1 - 0.01*0.05, 0.01, 1 - 0.01*0.01
	for _, l := range levels()[1:] {
		for _, n := range []int{1, 3, 8, 10, 16, 29, 32, 50, 64, 128} {
			for _, pad := range []int{0, 5} {
				for _, ahead := range []int{0, 1, 2, 1000} {
					name := fmt.Sprintf("%v/n=%d/stride=%d/ahead=%d", l, n, n+pad, ahead)
					base := newSGDCase(r, 40, 30, n, n+pad, 600)
					for _, biased := range []bool{false, true} {
						want, got := base.clone(), base.clone()
						var wsse, gsse float64
						if biased {
							wsse = SGDBiasedGo(want.es, want.u, want.v, want.bu, want.bi, want.stride, n, mean, c, lr, cb)
						} else {
							wsse = SGDGo(want.es, want.u, want.v, want.stride, n, c, lr)
						}
						with(l, func() {
							prev := SetPrefetch(ahead)
							defer SetPrefetch(prev)
							if biased {
								gsse = SGDBiased(got.es, got.u, got.v, got.bu, got.bi, got.stride, n, mean, c, lr, cb)
							} else {
								gsse = SGD(got.es, got.u, got.v, got.stride, n, c, lr)
							}
						})
						name := fmt.Sprintf("%s/biased=%v", name, biased)
						if math.Abs(gsse-wsse) > 1e-4*wsse {
							t.Fatalf("%s: sse %g, pure Go %g", name, gsse, wsse)
						}
						closeSlices(t, name+" u", got.u, want.u, 1e-4)
						closeSlices(t, name+" v", got.v, want.v, 1e-4)
						closeSlices(t, name+" bu", got.bu, want.bu, 1e-4)
						closeSlices(t, name+" bi", got.bi, want.bi, 1e-4)
						if slices.Equal(got.u, base.u) || (biased && slices.Equal(got.bu, base.bu)) {
							t.Fatalf("%s: nothing was updated", name)
						}
					}
				}
			}
		}
	}
}

// TestSGDEmpty checks that an empty block is a no-op at every level.
func TestSGDEmpty(t *testing.T) {
	for _, l := range levels() {
		with(l, func() {
			if s := SGD(nil, nil, nil, 4, 4, 1, 1); s != 0 {
				t.Errorf("%v: SGD of no ratings = %g", l, s)
			}
			if s := SGDBiased(nil, nil, nil, nil, nil, 4, 4, 0, 1, 1, 1); s != 0 {
				t.Errorf("%v: SGDBiased of no ratings = %g", l, s)
			}
		})
	}
}
