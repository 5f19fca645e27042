package mf

import (
	"container/heap"
	"github.com/privrec/privrec/internal/vec"
	"sort"

	"github.com/privrec/privrec/ratings"
)

// Model is a trained matrix-factorization model. A prediction for user u and
// item i is
//
//	r̂(u, i) = U[u]·V[i]                   (Biased false)
//	r̂(u, i) = Mean + BU[u] + BI[i] + U[u]·V[i]   (Biased true)
//
// where U[u] is row u of the NumUsers×Dim matrix U stored row-major, and
// V[i] likewise. Mean is the training mean in both cases; an unbiased
// model uses it only for users and items it does not know.
type Model struct {
	Dim, NumUsers, NumItems int
	U, V                    []float32 // row-major NumUsers×Dim and NumItems×Dim
	BU, BI                  []float32 // user and item biases, nil if not Biased
	Mean                    float32   // mean training rating
	Biased                  bool
	Scale                   ratings.Scale // predictions are clamped to it
	// UserIDs, ItemIDs and ItemTitles are copied from the training data so
	// that a saved model can answer by original IDs. They are parallel to
	// the rows of U and V, or nil; ItemTitles may be nil.
	UserIDs, ItemIDs, ItemTitles []string
}

// userRow returns U[u], or nil if u is not a known user.
func (m *Model) userRow(u int32) []float32 {
	if u < 0 || int(u) >= m.NumUsers {
		return nil
	}
	o := int(u) * m.Dim
	return m.U[o : o+m.Dim : o+m.Dim]
}

// itemRow returns V[i], or nil if i is not a known item.
func (m *Model) itemRow(i int32) []float32 {
	if i < 0 || int(i) >= m.NumItems {
		return nil
	}
	o := int(i) * m.Dim
	return m.V[o : o+m.Dim : o+m.Dim]
}

// PredictRaw returns the unclamped prediction for user u and item i. An
// index out of range stands for an unknown user or item: a biased model
// then predicts Mean plus the bias it knows (BU[u] for a known user, BI[i]
// for a known item), an unbiased one predicts Mean.
func (m *Model) PredictRaw(u, i int32) float32 {
	pu, qi := m.userRow(u), m.itemRow(i)
	if pu == nil || qi == nil {
		if !m.Biased {
			return m.Mean
		}
		p := m.Mean
		if pu != nil && len(m.BU) == m.NumUsers {
			p += m.BU[u]
		}
		if qi != nil && len(m.BI) == m.NumItems {
			p += m.BI[i]
		}
		return p
	}
	p := vec.Dot(pu, qi)
	if m.Biased {
		p += m.Mean + m.BU[u] + m.BI[i]
	}
	return p
}

// Predict returns the prediction for user u and item i clamped to the
// model's rating scale. Unknown users and items are handled as in
// PredictRaw; Predict never panics.
func (m *Model) Predict(u, i int32) float32 {
	return m.Scale.Clamp(m.PredictRaw(u, i))
}

// PredictAll returns Predict for every rating of d, in order, written into
// dst (grown if too short). d must use the model's index space, as a test
// split of the training data does.
func (m *Model) PredictAll(d *ratings.Dataset, dst []float32) []float32 {
	n := min(len(d.Users), len(d.Items))
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for k := range dst {
		dst[k] = m.Predict(d.Users[k], d.Items[k])
	}
	return dst
}

// ScoreItems returns the unclamped score of every item for user u, written
// into dst (grown if too short), for ranking. For an unknown user the
// scores are the item-bias predictions Mean + BI[i] (all Mean if the model
// is unbiased).
func (m *Model) ScoreItems(u int32, dst []float32) []float32 {
	if cap(dst) < m.NumItems {
		dst = make([]float32, m.NumItems)
	}
	dst = dst[:m.NumItems]
	pu := m.userRow(u)
	if pu == nil {
		for i := range dst {
			dst[i] = m.PredictRaw(-1, int32(i))
		}
		return dst
	}
	var base float32
	if m.Biased {
		base = m.Mean + m.BU[u]
	}
	k := m.Dim
	for i := range dst {
		s := vec.Dot(pu, m.V[i*k:i*k+k:i*k+k])
		if m.Biased {
			s += base + m.BI[i]
		}
		dst[i] = s
	}
	return dst
}

// Scored is an item with its score.
type Scored struct {
	Item  int32
	Score float32
}

// Recommend returns the n items with the highest scores for user u,
// best first (ties by lower item index), leaving out the items of rated,
// which must be sorted ascending as in a CSR row (ratings.CSR.Row). It
// returns fewer than n items when fewer remain, and nil for n <= 0.
func (m *Model) Recommend(u int32, n int, rated []int32) []Scored {
	if n <= 0 || m.NumItems == 0 {
		return nil
	}
	scores := m.ScoreItems(u, nil)
	h := make(scoredHeap, 0, min(n, m.NumItems))
	r := 0
	for i, s := range scores {
		for r < len(rated) && rated[r] < int32(i) {
			r++
		}
		if r < len(rated) && rated[r] == int32(i) {
			continue
		}
		c := Scored{Item: int32(i), Score: s}
		if len(h) < n {
			heap.Push(&h, c)
		} else if better(c, h[0]) {
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	out := []Scored(h)
	sort.Slice(out, func(a, b int) bool { return better(out[a], out[b]) })
	return out
}

// better orders recommendations: higher score first, then lower item.
func better(a, b Scored) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Item < b.Item
}

// scoredHeap is a min-heap by better: its root is the worst kept item.
type scoredHeap []Scored

func (h scoredHeap) Len() int           { return len(h) }
func (h scoredHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h scoredHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *scoredHeap) Push(x any)        { *h = append(*h, x.(Scored)) }
func (h *scoredHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
