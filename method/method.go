// Package method is the registry of privrec's recommendation methods: one
// table that the command line, the experiment runner and the tests share,
// so that a method is named, configured and trained the same way
// everywhere.
//
// A method is a Spec: its name, its hyperparameters (Param, with text
// defaults, so that flags and experiment files set them alike), the
// privacy claim it makes, and a Fit function that trains it on a training
// set and returns a Model. Fit also returns a Result with the privacy
// actually spent, as the method's accountant counted it.
//
// Hyperparameters travel as text in Params and are checked by Spec.Resolve:
// an unknown name or a value that does not parse is an error naming the
// parameter, never silently ignored.
package method

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/pmf"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/sdcf"
)

// Model is a fitted recommender. Indices are the training set's.
type Model interface {
	// Predict returns the predicted rating of item i by user u.
	Predict(u, i int32) float32
	// ScoreItems writes a ranking score for every item for user u into dst
	// (grown if needed) and returns it.
	ScoreItems(u int32, dst []float32) []float32
}

// Param describes one hyperparameter of a method.
type Param struct {
	Name    string // flag and experiment-spec key, like "dim" or "eps"
	Default string // the value when none is given, as text
	Usage   string // one line for --help
}

// Privacy is a method's privacy claim and what a run spent.
type Privacy struct {
	// Unit is what one protected change is: "rating value", "rating
	// existence", "user", or "none" for a non-private method.
	Unit string `json:"unit"`
	// Trusted names who sees raw data: "nobody" (untrusted server),
	// "the recommender" (a trusted curator), or "everyone".
	Trusted string `json:"trusted"`
	// EpsRound is the largest ε any protected unit spends in one round
	// (0 for a non-private method).
	EpsRound float64 `json:"eps_round"`
	// EpsTotal is the largest ε any protected unit spends over the whole
	// run, by the composition the method's proof uses.
	EpsTotal float64 `json:"eps_total"`
	// Delta is the largest δ of any unit in total (0 for pure ε-DP).
	Delta float64 `json:"delta"`
	// Note says how EpsTotal composes, or what the claim does not cover.
	Note string `json:"note,omitempty"`
}

// Result is what a Fit reports besides the model.
type Result struct {
	Privacy Privacy
	// Stats holds method-specific figures (like "train_rmse" or
	// "kept_fraction") for reports.
	Stats map[string]float64
}

// Progress is what Fit reports after each epoch or round.
type Progress struct {
	Epoch, Epochs int     // finished epochs and the total
	TrainRMSE     float64 // training error on the method's own scale, NaN if unknown
	EpsSpent      float64 // largest ε spent by any unit so far
}

// Spec is one method.
type Spec struct {
	Name    string  // registry key, like "mf" or "hdpmf"
	Summary string  // one line for listings
	Claim   Privacy // the claim, without the spent amounts
	Params  []Param
	// Fit trains the method on train with resolved params (see Resolve)
	// and seed. hook, when not nil, is called after every epoch or round.
	Fit func(ctx context.Context, train *ratings.Dataset, p Params, seed uint64, hook func(Progress)) (Model, *Result, error)
}

// ErrParam is wrapped by every error about a hyperparameter.
var ErrParam = errors.New("method: bad parameter")

// Params holds hyperparameter values by name, as text.
type Params map[string]string

// Resolve returns the spec's full parameter set: p's values over the
// defaults. A name the spec does not have is an error.
func (s Spec) Resolve(p Params) (Params, error) {
	out := make(Params, len(s.Params))
	for _, d := range s.Params {
		out[d.Name] = d.Default
	}
	for k, v := range p {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("%w: %s has no parameter %q (it has %s)", ErrParam, s.Name, k, strings.Join(s.ParamNames(), ", "))
		}
		out[k] = v
	}
	return out, nil
}

// ParamNames lists the spec's parameter names in order.
func (s Spec) ParamNames() []string {
	names := make([]string, len(s.Params))
	for i, p := range s.Params {
		names[i] = p.Name
	}
	return names
}

// Has reports whether the spec has a parameter name.
func (s Spec) Has(name string) bool {
	return slices.ContainsFunc(s.Params, func(p Param) bool { return p.Name == name })
}

