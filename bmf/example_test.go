package bmf_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/bmf"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/ratings"
)

// Train samples the posterior and returns a model that averages the
// samples' predictions.
func ExampleTrain() {
	d, _ := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 100, Rank: 2, PerUser: 20}, 1)
	s, _ := ratings.Holdout(d, 0.9, 1)
	cfg := bmf.Config{Dim: 4, Iters: 30, InitStdev: 0.1, Keep: 10, Seed: 1}
	m, err := bmf.Train(context.Background(), s.Train, cfg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("samples averaged:", m.Dim/cfg.Dim)
	fmt.Println("beats the global mean:", eval.Rating(m, s.Test).RMSE < eval.Rating(baseline.FitMean(s.Train), s.Test).RMSE)
	// Output:
	// samples averaged: 10
	// beats the global mean: true
}
