//go:build !amd64 || purego

package vec

// best is Generic: there is no assembly for this architecture (or the
// build tag purego is set).
const best = Generic

// The SIMD kernels are never called here (level is always Generic); these
// keep the dispatch in vec.go compiling.

func dotAVX512(a, b []float32) float32                    { return DotGo(a, b) }
func dotAVX2(a, b []float32) float32                      { return DotGo(a, b) }
func stepAVX512(p, q []float32, t, c, lr float32) float32 { return StepGo(p, q, t, c, lr) }
func stepAVX2(p, q []float32, t, c, lr float32) float32   { return StepGo(p, q, t, c, lr) }
func updateAVX512(p, q []float32, c, g float32)           { UpdateGo(p, q, c, g) }
func updateAVX2(p, q []float32, c, g float32)             { UpdateGo(p, q, c, g) }
func axpyAVX512(y, x []float32, a float32)                { AxpyGo(y, x, a) }
func axpyAVX2(y, x []float32, a float32)                  { AxpyGo(y, x, a) }

func sgdAVX512(es []Rating, u, v []float32, stride, n, ahead int, c, lr float32) float64 {
	return SGDGo(es, u, v, stride, n, c, lr)
}

func sgdAVX2(es []Rating, u, v []float32, stride, n, ahead int, c, lr float32) float64 {
	return SGDGo(es, u, v, stride, n, c, lr)
}

func sgdBiasedAVX512(es []Rating, u, v, bu, bi []float32, stride, n, ahead int, mean, c, lr, cb float32) float64 {
	return SGDBiasedGo(es, u, v, bu, bi, stride, n, mean, c, lr, cb)
}

func sgdBiasedAVX2(es []Rating, u, v, bu, bi []float32, stride, n, ahead int, mean, c, lr, cb float32) float64 {
	return SGDBiasedGo(es, u, v, bu, bi, stride, n, mean, c, lr, cb)
}
