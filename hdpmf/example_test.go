package hdpmf_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/ratings"
)

func Example() {
	// Four users, three items, ratings 1..5.
	d := &ratings.Dataset{
		Name:    "toy",
		Users:   []int32{0, 0, 1, 1, 2, 2, 3, 3},
		Items:   []int32{0, 1, 1, 2, 0, 2, 0, 1},
		Values:  []float32{5, 4, 2, 1, 5, 2, 4, 4},
		UserIDs: []string{"a", "b", "c", "d"},
		ItemIDs: []string{"x", "y", "z"},
		Scale:   ratings.Scale{Min: 1, Max: 5, Step: 1},
	}
	cfg := hdpmf.DefaultConfig(hdpmf.HDPMF)
	cfg.Rounds, cfg.Eps = 20, 1
	m, rep, err := hdpmf.Train(context.Background(), d, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := m.Predict(0, 2)
	fmt.Println(p >= 1 && p <= 5)
	fmt.Printf("ε per round %.3g, in total %.3g over %d rounds\n", rep.EpsRound, rep.EpsTotal, cfg.Rounds)
	// Output:
	// true
	// ε per round 0.384, in total 7.68 over 20 rounds
}
