package ldpop_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/ldpop"
	"github.com/privrec/privrec/ratings"
)

func Example() {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 100, Items: 40, Rank: 2, PerUser: 10, Noise: 0.3}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The paper's schedule, one position of V per round for 1000 rounds:
	// on this tiny V (40 × 10) that is 2.5 passes, each with fresh noise.
	cfg := ldpop.DefaultConfig(ldpop.LDPOP)
	m, rep, err := ldpop.Train(context.Background(), d, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := m.Predict(0, 3)
	fmt.Println(p >= d.Scale.Min && p <= d.Scale.Max)
	fmt.Printf("V: %d of %d positions updated in %d pass(es)\n", rep.Updated, rep.Positions, rep.Passes)
	fmt.Printf("noise Laplace(%g) per position; ε per round %g, in total %.3g (u_i fixed)\n", rep.NoiseScale, rep.EpsRound, rep.EpsTotal)
	// Output:
	// true
	// V: 400 of 400 positions updated in 3 pass(es)
	// noise Laplace(8) per position; ε per round 1, in total 8.94 (u_i fixed)
}
