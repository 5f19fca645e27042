package method_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/hdpmf"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// A method is looked up by name, configured with its package's typed
// config and fitted; the model and the privacy report come back.
func Example() {
	train, _ := ratings.Synthetic(ratings.SyntheticConfig{Users: 60, Items: 40, Rank: 2, PerUser: 12}, 1)
	s, _ := method.Lookup("hdpmf")
	cfg := s.New().(*hdpmf.Config)
	cfg.Rounds = 5
	cfg.Eps = 0.5
	m, res, err := s.Fit(context.Background(), train, cfg, 1, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Summary)
	fmt.Printf("protects %s, trusts %s\n", res.Privacy.Unit, res.Privacy.Trusted)
	fmt.Printf("ε per round %g, in total %g\n", res.Privacy.EpsRound, res.Privacy.EpsTotal)
	fmt.Printf("as the paper computes it: %g, %g\n", res.Stats["eps_round_paper"], res.Stats["eps_total_paper"])
	fmt.Println(m.Method, m.NumUsers, m.NumItems)
	// Output:
	// HDPMF: decentralized MF with heterogeneous DP (stretch W⊙R, distributed Laplace gradient noise, rescaled predictions)
	// protects user's rating values, trusts nobody
	// ε per round 4, in total 20
	// as the paper computes it: 0.5, 2.5
	// hdpmf 60 40
}

// The command line and experiment files set a config's fields by name, as
// text; a run prints them back in order.
func ExampleSpec_Configure() {
	s, _ := method.Lookup("dp-itemavg")
	cfg, err := s.Configure(map[string]string{"eps": "0.5"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(method.String(s.Fields(cfg)))
	_, err = s.Configure(map[string]string{"eps": "half"})
	fmt.Println(err)
	// Output:
	// eps=0.5
	// bad parameter: dp-itemavg eps = "half": not a number
}
