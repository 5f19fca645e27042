package pmf

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/budget"
	"github.com/privrec/privrec/dp"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/ratings"
)

// data returns a synthetic rank-5 train/test split with about 400 ratings
// per item, so that DP-PMF's per-item noise is measurable against signal.
func data(t *testing.T) (train, test *ratings.Dataset) {
	t.Helper()
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 1500, Items: 200, Rank: 5,
		PerUser: 60, MinPerUser: 20, Noise: 0.3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ratings.Holdout(d, 0.9, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s.Train, s.Test
}

func smallDP() DPConfig {
	c := DefaultDPConfig()
	c.PMF.Dim, c.PMF.Epochs, c.PMF.BatchSize = 5, 30, 10_000
	return c
}

func TestPMFLearns(t *testing.T) {
	train, test := data(t)
	cfg := DefaultConfig()
	cfg.Dim, cfg.Epochs, cfg.BatchSize = 5, 30, 10_000
	var first, last float64
	m, err := Train(context.Background(), train, cfg, func(s EpochStats) {
		if s.Epoch == 1 {
			first = s.TrainRMSE
		}
		last = s.TrainRMSE
	})
	if err != nil {
		t.Fatal(err)
	}
	mean := math.Sqrt(eval.Rating(constant(train.Mean()), test).MSE)
	if got := eval.Rating(m, test).RMSE; !(got < 0.9*mean) || !(last < first) {
		t.Errorf("test RMSE %.4f vs global mean %.4f; train RMSE %.4f → %.4f", got, mean, first, last)
	}
}

type constant float64

func (c constant) Predict(u, i int32) float32 { return float32(c) }

func TestNoiseNormMatchesGamma(t *testing.T) {
	train, _ := data(t)
	for _, eps := range []float64{0.5, 4} {
		cfg := smallDP()
		cfg.Eps, cfg.MeanShare = eps, 0
		_, st, err := TrainDP(context.Background(), train, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		// ‖η‖ ~ Gamma(Dim, Δ/ε): mean Dim·Δ/ε, sd of the mean over the
		// items √Dim·(Δ/ε)/√items.
		want := float64(cfg.PMF.Dim) * st.Sens / eps
		sd := math.Sqrt(float64(cfg.PMF.Dim)) * st.Sens / eps / math.Sqrt(float64(train.NumItems()))
		if st.Sens != 4 || math.Abs(st.NoiseNorm-want) > 4*sd {
			t.Errorf("ε %g: mean ‖η‖ = %.3f, want %.3f ± %.3f (Δ = %g)", eps, st.NoiseNorm, want, 4*sd, st.Sens)
		}
	}
}

func TestUserRowsClipped(t *testing.T) {
	train, _ := data(t)
	cfg := smallDP()
	cfg.Eps = 10
	m, _, err := TrainDP(context.Background(), train, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for u := range m.NumUsers {
		var s float64
		for _, x := range m.U[u*m.Dim : (u+1)*m.Dim] {
			s += float64(x) * float64(x)
		}
		if s > 1+1e-5 {
			t.Fatalf("‖u_%d‖² = %g > 1", u, s)
		}
	}
}

func TestDeterministic(t *testing.T) {
	train, _ := data(t)
	run := func(seed uint64) []float32 {
		cfg := smallDP()
		cfg.PMF.Epochs, cfg.PMF.Seed = 3, seed
		eps, err := budget.PDPSpec(train, budget.DefaultPDP(), 1)
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := TrainPDP(context.Background(), train, eps, 0.4, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m.V
	}
	a, b, c := run(5), run(5), run(6)
	same := func(x, y []float32) bool {
		for k := range x {
			if x[k] != y[k] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed, different item matrices")
	}
	if same(a, c) {
		t.Error("different seeds, identical item matrices")
	}
}

func TestAccuracyImprovesWithEps(t *testing.T) {
	train, test := data(t)
	rmse := func(eps float64, s Solver) float64 {
		var sum float64
		for seed := range uint64(3) {
			cfg := smallDP()
			cfg.Eps, cfg.Solver, cfg.PMF.Seed = eps, s, seed
			m, _, err := TrainDP(context.Background(), train, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			sum += eval.Rating(m, test).RMSE
		}
		return sum / 3
	}
	for _, s := range []Solver{SolverExact, SolverPaper} {
		lo, mid, hi := rmse(0.05, s), rmse(1, s), rmse(100, s)
		if !(lo > mid && mid > hi) {
			t.Errorf("%s: RMSE at ε 0.05, 1, 100 = %.4f, %.4f, %.4f; want decreasing", s, lo, mid, hi)
		}
	}
}

func TestRSMRatesPerGroup(t *testing.T) {
	train, _ := data(t)
	g := budget.DefaultPDP()
	eps, err := budget.PDPSpec(train, g, 3)
	if err != nil {
		t.Fatal(err)
	}
	tmean, err := budget.Threshold(eps, "mean")
	if err != nil {
		t.Fatal(err)
	}
	keep := rsm(train.Len(), eps, tmean, 11)
	kept := make([]bool, len(eps))
	for _, k := range keep {
		kept[k] = true
	}
	// Per group: observed keep count against Σ π_k, 5 binomial sds.
	type acc struct{ n, kept, want, vr float64 }
	var groups [3]acc
	for k, e := range eps {
		gi := 2
		switch {
		case e < g.Mid:
			gi = 0
		case e < g.High:
			gi = 1
		}
		p := dp.KeepProb(e, tmean)
		a := &groups[gi]
		a.n++
		a.want += p
		a.vr += p * (1 - p)
		if kept[k] {
			a.kept++
		}
	}
	for gi, a := range groups {
		if a.n == 0 || math.Abs(a.kept-a.want) > 5*math.Sqrt(a.vr)+1e-9 {
			t.Errorf("group %d: kept %v of %v, want %.1f ± %.1f", gi, a.kept, a.n, a.want, 5*math.Sqrt(a.vr))
		}
	}
	if groups[2].kept != groups[2].n {
		t.Errorf("liberal ratings (ε ≥ t) dropped: kept %v of %v", groups[2].kept, groups[2].n)
	}
	if r := groups[0].kept / groups[0].n; !(r > 0.1 && r < 0.5) {
		t.Errorf("conservative keep rate %.3f, want (e^0.15−1)/(e^%.3f−1) ≈ %.3f", r, tmean, math.Expm1(0.15)/math.Expm1(tmean))
	}
}

func TestBadConfig(t *testing.T) {
	train, _ := data(t)
	eps, err := budget.PDPSpec(train, budget.DefaultPDP(), 1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*DPConfig)
	}{
		{"zero dim", func(c *DPConfig) { c.PMF.Dim = 0 }},
		{"negative epochs", func(c *DPConfig) { c.PMF.Epochs = -1 }},
		{"zero lr", func(c *DPConfig) { c.PMF.LearnRate = 0 }},
		{"momentum 1", func(c *DPConfig) { c.PMF.Momentum = 1 }},
		{"NaN reg", func(c *DPConfig) { c.PMF.Reg = math.NaN() }},
		{"zero eps", func(c *DPConfig) { c.Eps = 0 }},
		{"infinite eps", func(c *DPConfig) { c.Eps = math.Inf(1) }},
		{"negative sens", func(c *DPConfig) { c.Sens = -1 }},
		{"negative reg-v", func(c *DPConfig) { c.RegV = -1 }},
		{"mean share 1", func(c *DPConfig) { c.MeanShare = 1 }},
		{"unknown solver", func(c *DPConfig) { c.Solver = "newton" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := smallDP()
			tc.mod(&c)
			if _, _, err := TrainDP(context.Background(), train, c, nil); !errors.Is(err, ErrConfig) {
				t.Errorf("TrainDP: %v does not wrap ErrConfig", err)
			}
		})
	}
	c := smallDP()
	for _, tc := range []struct {
		name string
		eps  []float64
		t    float64
	}{
		{"short budgets", eps[:10], 0.4},
		{"zero budget", append([]float64{0}, eps[1:]...), 0.4},
		{"zero threshold", eps, 0},
		{"NaN threshold", eps, math.NaN()},
	} {
		if _, _, err := TrainPDP(context.Background(), train, tc.eps, tc.t, c, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("TrainPDP %s: %v does not wrap ErrConfig", tc.name, err)
		}
	}
	if _, err := Train(context.Background(), train.Subset(nil), c.PMF, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Train on no ratings: %v", err)
	}
}

// TestShortLastBatch checks that the epoch's short remainder batch takes
// a proportionally short step: with a last batch of 3 ratings at the
// paper's γ = 50, a step per actual batch length diverged.
func TestShortLastBatch(t *testing.T) {
	train, test := data(t)
	cfg := DefaultConfig()
	cfg.Dim, cfg.Epochs, cfg.BatchSize = 5, 10, train.Len()-3
	m, err := Train(context.Background(), train, cfg, nil)
	if err != nil {
		t.Fatalf("a 3-rating last batch: %v", err)
	}
	mean := math.Sqrt(eval.Rating(constant(train.Mean()), test).MSE)
	if got := eval.Rating(m, test).RMSE; !(got < mean) {
		t.Errorf("test RMSE %.4f, global mean %.4f", got, mean)
	}
}
