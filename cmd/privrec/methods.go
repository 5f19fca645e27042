package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/privrec/privrec/baseline"
	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/ratings"
)

// model is what a fitted method gives: predictions and item scores.
type model interface {
	Predict(u, i int32) float32
	ScoreItems(u int32, dst []float32) []float32
}

// methodFlags configure the method to train.
type methodFlags struct {
	method   string
	mf       mf.Config
	schedule string
	shrink   float64
}

func (f *methodFlags) register(fs *pflag.FlagSet) {
	def := mf.DefaultConfig()
	f.mf = def
	fs.StringVar(&f.method, "method", "mf", "method: "+strings.Join(methodNames(), ", "))
	fs.IntVar(&f.mf.Dim, "dim", def.Dim, "latent dimension K")
	fs.IntVar(&f.mf.Epochs, "epochs", def.Epochs, "training epochs")
	fs.Float64Var(&f.mf.LearnRate, "lr", def.LearnRate, "initial learning rate")
	fs.StringVar(&f.schedule, "schedule", string(def.Schedule), "learning-rate schedule: constant, step (÷5 at 25% and 75% of the epochs), exp")
	fs.Float64Var(&f.mf.Decay, "decay", def.Decay, "learning-rate decay per epoch for --schedule exp")
	fs.Float64Var(&f.mf.Reg, "reg", def.Reg, "L2 regularization of the factors")
	fs.Float64Var(&f.mf.RegBias, "reg-bias", def.RegBias, "L2 regularization of the biases")
	fs.Float64Var(&f.mf.InitScale, "init", def.InitScale, "standard deviation of the initial factors")
	fs.BoolVar(&f.mf.Biased, "biased", def.Biased, "learn a global mean and user and item biases")
	fs.IntVar(&f.mf.Workers, "workers", 0, "parallel workers (default: all cores); results do not depend on it")
	fs.Float64Var(&f.shrink, "shrink", 0, "itemavg: pseudo-ratings at the global mean added to each item")
}

// methods lists the trainable methods.
var methods = map[string]string{
	"mf":      "matrix factorization by SGD (non-private reference)",
	"itemavg": "item mean rating (non-private baseline)",
	"mean":    "global mean rating (non-private baseline)",
}

func methodNames() []string {
	names := make([]string, 0, len(methods))
	for n := range methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (f *methodFlags) validate() error {
	if _, ok := methods[f.method]; !ok {
		return fmt.Errorf("--method %q: want one of %s", f.method, strings.Join(methodNames(), ", "))
	}
	f.mf.Schedule = mf.Schedule(f.schedule)
	if f.method == "mf" {
		if err := f.mf.Validate(); err != nil {
			return err
		}
	}
	if f.shrink < 0 {
		return fmt.Errorf("--shrink %g: must be ≥ 0", f.shrink)
	}
	return nil
}

// fit trains the method on train with the given seed, showing a bar on w.
func (f *methodFlags) fit(ctx context.Context, train *ratings.Dataset, seed uint64, w io.Writer) (model, error) {
	switch f.method {
	case "mean":
		return baseline.FitMean(train), nil
	case "itemavg":
		return baseline.FitItemMean(train, f.shrink), nil
	case "mf":
		cfg := f.mf
		cfg.Seed = seed
		bar := progress.New(w, int64(cfg.Epochs), "training", "epochs")
		defer bar.Finish()
		return mf.Train(ctx, train, cfg, func(s mf.EpochStats) {
			bar.Describe(fmt.Sprintf("training (train RMSE %.4f)", s.TrainRMSE))
			bar.Add(1)
		})
	}
	return nil, fmt.Errorf("unknown method %q", f.method)
}

// config returns the method's hyperparameters for reports.
func (f *methodFlags) config() map[string]any {
	switch f.method {
	case "mf":
		c := f.mf
		return map[string]any{"dim": c.Dim, "epochs": c.Epochs, "lr": c.LearnRate, "schedule": c.Schedule,
			"decay": c.Decay, "reg": c.Reg, "reg_bias": c.RegBias, "init": c.InitScale, "biased": c.Biased}
	case "itemavg":
		return map[string]any{"shrink": f.shrink}
	}
	return map[string]any{}
}
