package model

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Scored is an item with its score.
type Scored struct {
	Item  int32
	Score float32
}

// Recommendation is one item recommended to a user, by original ID.
type Recommendation struct {
	Rank  int    `json:"rank"`            // 1 for the best item
	Item  string `json:"item"`            // the item's original ID
	Title string `json:"title,omitempty"` // the item's title, if the model has titles
	// Score is the model's raw, unclamped score for the item: items are
	// ranked by it, so it tells apart items whose predicted ratings all
	// clamp to the top of the scale.
	Score float32 `json:"score"`
	// Rating is Score clamped to the rating scale: the rating the model
	// predicts. It is nil for a Ranking model, whose scores are not
	// ratings.
	Rating *float32 `json:"rating,omitempty"`
}

// Recommend returns the n items with the highest raw scores for user u,
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

// RecommendUser returns the n best items for the user with original ID
// user, leaving out the items whose IDs are in exclude (IDs the model does
// not know are ignored). Items are ranked by raw score, which Score
// reports; Rating is the score clamped to the scale, unless the model is a
// Ranking model. A model
// without a user side (NumUsers = 0) recommends the same items to any
// user. It fails for a user the model does not hold and for a model
// without IDs.
func (m *Model) RecommendUser(user string, n int, exclude []string) ([]Recommendation, error) {
	if m.ItemIDs == nil && m.NumItems > 0 {
		return nil, errors.New("model: the model has no item IDs")
	}
	if m.NumUsers == 0 && m.Dim > 0 && m.BI == nil {
		return nil, errors.New("model: the model holds item factors only (a server's published model); a user's recommendations need the user's vector, which stays on the user's device: privrec recommend --ratings FILE folds the user in on the device")
	}
	u := int32(-1)
	if m.NumUsers > 0 {
		if m.UserIDs == nil {
			return nil, errors.New("model: the model has no user IDs")
		}
		var ok bool
		if u, ok = m.UserIndex(user); !ok {
			return nil, fmt.Errorf("model: user %q is not in the model (%d users)", user, m.NumUsers)
		}
	}
	var rated []int32
	for _, id := range exclude {
		if i, ok := m.ItemIndex(id); ok {
			rated = append(rated, i)
		}
	}
	slices.Sort(rated)
	best := m.Recommend(u, n, slices.Compact(rated))
	out := make([]Recommendation, len(best))
	for k, s := range best {
		out[k] = Recommendation{Rank: k + 1, Item: m.ItemIDs[s.Item], Score: s.Score}
		if !m.Ranking {
			r := m.Scale.Clamp(s.Score)
			out[k].Rating = &r
		}
		if m.ItemTitles != nil {
			out[k].Title = m.ItemTitles[s.Item]
		}
	}
	return out, nil
}

// UserIndex returns the row of the user with original ID id. It is safe
// for concurrent use; UserIDs must not change after the first lookup.
func (m *Model) UserIndex(id string) (int32, bool) {
	m.once.Do(m.buildIndex)
	u, ok := m.users[id]
	return u, ok
}

// ItemIndex returns the row of the item with original ID id. It is safe
// for concurrent use; ItemIDs must not change after the first lookup.
func (m *Model) ItemIndex(id string) (int32, bool) {
	m.once.Do(m.buildIndex)
	i, ok := m.items[id]
	return i, ok
}

// buildIndex maps IDs to rows. A repeated ID maps to its first row.
func (m *Model) buildIndex() {
	index := func(ids []string) map[string]int32 {
		x := make(map[string]int32, len(ids))
		for k, id := range ids {
			if _, dup := x[id]; !dup {
				x[id] = int32(k)
			}
		}
		return x
	}
	m.users, m.items = index(m.UserIDs), index(m.ItemIDs)
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
