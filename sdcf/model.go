package sdcf

import (
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/ratings"
)

// Model is a trained factorization: U from the clients (gathered by the
// evaluation harness, never by the server) and V from the server.
type Model struct {
	Loss Loss
	Dim  int
	U, V []float32 // row-major, users × Dim and items × Dim
	// Offset holds each user's own mean training rating (squared loss),
	// which stays on the device with u_i; nil for BPR.
	Offset []float32
	Scale  ratings.Scale
}

// Predict returns the predicted rating Offset[u] + u·v clamped to the scale;
// for the BPR loss it returns the ranking score u·v, which is not a rating.
func (m *Model) Predict(u, i int32) float32 {
	s := vec.Dot(m.U[int(u)*m.Dim:(int(u)+1)*m.Dim], m.V[int(i)*m.Dim:(int(i)+1)*m.Dim])
	if m.Loss == BPR {
		return s
	}
	return m.Scale.Clamp(m.Offset[u] + s)
}

// ScoreItems writes the score u·v_j (plus the user's offset, which does not
// change the order) for every item j into dst and returns it.
func (m *Model) ScoreItems(u int32, dst []float32) []float32 {
	n := len(m.V) / m.Dim
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	uv := m.U[int(u)*m.Dim : (int(u)+1)*m.Dim]
	var off float32
	if m.Offset != nil {
		off = m.Offset[u]
	}
	for j := range n {
		dst[j] = off + vec.Dot(uv, m.V[j*m.Dim:(j+1)*m.Dim])
	}
	return dst
}
