package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
//
// A ranking model (m.Ranking) is folded in by its own rule, not by the
// ridge regression: see FoldInRanking.
func (m *Model) FoldIn(id string, items []int32, values []float32, reg float64) (*Model, error) {
	if m.Ranking {
		return m.FoldInRanking(id, items)
	}
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

// FoldInRanking returns a model of one user, id, who rated items, built
// on the ranking model m's items. A model without factors (pop, dp-pop:
// item scores only) ranks every user alike; an EASE model (Method "ease",
// item-item weights V of NumItems×NumItems) scores with the user's
// indicator vector over the items. An ials model (Method "ials") solves the
// user's row as its training does (ialsUser). A model with UserItems
// (dp-ease) scores with the user's indicator on those items and the
// constant last coordinate, as its devices do. Other ranking models (bpr,
// and dp-ease models saved before UserItems existed) are refused: a ridge
// fit to rating values would rank at random.
func (m *Model) FoldInRanking(id string, items []int32) (*Model, error) {
	if !m.Ranking {
		return nil, errors.New("model: FoldInRanking of a rating-prediction model")
	}
	for _, i := range items {
		if i < 0 || int(i) >= m.NumItems {
			return nil, fmt.Errorf("model: fold-in item index %d outside [0, %d)", i, m.NumItems)
		}
	}
	out := &Model{
		NumUsers: 1, NumItems: m.NumItems, Mean: m.Mean, BI: m.BI, Rated: []bool{true},
		Default: m.Default, Ranking: true, Scale: m.Scale,
		UserIDs: []string{id}, ItemIDs: m.ItemIDs, ItemTitles: m.ItemTitles,
		Method: m.Method, Config: slices.Clone(m.Config), Privacy: m.Privacy,
	}
	switch {
	case m.Dim == 0:
	case m.UserItems != nil && m.Dim == len(m.UserItems)+1 && len(m.V) == m.NumItems*m.Dim:
		out.Dim, out.V, out.UserItems = m.Dim, m.V, m.UserItems
		out.U = IndicatorRow(m.UserItems, items)
	case m.Method == "ease" && m.Dim == m.NumItems && len(m.V) == m.NumItems*m.Dim:
		out.Dim, out.V = m.Dim, m.V
		out.U = make([]float32, m.Dim)
		for _, i := range items {
			out.U[i] = 1
		}
	case m.Method == "ials" && m.Dim > 0 && len(m.V) == m.NumItems*m.Dim:
		u, err := m.ialsUser(items)
		if err != nil {
			return nil, err
		}
		out.Dim, out.V, out.U = m.Dim, m.V, u
	default:
		return nil, fmt.Errorf("model: fold-in of a %q ranking model is not supported (only item-score models such as pop and dp-pop, ease, ials, and dp-ease models that record their user items)", m.Method)
	}
	return out, nil
}

// IndicatorRow returns the user row of an indicator model (see
// Model.UserItems) for a user whose history is items: 1 at the slots of
// userItems the history holds, 0 elsewhere, and the constant 1 last.
func IndicatorRow(userItems, items []int32) []float32 {
	has := make(map[int32]bool, len(items))
	for _, i := range items {
		has[i] = true
	}
	u := make([]float32, len(userItems)+1)
	for k, i := range userItems {
		if has[i] {
			u[k] = 1
		}
	}
	u[len(userItems)] = 1
	return u
}

// ialsUser solves an iALS user row against m's item factors, as the
// training's user step does: (α0·VᵀV + Σ_rated v vᵀ + λ·(n + α0·N)^ν I) u
// = Σ_rated v, with α0, λ (reg) and ν read from the model's config.
func (m *Model) ialsUser(items []int32) ([]float32, error) {
	var c struct {
		Alpha0 *float64 `json:"alpha0"`
		Reg    *float64 `json:"reg"`
		Nu     *float64 `json:"nu"`
	}
	if err := json.Unmarshal(m.Config, &c); err != nil || c.Alpha0 == nil || c.Reg == nil || c.Nu == nil {
		return nil, fmt.Errorf("model: an ials fold-in needs alpha0, reg and nu in the model's config (%s)", m.Config)
	}
	k := m.Dim
	a := make([]float64, k*k)
	rhs := make([]float64, k)
	for i := range m.NumItems {
		v := m.V[i*k : i*k+k]
		for d := range k {
			for e := 0; e <= d; e++ {
				a[d*k+e] += *c.Alpha0 * float64(v[d]) * float64(v[e])
			}
		}
	}
	for _, i := range items {
		v := m.V[int(i)*k : int(i)*k+k]
		for d := range k {
			rhs[d] += float64(v[d])
			for e := 0; e <= d; e++ {
				a[d*k+e] += float64(v[d]) * float64(v[e])
			}
		}
	}
	reg := *c.Reg * math.Pow(float64(len(items))+*c.Alpha0*float64(m.NumItems), *c.Nu)
	for d := range k {
		a[d*k+d] += reg
		for e := 0; e < d; e++ {
			a[e*k+d] = a[d*k+e]
		}
	}
	if !linalg.CholeskySolve(a, rhs, k) {
		return nil, errors.New("model: ials fold-in system is not positive definite")
	}
	u := make([]float32, k)
	for d, x := range rhs {
		u[d] = float32(x)
	}
	return u, nil
}

// Personalised reports whether the model's scores can differ between
// users. It is false for a history-indicator model (UserItems, dp-ease)
// whose item-item coordinates are all zero: every user then gets the
// popularity coordinate alone, the same list for everyone (dp-ease's
// release carried no personalisation at its ε). Every other model is
// taken to be personalised. It reads only the released item factors.
func (m *Model) Personalised() bool {
	if m.UserItems == nil || m.Dim != len(m.UserItems)+1 || len(m.V) != m.NumItems*m.Dim {
		return true
	}
	for j := range m.NumItems {
		for _, x := range m.V[j*m.Dim : j*m.Dim+m.Dim-1] {
			if x != 0 {
				return true
			}
		}
	}
	return false
}
