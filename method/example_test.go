package method_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// A method is trained by name with hyperparameters as text, the way the
// command line and the experiment files give them.
func Example() {
	d, _ := ratings.Synthetic(ratings.SyntheticConfig{Users: 50, Items: 30, Rank: 2, PerUser: 10}, 1)
	spec, _ := method.Lookup("dp-itemavg")
	_, res, err := method.Fit(context.Background(), "dp-itemavg", d, method.Params{"eps": "0.5"}, 1, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Summary)
	fmt.Printf("protects %s, trusts %s, ε total %g\n", res.Privacy.Unit, res.Privacy.Trusted, res.Privacy.EpsTotal)
	// Output:
	// ε-DP item averages (the multi-vendor thesis's Alg. 2): the baseline every private method must beat
	// protects rating value, trusts the recommender, ε total 0.5
}
