package pmf_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/pmf"
	"github.com/privrec/privrec/ratings"
)

func ExampleTrainDP() {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 300, Items: 50, Rank: 3, PerUser: 20}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := pmf.DefaultDPConfig()
	cfg.Eps, cfg.PMF.Dim, cfg.PMF.Epochs, cfg.PMF.BatchSize = 2, 5, 20, 0
	m, st, err := pmf.TrainDP(context.Background(), d, cfg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("Δ = %g, ε of the noise = %.2f, model %d×%d\n", st.Sens, st.EpsV, m.NumItems, m.Dim)
	fmt.Println("prediction on the scale:", d.Scale.Contains(m.Predict(0, 0)) || m.Predict(0, 0) >= d.Scale.Min)
	// Output:
	// Δ = 4, ε of the noise = 1.98, model 50×5
	// prediction on the scale: true
}
