package eval_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/ratings"
)

// meanModel predicts a constant rating and scores items by a fixed
// popularity; it stands in for a model.Model.
type meanModel struct {
	mean       float32
	popularity []float32
}

func (m meanModel) Predict(u, i int32) float32 { return m.mean }

func (m meanModel) ScoreItems(u int32, dst []float32) []float32 {
	return append(dst[:0], m.popularity...)
}

func Example() {
	ids := []string{"a", "b", "c", "d"}
	train := &ratings.Dataset{Scale: ratings.Stars5, UserIDs: ids[:2], ItemIDs: ids,
		Users: []int32{0, 1}, Items: []int32{0, 1}, Values: []float32{4, 3}}
	test := &ratings.Dataset{Scale: ratings.Stars5, UserIDs: ids[:2], ItemIDs: ids,
		Users: []int32{0, 1}, Items: []int32{2, 3}, Values: []float32{5, 2}}
	m := meanModel{mean: 3.5, popularity: []float32{0.9, 0.1, 0.5, 0.3}}

	fmt.Println(eval.Rating(m, test))
	fmt.Println(eval.ErrorCDF(m, test, []float64{1, 1.5}))
	fmt.Println(eval.Rank(m, train, test, 1, 4))

	// Three runs with different seeds, summarized.
	sums, _, err := eval.Repeat(context.Background(), []uint64{1, 2, 3},
		func(ctx context.Context, seed uint64) (map[string]float64, error) {
			return map[string]float64{"rmse": 0.85 + float64(seed)/100}, nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sums["rmse"])
	// Output:
	// RMSE 1.5000 MAE 1.5000 (n=2)
	// [0 1]
	// P@1 1.0000 R@1 1.0000 NDCG@1 1.0000 AUC 1.0000 (users=1)
	// 0.8700 ± 0.0100 (n=3)
}
