package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// model is what a fitted method gives: predictions and item scores.
type model = method.Model

// methodFlags configure the method to train: --method and one flag per
// hyperparameter of any registered method. Only the flags given on the
// command line are passed on, so every method keeps its own defaults.
type methodFlags struct {
	method string
	fs     *pflag.FlagSet
	values map[string]*string
	spec   method.Spec
	params method.Params // resolved, after validate
	result *method.Result
}

func (f *methodFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	f.values = map[string]*string{}
	fs.StringVar(&f.method, "method", "mf", "method: "+strings.Join(method.Names(), ", "))
	type info struct {
		usage    string
		defaults []string // "method: default"
		def      string
		same     bool
	}
	params := map[string]*info{}
	var order []string
	for _, s := range method.All() {
		for _, p := range s.Params {
			in, ok := params[p.Name]
			if !ok {
				in = &info{usage: p.Usage, def: p.Default, same: true}
				params[p.Name] = in
				order = append(order, p.Name)
			}
			in.defaults = append(in.defaults, s.Name+": "+p.Default)
			if p.Default != in.def {
				in.same = false
			}
		}
	}
	slices.Sort(order)
	for _, name := range order {
		in := params[name]
		usage := in.usage
		if in.same {
			usage += fmt.Sprintf(" (default %s)", in.def)
		} else {
			usage += " (default " + strings.Join(in.defaults, ", ") + ")"
		}
		f.values[name] = fs.String(name, "", usage)
		if in.def == "true" || in.def == "false" {
			fs.Lookup(name).NoOptDefVal = "true"
		}
	}
}

// validate checks --method and resolves the hyperparameters given for it;
// a flag that the method does not have is an error, not silently ignored.
func (f *methodFlags) validate() error {
	s, err := method.Lookup(f.method)
	if err != nil {
		return fmt.Errorf("--method %q: want one of %s", f.method, strings.Join(method.Names(), ", "))
	}
	given := method.Params{}
	for name, v := range f.values {
		if f.fs.Changed(name) {
			if !s.Has(name) {
				return fmt.Errorf("--%s: method %s has no such parameter (it has %s)", name, s.Name, strings.Join(s.ParamNames(), ", "))
			}
			given[name] = *v
		}
	}
	p, err := s.Resolve(given)
	if err != nil {
		return err
	}
	f.spec, f.params = s, p
	return nil
}

// fit trains the method on train with the given seed, showing a bar on w.
func (f *methodFlags) fit(ctx context.Context, train *ratings.Dataset, seed uint64, w io.Writer) (model, error) {
	var bar *progress.Bar
	defer func() { bar.Finish() }()
	m, res, err := f.spec.Fit(ctx, train, f.params, seed, func(p method.Progress) {
		if bar == nil {
			bar = progress.New(w, int64(p.Epochs), "training", "epochs")
		}
		desc := "training"
		if !math.IsNaN(p.TrainRMSE) && p.TrainRMSE != 0 {
			desc = fmt.Sprintf("training (train RMSE %.4f)", p.TrainRMSE)
		}
		if p.EpsSpent > 0 {
			desc += fmt.Sprintf(" ε %.3g", p.EpsSpent)
		}
		bar.Describe(desc)
		bar.Set(int64(p.Epoch))
	})
	f.result = res
	return m, err
}

// config returns the method's resolved hyperparameters for reports, with
// numbers and booleans as such.
func (f *methodFlags) config() map[string]any {
	out := make(map[string]any, len(f.params))
	for k, v := range f.params {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		} else if x, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = x
		} else if b, err := strconv.ParseBool(v); err == nil {
			out[k] = b
		} else {
			out[k] = v
		}
	}
	return out
}
