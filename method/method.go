// Package method is the registry of privrec's recommendation methods: one
// table that the command line, the experiment runner, the audit and (next)
// the server share, so that a method is named, configured and trained the
// same way everywhere.
//
// Each method's hyperparameters are a typed struct owned by the method's
// package: an mf.Config for "mf", a hdpmf.Config for "hdpmf", "dpmf"
// and "pdpmf", and so on; the field docs there give every unit and say
// what ε protects. A Spec names the method, states its privacy claim,
// returns its default config (New), names the config's fields for flags
// and experiment files (Fields), and trains it (Fit). From Go:
//
//	s, _ := method.Lookup("hdpmf")
//	cfg := s.New().(*hdpmf.Config)
//	cfg.Eps = 0.5
//	m, res, err := s.Fit(ctx, train, cfg, seed, nil)
//
// Fit returns the one factor model every method yields (model.Model) and
// a Result whose Privacy is the claim with what the run spent.
//
// The command line and experiment files set fields by name, as text
// (Spec.Set): a name the method does not have, or a value that does not
// parse as the field's type, is an error naming the field.
//
// A method that runs on the client/server protocol (package protocol) has
// Spec.Federated: its server and its clients built apart, the server from
// public information only, the clients from their users' ratings, for a
// deployment in different processes. Spec.NewServer and Spec.NewClients
// build them with Fit's scale handling; run over protocol.Run with the
// same seed they give Fit's model bit for bit.
//
// Every method trains on ratings mapped from the data's declared scale
// onto Internal (1..5), so its defaults mean the same on any scale; a
// private method refuses a scale read off the ratings. Spec.Limits says
// where a method at its defaults does not beat the global mean, measured
// on every dataset privrec ships, and why.
package method

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/privrec/privrec/fm"
	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/pmf"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/sdcf"
)

// Result is what a Fit reports besides the model.
type Result struct {
	// Privacy is the method's claim with the ε and δ this run spent.
	Privacy model.Privacy
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

// A Hook, when not nil, is called by Fit after every epoch or round.
type Hook func(Progress)

// Spec is one method of the registry.
type Spec struct {
	Name    string        // registry key, like "mf" or "hdpmf"
	Summary string        // one line for listings
	Claim   model.Privacy // the privacy claim, without the spent amounts
	// Catalog marks a method whose releases span the whole item index,
	// which must then be a public catalog (ratings.Dataset.Catalog), not
	// the items that happen to be rated: privrec loads the dataset's item
	// list for it (ratings.LoadOptions.Catalog).
	Catalog bool
	// Ranks marks one-class ranking methods, whose predictions are scores
	// rather than ratings: evaluate them by ranking metrics (AUC).
	Ranks bool
	// Limits says, when not empty, where the method at its defaults and
	// its default ε does not beat the global mean, and why: measured on
	// every dataset privrec ships (docs/results/defaults).
	Limits string
	// Federated, when not nil, builds the method's client/server protocol
	// in halves for a deployment (see NewServer and NewClients); nil for
	// a centralized method.
	Federated *Federated

	newConfig func() any
	fields    func(cfg any) []Field
	fit       func(ctx context.Context, train *ratings.Dataset, cfg any, seed uint64, hook Hook) (*model.Model, *Result, error)
	check     func(cfg any) error
}

// New returns a new config of the method holding its defaults: a pointer
// to the method package's config type.
func (s Spec) New() any { return s.newConfig() }

// Fields returns the named fields of cfg, a config of this method (from
// New), in the order the method documents them. Setting a Field sets cfg.
// It panics when cfg is another type: a programming error.
func (s Spec) Fields(cfg any) []Field {
	if err := s.check(cfg); err != nil {
		panic(err)
	}
	return s.fields(cfg)
}

// Field returns the field of cfg called name.
func (s Spec) Field(cfg any, name string) (Field, error) {
	fs := s.Fields(cfg)
	for _, f := range fs {
		if f.Name == name {
			return f, nil
		}
	}
	names := make([]string, len(fs))
	for k, f := range fs {
		names[k] = f.Name
	}
	return Field{}, &ParamError{Method: s.Name, Name: name,
		Err: fmt.Errorf("no such parameter (it has %s)", strings.Join(names, ", "))}
}

// Has reports whether the method has a parameter called name.
func (s Spec) Has(name string) bool {
	return slices.ContainsFunc(s.Fields(s.New()), func(f Field) bool { return f.Name == name })
}

// Set sets the field of cfg called name from its text form.
func (s Spec) Set(cfg any, name, value string) error {
	f, err := s.Field(cfg, name)
	if err != nil {
		return err
	}
	if err := f.Value.Set(value); err != nil {
		return &ParamError{Method: s.Name, Name: name, Value: value, Err: err}
	}
	return nil
}

// A ParamError is a parameter that a method does not have, or a value that
// does not parse as its field's type. It wraps ErrParam.
type ParamError struct {
	Method, Name string
	Value        string // the text given, "" for an unknown name
	Err          error  // what is wrong
}

func (e *ParamError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%v: %s %s: %v", ErrParam, e.Method, e.Name, e.Err)
	}
	return fmt.Sprintf("%v: %s %s = %q: %v", ErrParam, e.Method, e.Name, e.Value, e.Err)
}

