package federated

import (
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/ratings"
)

// Model is the predictor a federated run leaves: each client's user vector
// (gathered into U) and the server's V. With UserWeight and ItemWeight set
// (HDPMF) a prediction is rescaled on the device: u·v/(β_u·γ_i).
type Model struct {
	Dim, NumUsers, NumItems int
	U, V                    []float32 // row-major NumUsers×Dim and NumItems×Dim
	// UserWeight (β) and ItemWeight (γ) undo HDPMF's stretch; nil for no
	// rescaling.
	UserWeight, ItemWeight []float32
	// Rated marks users that had training ratings; others (and unknown
	// indices) get the middle of the scale.
	Rated []bool
	Scale ratings.Scale // predictions are clamped to it
}

// mid is the prediction for an unknown user or item.
func (m *Model) mid() float32 { return (m.Scale.Min + m.Scale.Max) / 2 }

// PredictRaw returns the unclamped (rescaled) prediction.
func (m *Model) PredictRaw(u, i int32) float32 {
	if u < 0 || int(u) >= m.NumUsers || i < 0 || int(i) >= m.NumItems || !m.Rated[u] {
		return m.mid()
	}
	k := m.Dim
	p := vec.Dot(m.U[int(u)*k:int(u)*k+k], m.V[int(i)*k:int(i)*k+k])
	if m.UserWeight != nil {
		p /= m.UserWeight[u] * m.ItemWeight[i]
	}
	return p
}

// Predict returns the prediction for user u and item i clamped to the
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
