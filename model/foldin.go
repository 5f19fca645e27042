package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/privrec/privrec/ratings"

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
	if m.Method == "dp-als" || m.Method == "dp-biases" {
		return m.foldInDPALS(id, items, values)
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

// foldInDPALS returns the model of one user folded in against a dp-als
// (or dp-biases) model as the user's device solves itself in the run's
// final round: the bias b_u and the vector u jointly, by ridge regression
// of r − μ − b_j on (1, v_j), with the ridges of the model's config
// (reg-user-bias on b_u, reg-user on the factors, reg-feature on the last
// min(user-features, 3) columns, the public item features).
func (m *Model) foldInDPALS(id string, items []int32, values []float32) (*Model, error) {
	var c struct {
		RegUser     *float64 `json:"reg-user"`
		RegUserBias *float64 `json:"reg-user-bias"`
		RegFeature  float64  `json:"reg-feature"`
		Features    int      `json:"user-features"`
	}
	if err := json.Unmarshal(m.Config, &c); err != nil || c.RegUser == nil || c.RegUserBias == nil {
		return nil, fmt.Errorf("model: a %s fold-in needs reg-user and reg-user-bias in the model's config (%s)", m.Method, m.Config)
	}
	k := m.Dim
	switch {
	case len(m.V) != m.NumItems*k || len(m.BI) != m.NumItems:
		return nil, fmt.Errorf("model: a %s fold-in needs item factors and biases", m.Method)
	case len(items) == 0 || len(items) != len(values):
		return nil, fmt.Errorf("model: fold-in of %d items and %d ratings", len(items), len(values))
	}
	kf := k - min(max(c.Features, 0), 3, k) // the factor columns; the features follow
	k1 := k + 1
	a := make([]float64, k1*k1)
	b := make([]float64, k1)
	for n, i := range items {
		if i < 0 || int(i) >= m.NumItems {
			return nil, fmt.Errorf("model: fold-in item index %d outside [0, %d)", i, m.NumItems)
		}
		y := float64(values[n]) - float64(m.Mean) - float64(m.BI[i])
		x := m.V[int(i)*k : int(i)*k+k]
		a[0]++
		b[0] += y
		for p := range k {
			xp := float64(x[p])
			a[(p+1)*k1] += xp
			b[p+1] += y * xp
			for q := 0; q <= p; q++ {
				a[(p+1)*k1+q+1] += xp * float64(x[q])
			}
		}
	}
	a[0] += *c.RegUserBias + 1e-9
	for p := range k {
		r := *c.RegUser
		if p >= kf {
			r = c.RegFeature
		}
		a[(p+1)*k1+p+1] += r
	}
	if !linalg.CholeskySolve(a, b, k1) {
		return nil, fmt.Errorf("model: %s fold-in system is not positive definite", m.Method)
	}
	u := make([]float32, k)
	for p := range k {
		u[p] = float32(b[p+1])
	}
	return &Model{
		Dim: k, NumUsers: 1, NumItems: m.NumItems, U: u, V: m.V,
		Mean: m.Mean, BU: []float32{float32(b[0])}, BI: m.BI, Rated: []bool{true},
		Default: m.Default, Scale: m.Scale,
		UserIDs: []string{id}, ItemIDs: m.ItemIDs, ItemTitles: m.ItemTitles,
		Method: m.Method, Config: slices.Clone(m.Config), Privacy: m.Privacy, Release: m.Release,
	}, nil
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

// FoldInAll returns the model of d's users and items folded in against
// m: each user of d with ratings gets the row FoldIn (a ranking model:
// FoldInRanking) gives them from those ratings, with reg the ridge of a
// rating model's fold-in; a user without ratings is unknown. The items are
// d's, matched to m's by ID, so the result scores d's index space (a test
// split of d); an item of d that m does not know is an error naming it.
// It is how an evaluation scores a published model, which holds no
// users, on a dataset's users as their devices would.
func (m *Model) FoldInAll(d *ratings.Dataset, reg float64) (*Model, error) {
	ni, nu := d.NumItems(), d.NumUsers()
	of := make([]int32, ni) // d's item j is m's of[j]
	for j, id := range d.ItemIDs {
		i, ok := m.ItemIndex(id)
		if !ok {
			return nil, fmt.Errorf("model: item %q of %s is not in the model's catalog", id, d.Name)
		}
		of[j] = i
	}
	if len(d.ItemIDs) != ni {
		return nil, fmt.Errorf("model: fold-in of %s needs its item IDs", d.Name)
	}
	out := &Model{
		Dim: m.Dim, NumUsers: nu, NumItems: ni, Mean: m.Mean, Default: m.Default, Ranking: m.Ranking, Scale: m.Scale,
		Rated: make([]bool, nu), UserIDs: slices.Clone(d.UserIDs), ItemIDs: slices.Clone(d.ItemIDs), ItemTitles: slices.Clone(d.ItemTitles),
		Method: m.Method, Config: slices.Clone(m.Config), Privacy: m.Privacy, Release: m.Release,
	}
	k := m.Dim
	if k > 0 {
		out.V = make([]float32, ni*k)
		for j, i := range of {
			copy(out.V[j*k:(j+1)*k], m.V[int(i)*k:int(i)*k+k])
		}
		out.U = make([]float32, nu*k)
	}
	if m.BI != nil {
		out.BI = make([]float32, ni)
		for j, i := range of {
			out.BI[j] = m.BI[i]
		}
	}
	rows := d.ByUser()
	items := []int32{}
	for u := range nu {
		idx, val := rows.Row(u)
		if len(idx) == 0 {
			continue
		}
		items = items[:0]
		for _, j := range idx {
			items = append(items, of[j])
		}
		id := strconv.Itoa(u)
		if u < len(d.UserIDs) {
			id = d.UserIDs[u]
		}
		f, err := m.FoldIn(id, items, val, reg)
		if err != nil {
			return nil, fmt.Errorf("model: user %s: %w", id, err)
		}
		out.Rated[u] = true
		copy(out.U[u*k:(u+1)*k], f.U)
		if f.Offset != nil {
			if out.Offset == nil {
				out.Offset = make([]float32, nu)
			}
			out.Offset[u] = f.Offset[0]
		}
		if f.BU != nil {
			if out.BU == nil {
				out.BU = make([]float32, nu)
			}
			out.BU[u] = f.BU[0]
		}
	}
	return out, out.Check()
}
