package dpease

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// dpPop is the user-level DP popularity baseline: each user's indicator
// scaled to unit L2 norm, summed, Gaussian noise for the whole (ε, δ).
func dpPop(train *ratings.Dataset, eps, delta float64, seed uint64) *model.Model {
	rho, err := rdp.ZCDPRhoFor(eps, delta)
	if err != nil {
		panic(err)
	}
	sigma := rdp.GaussianSigmaFor(rho, 1)
	c := make([]float64, train.NumItems())
	byUser := train.ByUser()
	for u := range train.NumUsers() {
		items, _ := byUser.Row(u)
		for _, j := range items {
			c[j] += 1 / math.Sqrt(float64(len(items)))
		}
	}
	r := rng.New(seed, 0x706f70)
	bi := make([]float32, len(c))
	for j := range c {
		bi[j] = float32(c[j] + sigma*r.NormFloat64())
	}
	return &model.Model{NumItems: train.NumItems(), BI: bi, Ranking: true, Scale: train.Scale}
}

// TestML1M measures dp-ease and DP popularity on ML-1M (random 80/20,
// seed 1) when PRIVREC_H33 is set: "val" tunes on a validation split of
// the training part, "test" reports the test split. Optional
// PRIVREC_H33_GRID lists configs as "eps:M:cap:lamN:pop:frac;...".
func TestML1M(t *testing.T) {
	mode := os.Getenv("PRIVREC_H33")
	if mode == "" {
		t.Skip("set PRIVREC_H33=val|test (and PRIVREC_DATA) to measure on ML-1M")
	}
	d, _, err := datasets.Open("ml-1m", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	train, test := sp.Train, sp.Test
	if mode == "val" {
		in, err := ratings.Holdout(train, 0.8, 2)
		if err != nil {
			t.Fatal(err)
		}
		train, test = in.Train, in.Test
	}
	rank := func(m *model.Model) (eval.Ranking, eval.Ranking) {
		return eval.Rank(m, train, test, 10, 4), eval.Rank(m, train, test, 20, 4)
	}
	for _, eps := range []float64{1, 10} {
		r10, r20 := rank(dpPop(train, eps, 1e-6, 7))
		fmt.Printf("%s dp-pop eps=%g  R@10 %.4f N@10 %.4f  R@20 %.4f N@20 %.4f\n", mode, eps, r10.Recall, r10.NDCG, r20.Recall, r20.NDCG)
	}
	grid := os.Getenv("PRIVREC_H33_GRID")
	if grid == "" {
		grid = "1:1000:50:3:0.05:0.1;10:1000:50:3:0.05:0.1"
	}
	for _, g := range strings.Split(grid, ";") {
		f := strings.Split(g, ":")
		num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
		cfg := DefaultConfig()
		cfg.Eps, cfg.TopItems, cfg.Cap, cfg.LambdaNoise, cfg.PopWeight, cfg.FracCounts = num(0), int(num(1)), int(num(2)), num(3), num(4), num(5)
		if len(f) > 6 {
			cfg.Lambda = num(6)
		}
		m, rep, err := Train(context.Background(), train, cfg, 1)
		if err != nil {
			fmt.Printf("%s %s: %v\n", mode, g, err)
			continue
		}
		r10, r20 := rank(m)
		fmt.Printf("%s dp-ease %s eps=%.3f  R@10 %.4f N@10 %.4f  R@20 %.4f N@20 %.4f  (σc %.3g σg %.3g λ %.4g)\n", mode, g, rep.Eps,
			r10.Recall, r10.NDCG, r20.Recall, r20.NDCG, rep.Stats["sigma_counts"], rep.Stats["sigma_gram"], rep.Stats["lambda"])
	}
}
