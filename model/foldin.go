package model

import (
	"errors"
	"fmt"
	"slices"

	"github.com/privrec/privrec/internal/linalg"
)

// FoldIn returns a model of one user, id, built on m's items: the user's
// offset is the mean of their ratings less what m already predicts for
// them without a user (the global mean plus the item's bias, when m has
// them; for a model without biases, the mean rating) and their vector u
// solves the ridge regression min_u Σ (r_i − base_i − u·v_i)² + reg·‖u‖²
// over the rated items, base_i the offset plus the item's mean and bias
// (values on m's scale). The item side — V, item biases, the global mean,
// the catalog and scale — is m's. It is how a user's device computes its
// own vector against a published model, which holds no users (the item
// factors of a privrec serve run): the ratings never leave the device.
func (m *Model) FoldIn(id string, items []int32, values []float32, reg float64) (*Model, error) {
	k := m.Dim
	switch {
	case k < 1 || len(m.V) != m.NumItems*k:
		return nil, errors.New("model: fold-in needs item factors")
	case len(items) == 0 || len(items) != len(values):
		return nil, fmt.Errorf("model: fold-in of %d items and %d ratings", len(items), len(values))
	case !(reg > 0):
		return nil, fmt.Errorf("model: fold-in regularization %v, want > 0", reg)
	}
	prior := func(i int32) float64 { // what m predicts for no user
		if !m.addsBias() {
			return 0
		}
		b := float64(m.Mean)
		if m.BI != nil {
			b += float64(m.BI[i])
		}
		return b
	}
	var mean float64
	for n, i := range items {
		if i < 0 || int(i) >= m.NumItems {
			return nil, fmt.Errorf("model: fold-in item index %d outside [0, %d)", i, m.NumItems)
		}
		mean += float64(values[n]) - prior(i)
	}
	mean /= float64(len(values))
	base := func(i int32) float64 { return mean + prior(i) } // the prediction besides u·v
	a := make([]float64, k*k)
	rhs := make([]float64, k)
	for d := range k {
		a[d*k+d] = reg
	}
	for n, i := range items {
		v := m.V[int(i)*k : int(i)*k+k]
		res := float64(values[n]) - base(i)
		for d := range k {
			rhs[d] += float64(v[d]) * res
			for e := 0; e <= d; e++ {
				a[d*k+e] += float64(v[d]) * float64(v[e])
			}
		}
	}
	if !linalg.CholeskySolve(a, rhs, k) {
		return nil, errors.New("model: fold-in system is not positive definite")
	}
	u := make([]float32, k)
	for d, x := range rhs {
		u[d] = float32(x)
	}
	out := &Model{
		Dim: k, NumUsers: 1, NumItems: m.NumItems, U: u, V: m.V,
		Mean: m.Mean, BI: m.BI, Offset: []float32{float32(mean)}, Rated: []bool{true},
		Default: m.Default, Ranking: m.Ranking, Scale: m.Scale,
		UserIDs: []string{id}, ItemIDs: m.ItemIDs, ItemTitles: m.ItemTitles,
		Method: m.Method, Config: slices.Clone(m.Config), Privacy: m.Privacy,
	}
	if m.BI != nil || m.Mean != 0 {
		out.BU = []float32{0}
	}
	return out, nil
}