// Unwrap returns ErrParam and the cause.
func (e *ParamError) Unwrap() []error { return []error{ErrParam, e.Err} }

// Configure returns a new config of the method with the given fields set
// from text, over the defaults: the edge where flags and experiment files
// meet the typed configs.
func (s Spec) Configure(params map[string]string) (any, error) {
	cfg := s.New()
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if err := s.Set(cfg, k, params[k]); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// Text returns every field of cfg as text, by name: what Configure reads.
func (s Spec) Text(cfg any) map[string]string {
	fs := s.Fields(cfg)
	out := make(map[string]string, len(fs))
	for _, f := range fs {
		out[f.Name] = f.Value.String()
	}
	return out
}

// Fit trains the method on train with cfg (a config of this method, from
// New) and seed. hook, when not nil, is called after every epoch or round.
// The model records the method, its config and its privacy report.
//
// A config that is not valid is an error wrapping ErrParam; a run whose
// factors became NaN or infinite fails with an error that wraps
// ErrDiverged; a cancelled run returns an error that wraps ctx's error.
// A private method refuses training data that ratings.Dataset.Validate
// refuses (a repeated (user, item) pair wraps ratings.ErrDuplicate).
func (s Spec) Fit(ctx context.Context, train *ratings.Dataset, cfg any, seed uint64, hook Hook) (*model.Model, *Result, error) {
	if err := s.check(cfg); err != nil {
		return nil, nil, err
	}
	if train.Scale.Inferred && s.Claim.Unit != "none" {
		return nil, nil, fmt.Errorf("%s: %w: the scale %v of %s was read off its ratings, which leaks them and lets one stray "+
			"rating widen the noise; declare the public scale (privrec: --scale MIN,MAX[,STEP]; Go: ratings.LoadOptions.Scale)",
			s.Name, ErrUndeclaredScale, train.Scale, train.Name)
	}
	if err := s.checkPrivateData(train); err != nil {
		return nil, nil, err
	}
	cfg, seed, test, err := s.noiseSource(ctx, cfg, seed)
	if err != nil {
		return nil, nil, err
	}
	in, a, b := toInternal(train)
	if hook != nil && a != 1 {
		inner := hook
		hook = func(p Progress) {
			p.TrainRMSE *= float64(a)
			inner(p)
		}
	}
	m, res, err := s.fit(ctx, in, cfg, seed, hook)
	if err != nil {
		if !errors.Is(err, ErrDiverged) && slices.ContainsFunc(diverged, func(e error) bool { return errors.Is(err, e) }) {
			err = fmt.Errorf("%w: %w", ErrDiverged, err)
		}
		return nil, nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	s.finish(m, res, cfg, train, in != train, a, b)
	s.labelNoise(res, test)
	return m, res, nil
}

// checkPrivateData refuses, for a private method, training data that
// Dataset.Validate refuses: a repeated (user, item) pair above all, since
// every sensitivity assumes a user rates an item at most once.
func (s Spec) checkPrivateData(train *ratings.Dataset) error {
	if s.Claim.Unit == "none" {
		return nil
	}
	if err := train.Validate(); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	return nil
}

// finish maps a model trained on the Internal scale back to train's
// declared scale (when mapped is set, by a·p + b; a ranking model's
// scores are not ratings and stay as trained, as a served run publishes
// them) and stamps it with the method, its config and the privacy the
// run spent.
func (s Spec) finish(m *model.Model, res *Result, cfg any, train *ratings.Dataset, mapped bool, a, b float32) {
	if mapped {
		if !m.Ranking {
			m.Affine(a, b)
		}
		m.Scale = train.Scale.Declared()
		if r, ok := res.Stats["train_rmse"]; ok {
			res.Stats["train_rmse"] = r * float64(a)
		}
	}
	m.Method = s.Name
	m.Config = JSON(s.Fields(cfg))
	m.Privacy = res.Privacy
}

// ErrUndeclaredScale is wrapped by the error of a private method asked to
// train on data whose rating scale was inferred from the ratings.
var ErrUndeclaredScale = errors.New("a private method needs a declared rating scale")

// Internal is the rating scale every method trains on: MovieLens's 1..5
// stars, on which the methods' defaults (step sizes, initial scales,
// clipping bounds, noise) were chosen. Fit maps a dataset on another scale
// affinely onto it, trains, and maps the model's predictions back, so the
// defaults mean the same on any scale. The map is public (it depends on
// the declared scale alone), so every privacy claim holds unchanged.
var Internal = ratings.Scale{Min: 1, Max: 5, Step: 1}

// toInternal returns train mapped affinely onto Internal, and the a, b
// with rating = a·internal + b; train itself (a = 1, b = 0) when it is on
// 1..5 already or its scale has no range.
func toInternal(train *ratings.Dataset) (*ratings.Dataset, float32, float32) {
	sc := train.Scale
	if !mapsScale(sc) {
		return train, 1, 0
	}
	lo, span := float64(sc.Min), float64(sc.Max-sc.Min)
	in := float64(Internal.Max - Internal.Min)
	d := *train
	d.Values = make([]float32, len(train.Values))
	for k, v := range train.Values {
		d.Values[k] = float32(float64(Internal.Min) + (float64(v)-lo)*in/span)
	}
	d.Scale = internalScale(sc)
	a := float32(span / in)
	return &d, a, float32(lo - float64(Internal.Min)*span/in)
}

// FromInternal returns the affine map p ↦ a·p + b that takes predictions
// on Internal back to the declared scale sc, as Fit applies it to a
// model trained on data of scale sc (model.Model.Affine); a = 1, b = 0
// when sc is not mapped.
func FromInternal(sc ratings.Scale) (a, b float32) {
	if !mapsScale(sc) {
		return 1, 0
	}
	span, in := float64(sc.Max-sc.Min), float64(Internal.Max-Internal.Min)
	return float32(span / in), float32(float64(sc.Min) - float64(Internal.Min)*span/in)
}

// mapsScale reports whether toInternal maps data on scale sc.
func mapsScale(sc ratings.Scale) bool {
	return !(sc.Min == Internal.Min && sc.Max == Internal.Max) && sc.Max > sc.Min
}

// internalScale returns the scale toInternal maps data on sc to: sc
// itself when it does not map it, else Internal with sc's step mapped.
func internalScale(sc ratings.Scale) ratings.Scale {
	if !mapsScale(sc) {
		return sc
	}
	span := float64(sc.Max - sc.Min)
	in := Internal
	in.Step = float32(float64(sc.Step) * float64(Internal.Max-Internal.Min) / span)
	return in
}

// ErrParam is wrapped by every error about a hyperparameter.
var ErrParam = errors.New("bad parameter")

// ErrDiverged reports a training run that diverged: a legitimate outcome
// of a hyperparameter setting (an experiment records it), not a bug.
var ErrDiverged = errors.New("training diverged")

// diverged are the method packages' divergence errors.
var diverged = []error{mf.ErrDiverged, pmf.ErrDiverged, sdcf.ErrDiverged, fm.ErrDiverged}

var registry = map[string]Spec{}

// define registers a method whose config type is C: def gives the
// defaults, bind names C's fields, fit trains it. It panics on a
// duplicate name, a programming error caught by every test run.
func define[C any](s Spec, def func() C, bind func(*C) []Field,
	fit func(ctx context.Context, train *ratings.Dataset, cfg *C, seed uint64, hook Hook) (*model.Model, *Result, error)) {
	if _, dup := registry[s.Name]; dup {
		panic("method: duplicate method " + s.Name)
	}
	name := s.Name
	s.Limits = limits[name]
	s.newConfig = func() any { c := def(); return &c }
	s.check = func(cfg any) error {
		if _, ok := cfg.(*C); !ok {
			return fmt.Errorf("%w: %s takes a %T, not a %T", ErrParam, name, new(C), cfg)
		}
		return nil
	}
	s.fields = func(cfg any) []Field { return goNames(cfg, bind(cfg.(*C))) }
	s.fit = func(ctx context.Context, train *ratings.Dataset, cfg any, seed uint64, hook Hook) (*model.Model, *Result, error) {
		return fit(ctx, train, cfg.(*C), seed, hook)
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

// paramErr is an ErrParam with a message.
func paramErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrParam, fmt.Sprintf(format, a...))
}

// invalid wraps a config's Validate error as an ErrParam, keeping it.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrParam, err)
}
