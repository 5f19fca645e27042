package main

import (
	"context"
	"fmt"
	"math"

	"github.com/spf13/pflag"

	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// tuneFlags are --tune and its options: choose the method's step size and
// regularization before training (method.Tune), on a hold-out of the
// training data or on a file declared public.
type tuneFlags struct {
	tune     bool
	on       string  // --tune-on: a rating file declared public
	holdout  float64 // --tune-holdout
	epsScore float64 // --tune-eps
	keep     bool    // --tune-keep

	fs     *pflag.FlagSet
	df     *dataFlags       // read --tune-on like --data
	public *ratings.Dataset // --tune-on, loaded once
}

// register adds the tuning flags to fs; --tune-on is read with df's
// format flags.
func (t *tuneFlags) register(fs *pflag.FlagSet, df *dataFlags) {
	t.fs, t.df = fs, df
	fs.BoolVar(&t.tune, "tune", false, "choose the step size and regularization first, on a hold-out of the training data "+
		"(a private method by Liu–Talwar random stopping: its ε is added to the total, see the privacy note)")
	fs.StringVar(&t.on, "tune-on", "", "with --tune: tune on this rating file instead, declared public (read like --data, on its scale): no noise, no privacy cost")
	fs.Float64Var(&t.holdout, "tune-holdout", 0.2, "with --tune: fraction of the ratings held out to score the candidates")
	fs.Float64Var(&t.epsScore, "tune-eps", 0, "with --tune: ε of each candidate's noisy validation score (0: a tenth of the method's ε)")
	fs.BoolVar(&t.keep, "tune-keep", false, "with --tune: keep the selected candidate's model, trained on the tuning part, "+
		"instead of retraining on all training data (saves the retraining's ε)")
}

// fit trains mfl's method on train with seed, tuning it first when --tune
// is set, and records the method's Result in mfl. Each tuning report is
// appended to reports when reports is not nil.
func (t *tuneFlags) fit(ctx context.Context, a *app, mfl *methodFlags, train *ratings.Dataset, seed uint64, reports *[]*method.TuneReport) (*model.Model, error) {
	if !t.tune {
		for _, name := range []string{"tune-on", "tune-holdout", "tune-eps", "tune-keep"} {
			if t.fs != nil && t.fs.Changed(name) {
				return nil, fmt.Errorf("--%s: only with --tune", name)
			}
		}
		return mfl.fit(ctx, train, seed, a.stderr)
	}
	if t.on != "" && t.public == nil {
		pf := *t.df
		pf.data = t.on
		d, err := a.load(&pf)
		if err != nil {
			return nil, fmt.Errorf("--tune-on: %w", err)
		}
		d.Name = t.on // the report names the file as the user gave it
		t.public = d
	}
	if t.keep && t.public != nil {
		return nil, fmt.Errorf("--tune-keep: the candidates of --tune-on were trained on the public file; the model must be trained on --data")
	}
	name := mfl.spec.Name
	opt := method.TuneOptions{Seed: seed, ValFrac: t.holdout, EpsScore: t.epsScore, Public: t.public, KeepCandidate: t.keep,
		OnTrial: func(tr method.Trial) {
			switch {
			case tr.Diverged:
				fmt.Fprintf(a.stderr, "tune %s: candidate %d (%v) diverged\n", name, tr.N, tr.Candidate)
			case t.public != nil || mfl.spec.Claim.Unit == "none":
				fmt.Fprintf(a.stderr, "tune %s: candidate %d (%v): validation MSE %.4f\n", name, tr.N, tr.Candidate, tr.Score)
			default: // only the selected candidate's noisy score is released
				fmt.Fprintf(a.stderr, "tune %s: candidate %d (%v) trained and scored\n", name, tr.N, tr.Candidate)
			}
		}}
	if t.holdout <= 0 || t.holdout >= 1 {
		return nil, fmt.Errorf("--tune-holdout %g: want a fraction in (0, 1)", t.holdout)
	}
	var bar *progress.Bar
	defer func() { bar.Finish() }()
	hook := func(p method.Progress) {
		if bar == nil {
			bar = progress.New(a.stderr, int64(p.Epochs), "training with the chosen values", "epochs")
		}
		if !math.IsNaN(p.TrainRMSE) && p.TrainRMSE != 0 {
			bar.Describe(fmt.Sprintf("training with the chosen values (train RMSE %.4f)", p.TrainRMSE))
		}
		bar.Set(int64(p.Epoch))
	}
	m, res, rep, err := method.FitTuned(ctx, mfl.spec, mfl.cfg, train, seed, hook, opt)
	if err != nil {
		return nil, fmt.Errorf("--tune: %w", err)
	}
	mfl.result = res
	if reports != nil {
		*reports = append(*reports, rep)
	}
	kind := rep.ScoreKind
	if kind == "" {
		kind = "MSE"
	}
	how := fmt.Sprintf("validation %s %.4f", kind, rep.BestScore)
	switch {
	case rep.Public != "":
		how += " on " + rep.Public + " (declared public)"
	case rep.Private:
		how = fmt.Sprintf("noisy %s; tuning ε %.4g", how, rep.Eps)
	default:
		how += " (not private)"
	}
	fmt.Fprintf(a.stderr, "tune %s: selected %v of %d candidates tried (%s)\n", name, rep.Best, rep.Tried, how)
	return m, nil
}

// tuneReports are the tuning reports of a command's runs, in order.
type tuneReports = []*method.TuneReport
