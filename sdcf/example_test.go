package sdcf_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/sdcf"
)

// Train SDMF on a small synthetic rating set and read the privacy spent.
func Example() {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 300, Rank: 5, PerUser: 30, MinPerUser: 10, Noise: 0.3}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := sdcf.DefaultConfig(sdcf.Squared, true)
	cfg.Dim, cfg.Rounds, cfg.EpsG, cfg.EpsI = 10, 5, 1, 1
	_, rep, err := sdcf.Train(context.Background(), d, cfg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("ε_I per round %g, over %d rounds %g; ε_P %g; existence bound %g\n",
		rep.EpsI.Round, cfg.Rounds, rep.EpsI.Total, rep.EpsP.Total, rep.ExistenceTotal)
	// Output:
	// ε_I per round 1, over 5 rounds 5; ε_P 2; existence bound 7
}
