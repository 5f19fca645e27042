package ratings_test

import (
	"fmt"

	"github.com/privrec/privrec/ratings"
)

// A synthetic dataset from a planted rank-5 model, split 90/10 at random.
func Example() {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{
		Users: 100, Items: 200, Rank: 5,
		PerUser: 30, MinPerUser: 30, // exactly 30 ratings per user
		Zipf:  0.8,
		Noise: 0.5,
		Scale: ratings.Stars5,
	}, 1)
	if err != nil {
		panic(err)
	}
	sp, err := ratings.Holdout(d, 0.9, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("ratings:", d.Len())
	fmt.Println("train:", sp.Train.Len(), "test:", sp.Test.Len())
	fmt.Println("same users:", sp.Train.NumUsers() == d.NumUsers() && sp.Test.NumUsers() == d.NumUsers())
	// Output:
	// ratings: 3000
	// train: 2700 test: 300
	// same users: true
}

// Split descriptions as the command line takes them.
func ExampleParseSplit() {
	for _, s := range []string{"random:0.9", "leave:10", "loo", "kfold:5", "kfold:1"} {
		spec, err := ratings.ParseSplit(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: kind %s\n", spec, spec.Kind)
	}
	// Output:
	// random:0.9: kind random
	// leave:10: kind leave
	// loo: kind loo
	// kfold:5: kind kfold
	// ratings: split "kfold:1": bad parameter: k = 1 folds, want k >= 2
}
