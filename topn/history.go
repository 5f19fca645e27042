package topn

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/internal/linalg"
	"github.com/privrec/privrec/model"
)

// History returns the fold-in scorer of a pop, dp-pop, ease or ials model,
// for the strong-generalisation protocol (eval.RankStrong): a user the
// model never saw is scored from their history alone.
//
//   - pop, dp-pop: the item scores, whatever the history;
//   - ease: Σ_{j ∈ history} B[j, i], exactly EASE's score of that user;
//   - ials: the user's vector is the exact minimiser of the iALS loss
//     against the item factors (α0, λ and ν from the model's config);
//   - a model with user items (dp-ease, model.Model.UserItems): the user's
//     indicator on those items and a constant 1, against the item
//     factors, as the run's devices score themselves.
func History(m *model.Model) (eval.HistoryScorer, error) {
	if m.UserItems != nil {
		if m.Dim != len(m.UserItems)+1 || len(m.V) != m.NumItems*m.Dim {
			return nil, fmt.Errorf("topn: a %q model with %d user items, Dim %d and %d factors", m.Method, len(m.UserItems), m.Dim, len(m.V))
		}
		return indicatorHistory{m}, nil
	}
	switch m.Method {
	case "pop", "dp-pop":
		return itemHistory{m.BI}, nil
	case "ease":
		return easeHistory{m.V, m.NumItems}, nil
	case "ials":
		c := DefaultIALSConfig()
		if m.Config != nil {
			if err := json.Unmarshal(m.Config, &struct {
				Alpha0 *float64 `json:"alpha0"`
				Reg    *float64 `json:"reg"`
				Nu     *float64 `json:"nu"`
			}{&c.Alpha0, &c.Reg, &c.Nu}); err != nil {
				return nil, fmt.Errorf("topn: ials config: %w", err)
			}
		}
		return newIALSHistory(m, c), nil
	}
	return nil, fmt.Errorf("topn: no fold-in for method %q (want pop, dp-pop, ease, ials or a model with user items such as dp-ease)", m.Method)
}

// indicatorHistory scores a history by model.IndicatorRow against the
// item factors.
type indicatorHistory struct{ m *model.Model }

func (h indicatorHistory) ScoreHistory(items []int32, dst []float32) []float32 {
	u := model.IndicatorRow(h.m.UserItems, items)
	d := h.m.Dim
	dst = dst[:0]
	for i := range h.m.NumItems {
		v := h.m.V[i*d : i*d+d]
		var s float32
		for k, x := range u {
			if x != 0 {
				s += x * v[k]
			}
		}
		dst = append(dst, s)
	}
	return dst
}

type itemHistory struct{ score []float32 }

func (h itemHistory) ScoreHistory(_ []int32, dst []float32) []float32 {
	return append(dst[:0], h.score...)
}

// easeHistory sums the rows of B over the history; v holds Bᵀ.
type easeHistory struct {
	v []float32
	n int
}

func (h easeHistory) ScoreHistory(items []int32, dst []float32) []float32 {
	dst = dst[:0]
	for i := range h.n {
		row := h.v[i*h.n : i*h.n+h.n]
		var s float32
		for _, j := range items {
			s += row[j]
		}
		dst = append(dst, s)
	}
	return dst
}

// ialsHistory solves one user's iALS vector against fixed item factors.
type ialsHistory struct {
	v     []float32
	n, d  int
	gram  []float64 // α0·VᵀV
	cfg   IALSConfig
	total float64 // the number of items N
}

func newIALSHistory(m *model.Model, c IALSConfig) ialsHistory {
	d := m.Dim
	g := make([]float64, d*d)
	for i := range m.NumItems {
		vi := m.V[i*d : i*d+d]
		for a := range d {
			for b := range d {
				g[a*d+b] += c.Alpha0 * float64(vi[a]) * float64(vi[b])
			}
		}
	}
	return ialsHistory{v: m.V, n: m.NumItems, d: d, gram: g, cfg: c, total: float64(m.NumItems)}
}

func (h ialsHistory) ScoreHistory(items []int32, dst []float32) []float32 {
	d := h.d
	a := append([]float64(nil), h.gram...)
	rhs := make([]float64, d)
	for _, j := range items {
		vj := h.v[int(j)*d : int(j)*d+d]
		for p := range d {
			rhs[p] += float64(vj[p])
			for q := range d {
				a[p*d+q] += float64(vj[p]) * float64(vj[q])
			}
		}
	}
	reg := h.cfg.Reg * math.Pow(float64(len(items))+h.cfg.Alpha0*h.total, h.cfg.Nu)
	for p := range d {
		a[p*d+p] += reg
	}
	if len(items) == 0 || !linalg.CholeskySolve(a, rhs, d) {
		clear(rhs)
	}
	dst = dst[:0]
	for i := range h.n {
		vi := h.v[i*d : i*d+d]
		var s float64
		for p := range d {
			s += rhs[p] * float64(vi[p])
		}
		dst = append(dst, float32(s))
	}
	return dst
}
