package ldpop

import (
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/ratings"
)

// Model is the predictor a run leaves: each device's u_i (gathered into U)
// and the server's V. A prediction is u_i·v_j (the paper has no bias
// term), clamped to the rating scale.
type Model struct {
	Dim, NumUsers, NumItems int
	U, V                    []float32 // row-major NumUsers×Dim and NumItems×Dim
	// Rated marks users that had training ratings; the others (and unknown
	// indices) get the middle of the scale.
	Rated []bool
	Scale ratings.Scale
}

func (m *Model) mid() float32 { return (m.Scale.Min + m.Scale.Max) / 2 }

// PredictRaw returns u_i·v_j unclamped.
func (m *Model) PredictRaw(u, i int32) float32 {
	if u < 0 || int(u) >= m.NumUsers || i < 0 || int(i) >= m.NumItems || !m.Rated[u] {
		return m.mid()
	}
	k := m.Dim
	return vec.Dot(m.U[int(u)*k:int(u)*k+k], m.V[int(i)*k:int(i)*k+k])
}

// Predict returns the prediction for user u and item i, clamped to the
// scale.
func (m *Model) Predict(u, i int32) float32 { return m.Scale.Clamp(m.PredictRaw(u, i)) }

// ScoreItems writes the unclamped score of every item for user u into dst
// (grown if needed) and returns it.
func (m *Model) ScoreItems(u int32, dst []float32) []float32 {
	if cap(dst) < m.NumItems {
		dst = make([]float32, m.NumItems)
	}
	dst = dst[:m.NumItems]
	for i := range dst {
		dst[i] = m.PredictRaw(u, int32(i))
	}
	return dst
}