func (p Params) get(name string) (string, error) {
	v, ok := p[name]
	if !ok {
		return "", fmt.Errorf("%w: %q not set", ErrParam, name)
	}
	return v, nil
}

// Float returns parameter name as a float64.
func (p Params) Float(name string) (float64, error) {
	v, err := p.get(name)
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s = %q is not a number", ErrParam, name, v)
	}
	return f, nil
}

// Int returns parameter name as an int.
func (p Params) Int(name string) (int, error) {
	v, err := p.get(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%w: %s = %q is not an integer", ErrParam, name, v)
	}
	return n, nil
}

// Bool returns parameter name as a bool.
func (p Params) Bool(name string) (bool, error) {
	v, err := p.get(name)
	if err != nil {
		return false, err
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%w: %s = %q is not true or false", ErrParam, name, v)
	}
	return b, nil
}

// String returns parameter name as text.
func (p Params) String(name string) (string, error) { return p.get(name) }

// Reader reads several parameters and keeps the first error, so that a
// Fit function can read its configuration in a few lines:
//
//	r := p.Reader()
//	cfg.Dim = r.Int("dim")
//	cfg.Reg = r.Float("reg")
//	if err := r.Err(); err != nil { ... }
type Reader struct {
	p   Params
	err error
}

// Reader returns a Reader of p.
func (p Params) Reader() *Reader { return &Reader{p: p} }

// Float reads a float parameter.
func (r *Reader) Float(name string) float64 {
	v, err := r.p.Float(name)
	r.keep(err)
	return v
}

// Int reads an integer parameter.
func (r *Reader) Int(name string) int {
	v, err := r.p.Int(name)
	r.keep(err)
	return v
}

// Bool reads a boolean parameter.
func (r *Reader) Bool(name string) bool {
	v, err := r.p.Bool(name)
	r.keep(err)
	return v
}

// String reads a text parameter.
func (r *Reader) String(name string) string {
	v, err := r.p.String(name)
	r.keep(err)
	return v
}

// Err returns the first error of the reads.
func (r *Reader) Err() error { return r.err }

func (r *Reader) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

var registry = map[string]Spec{}

// register adds s to the registry; it panics on a duplicate name, which
// is a programming error caught by every test run.
func register(s Spec) {
	if _, dup := registry[s.Name]; dup {
		panic("method: duplicate method " + s.Name)
	}
	registry[s.Name] = s
}

// Lookup returns the method called name.
func Lookup(name string) (Spec, error) {
	s, ok := registry[name]
	if !ok {
		return Spec{}, fmt.Errorf("unknown method %q: want one of %s", name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// Names lists the registered methods, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// All returns the registered methods sorted by name.
func All() []Spec {
	out := make([]Spec, 0, len(registry))
	for _, n := range Names() {
		out = append(out, registry[n])
	}
	return out
}

// Fit resolves params for the method called name and trains it.
//
// A training run whose factors became NaN or infinite fails with an error
// that wraps ErrDiverged (and the method package's own error).
func Fit(ctx context.Context, name string, train *ratings.Dataset, params Params, seed uint64, hook func(Progress)) (Model, *Result, error) {
	s, err := Lookup(name)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.Resolve(params)
	if err != nil {
		return nil, nil, err
	}
	m, res, err := s.Fit(ctx, train, p, seed, hook)
	if err != nil && !errors.Is(err, ErrDiverged) && slices.ContainsFunc(diverged, func(e error) bool { return errors.Is(err, e) }) {
		err = fmt.Errorf("%w: %w", ErrDiverged, err)
	}
	return m, res, err
}

// ErrDiverged reports a training run that diverged: a legitimate outcome
// of a hyperparameter setting (an experiment records it), not a bug.
var ErrDiverged = errors.New("method: training diverged")

// diverged are the method packages' divergence errors.
var diverged = []error{mf.ErrDiverged, pmf.ErrDiverged, sdcf.ErrDiverged}

func fmtErr(base error, format string, a ...any) error {
	return fmt.Errorf("%w: %s", base, fmt.Sprintf(format, a...))
}
