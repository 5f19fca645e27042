package model

import "github.com/privrec/privrec/internal/vec"

// sparseMinDim is the shortest user row that ScoreItems and PredictRaw
// check for zeros: EASE-like models store a user's binary history as a
// row of Dim = NumItems entries, almost all zero.
const sparseMinDim = 128

// sparseScoring switches the gathered dot product on; benchmarks turn it
// off to measure the dense path on the same model.
var sparseScoring = true

// sparseUser appends the indices of pu's nonzero entries to buf and
// reports whether they are few enough (at most len(pu)/8) for a gathered
// dot product to beat the dense one. A short row is never sparse.
func sparseUser(pu []float32, buf []int32) ([]int32, bool) {
	if !sparseScoring || len(pu) < sparseMinDim {
		return buf, false
	}
	limit := len(pu) / 8
	for j, x := range pu {
		if x != 0 {
			if len(buf) == limit {
				return buf, false
			}
			buf = append(buf, int32(j))
		}
	}
	return buf, true
}

// gatherDot returns Σ_{j ∈ nz} pu[j]·v[j]: the dot product of pu and v
// when pu is zero outside nz. The terms are summed in the order of nz
// into four accumulators, so ScoreItems and PredictRaw agree exactly.
func gatherDot(pu []float32, nz []int32, v []float32) float32 {
	var s0, s1, s2, s3 float32
	k := 0
	for ; k+4 <= len(nz); k += 4 {
		j0, j1, j2, j3 := nz[k], nz[k+1], nz[k+2], nz[k+3]
		s0 += pu[j0] * v[j0]
		s1 += pu[j1] * v[j1]
		s2 += pu[j2] * v[j2]
		s3 += pu[j3] * v[j3]
	}
	for ; k < len(nz); k++ {
		s0 += pu[nz[k]] * v[nz[k]]
	}
	return (s0 + s1) + (s2 + s3)
}

// userDot returns pu·v, gathered over pu's nonzero entries when pu is a
// long, sparse row (see sparseUser), else with vec.Dot.
func userDot(pu, v []float32) float32 {
	var buf [256]int32
	if nz, ok := sparseUser(pu, buf[:0]); ok {
		return gatherDot(pu, nz, v)
	}
	return vec.Dot(pu, v)
}
