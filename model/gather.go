package model

import (
	"slices"

	"github.com/privrec/privrec/ratings"
)

// Gathered returns the model an evaluation harness gathers after a
// client/server run on d: the server's item matrix v (NumItems×dim,
// copied) and each device's user vector, which user(u) returns with
// whether the device had training ratings. A user without them, and an
// unknown index, predicts the middle of d's scale. The caller adds any
// other term (HDPMF's weights).
func Gathered(d *ratings.Dataset, dim int, v []float32, user func(u int) (row []float32, rated bool)) *Model {
	nu := d.NumUsers()
	m := &Model{
		Dim: dim, NumUsers: nu, NumItems: d.NumItems(),
		U: make([]float32, nu*dim), V: slices.Clone(v),
		Rated: make([]bool, nu), Default: (d.Scale.Min + d.Scale.Max) / 2, Scale: d.Scale,
		UserIDs: slices.Clone(d.UserIDs), ItemIDs: slices.Clone(d.ItemIDs), ItemTitles: slices.Clone(d.ItemTitles),
	}
	for u := range nu {
		row, rated := user(u)
		copy(m.U[u*dim:(u+1)*dim], row)
		m.Rated[u] = rated
	}
	return m
}
