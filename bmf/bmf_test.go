package bmf_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/bmf"
	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// realSplit returns a 90/10 split of the embedded ml-latest-small data,
// loaded once for all tests.
var realSplit = sync.OnceValues(func() (ratings.Split, error) {
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		return ratings.Split{}, err
	}
	return ratings.Holdout(d, 0.9, 1)
})

func split(t *testing.T) ratings.Split {
	t.Helper()
	s, err := realSplit()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func synthetic(t *testing.T) *ratings.Dataset {
	t.Helper()
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 300, Items: 150, Rank: 3, PerUser: 20}, 7)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func train(t *testing.T, d *ratings.Dataset, cfg bmf.Config) *model.Model {
	t.Helper()
	m, err := bmf.Train(context.Background(), d, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValidate(t *testing.T) {
	ok := bmf.DefaultConfig()
	tests := []struct {
		name string
		edit func(*bmf.Config)
	}{
		{"zero dim", func(c *bmf.Config) { c.Dim = 0 }},
		{"zero iters", func(c *bmf.Config) { c.Iters = 0 }},
		{"negative init", func(c *bmf.Config) { c.InitStdev = -1 }},
		{"NaN init", func(c *bmf.Config) { c.InitStdev = math.NaN() }},
		{"negative burnin", func(c *bmf.Config) { c.Burnin = -1 }},
		{"burnin eats every sweep", func(c *bmf.Config) { c.Burnin = c.Iters }},
		{"negative keep", func(c *bmf.Config) { c.Keep = -2 }},
		{"negative workers", func(c *bmf.Config) { c.Workers = -1 }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, bmf.ErrConfig) {
				t.Errorf("Validate = %v, want ErrConfig", err)
			}
			if _, err := bmf.Train(context.Background(), synthetic(t), c, nil); !errors.Is(err, bmf.ErrConfig) {
				t.Errorf("Train = %v, want ErrConfig", err)
			}
		})
	}
}

func TestEmptyAndCancelled(t *testing.T) {
	d := synthetic(t)
	if _, err := bmf.Train(context.Background(), d.Subset(nil), bmf.DefaultConfig(), nil); !errors.Is(err, bmf.ErrConfig) {
		t.Errorf("empty dataset: %v, want ErrConfig", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bmf.Train(ctx, d, bmf.DefaultConfig(), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

// The samples do not depend on the number of workers: models are equal
// bit for bit.
func TestDeterministicAcrossWorkers(t *testing.T) {
	d := synthetic(t)
	cfg := bmf.Config{Dim: 4, Iters: 15, InitStdev: 0.1, Keep: 5, Seed: 3}
	var models []*model.Model
	for _, w := range []int{1, 2, 5} {
		cfg.Workers = w
		models = append(models, train(t, d, cfg))
	}
	for _, m := range models[1:] {
		if !slices.Equal(m.U, models[0].U) || !slices.Equal(m.V, models[0].V) ||
			!slices.Equal(m.BU, models[0].BU) || !slices.Equal(m.BI, models[0].BI) || m.Mean != models[0].Mean {
			t.Fatal("models differ between worker counts")
		}
	}
	cfg.Seed = 4
	if other := train(t, d, cfg); slices.Equal(other.U, models[0].U) {
		t.Error("another seed gave the same model")
	}
}

func TestKeptSamples(t *testing.T) {
	d := synthetic(t)
	tests := []struct {
		cfg  bmf.Config
		want int
	}{
		{bmf.Config{Dim: 3, Iters: 10, InitStdev: 0.1}, 10},
		{bmf.Config{Dim: 3, Iters: 10, InitStdev: 0.1, Burnin: 4}, 6},
		{bmf.Config{Dim: 3, Iters: 10, InitStdev: 0.1, Keep: 3}, 3},
		{bmf.Config{Dim: 3, Iters: 10, InitStdev: 0.1, Burnin: 9}, 1},
	}
	for _, tc := range tests {
		var kept int
		m, err := bmf.Train(context.Background(), d, tc.cfg, func(s bmf.IterStats) { kept = s.Kept })
		if err != nil {
			t.Fatal(err)
		}
		if tc.cfg.Samples() != tc.want || kept != tc.want || m.Dim != tc.want*tc.cfg.Dim {
			t.Errorf("%+v: Samples %d, kept %d, model dim %d; want %d samples", tc.cfg, tc.cfg.Samples(), kept, m.Dim, tc.want)
		}
	}
}

// On real data the sampler beats the item means clearly and is at least
// close to SGD matrix factorization with its defaults; averaging the
// samples beats the last sample alone.
func TestAccuracyML(t *testing.T) {
	s := split(t)
	cfg := bmf.Config{Dim: 16, Iters: 60, InitStdev: 0.1, Seed: 1}
	var first, last float64
	m, err := bmf.Train(context.Background(), s.Train, cfg, func(st bmf.IterStats) {
		if st.Iter == 1 {
			first = st.TrainRMSE
		}
		last = st.TrainRMSE
	})
	if err != nil {
		t.Fatal(err)
	}
	got := eval.Rating(m, s.Test).RMSE
	items := eval.Rating(baseline.FitItemMean(s.Train, 0), s.Test).RMSE
	mcfg := mf.DefaultConfig()
	mcfg.Seed = 1
	sgd, err := mf.Train(context.Background(), s.Train, mcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := eval.Rating(sgd, s.Test).RMSE
	cfg.Burnin = cfg.Iters - 1
	one := eval.Rating(train(t, s.Train, cfg), s.Test).RMSE
	t.Logf("test RMSE: BMF %.4f, last sample only %.4f, SGD MF %.4f, item means %.4f; train RMSE %.4f → %.4f", got, one, ref, items, first, last)
	if !(got < items-0.05) {
		t.Errorf("BMF %.4f does not beat the item means %.4f by 0.05", got, items)
	}
	if !(got < ref+0.01) {
		t.Errorf("BMF %.4f is not within 0.01 of SGD MF %.4f", got, ref)
	}
	if !(got < one-0.01) {
		t.Errorf("the sample average %.4f does not beat the last sample %.4f by 0.01", got, one)
	}
	if !(last < first) {
		t.Errorf("training RMSE rose from %.4f to %.4f", first, last)
	}
}

// Users without ratings (those of vendors left out of training) do not
// hold back the others: training with 90% of the users empty predicts the
// rest as well as training on an index space of those users alone.
func TestEmptyRowsDoNotMatter(t *testing.T) {
	s := split(t)
	nu := int32(s.Train.NumUsers() / 10)
	keep := func(d *ratings.Dataset) *ratings.Dataset {
		var idx []int
		for k, u := range d.Users {
			if u < nu {
				idx = append(idx, k)
			}
		}
		return d.Subset(idx)
	}
	tr, te := keep(s.Train), keep(s.Test)
	compact := *tr
	compact.UserIDs = compact.UserIDs[:nu]
	cfg := bmf.Config{Dim: 5, Iters: 60, InitStdev: 0.1, Seed: 2}
	sparse := eval.Rating(train(t, tr, cfg), te).RMSE
	dense := eval.Rating(train(t, &compact, cfg), te).RMSE
	t.Logf("test RMSE of %d users: with %d empty users %.4f, alone %.4f", nu, s.Train.NumUsers()-int(nu), sparse, dense)
	if !(sparse < dense+0.015) {
		t.Errorf("empty users raise the RMSE from %.4f to %.4f", dense, sparse)
	}
}
