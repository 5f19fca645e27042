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
