package experiment

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// ErrSpec is wrapped by every error about an experiment spec.
var ErrSpec = errors.New("experiment: bad spec")

// ErrUnknown is wrapped when no shipped spec has the requested name.
var ErrUnknown = errors.New("experiment: unknown experiment")

//go:embed specs/*.yaml
var specFS embed.FS

// Value is one parameter value as text. In YAML it may be written as a
// number, a boolean or a string; it is kept as the text written.
type Value string

// UnmarshalYAML accepts any scalar.
func (v *Value) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a single value, got a %s", n.Line, kindName(n.Kind))
	}
	*v = Value(n.Value)
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "non-scalar"
}

// Spec is a declarative experiment: which data, which split and seeds,
// which methods with which parameters, what is swept, what is measured,
// and the paper's numbers to set beside ours. See the package doc for the
// YAML form.
type Spec struct {
	Name        string `yaml:"name"`
	Paper       string `yaml:"paper"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	// Datasets are names for datasets.Open (or paths).
	Datasets   []string   `yaml:"datasets"`
	Preprocess Preprocess `yaml:"preprocess"`
	// Split is a ratings.ParseSplit description, like "leave:10".
	Split string `yaml:"split"`
	// Seeds is the number of repeats; seeds Seed, Seed+1, ... (Seed
	// defaults to 1).
	Seeds int    `yaml:"seeds"`
	Seed  uint64 `yaml:"seed"`
	// Methods to run. mf and dp-itemavg are added when missing.
	Methods []MethodSpec `yaml:"methods"`
	// Params are given to every method that has the parameter.
	Params map[string]Value `yaml:"params"`
	// Privacy is the privacy specification, passed as method parameters
	// to every method that has them (after Params).
	Privacy map[string]Value `yaml:"privacy"`
	// BaselineEps is the ε of the added dp-itemavg baseline when neither
	// Privacy nor the sweep sets "eps"; default: privacy "eps-max", else 1.
	BaselineEps Value `yaml:"baseline_eps"`
	// Variants are a second axis (like K = 10 and K = 5): named parameter
	// sets, each applied to the methods that have the parameters.
	Variants []Variant `yaml:"variants"`
	// Sweep is the swept parameter, a method parameter or a data parameter
	// (train-fraction, vendors, item-vendors).
	Sweep *Sweep `yaml:"sweep"`
	// Vendors is the number of vendors users (data parameter "vendors")
	// or items ("item-vendors") are assigned to (default 10).
	Vendors int `yaml:"vendors"`
	// CV configures hyperparameter selection for methods with a grid.
	CV CV `yaml:"cv"`
	// Metrics to report: rmse, mse, mae, auc, cdf. Default: rmse, mse, mae.
	Metrics []string `yaml:"metrics"`
	// CDF are the absolute-error thresholds of the error CDF.
	CDF []float64 `yaml:"cdf"`
	// Rank configures AUC (and precision/recall/NDCG at K).
	Rank Rank `yaml:"rank"`
	// Curves plots the methods' per-epoch training RMSE.
	Curves bool `yaml:"curves"`
	// Reference holds the paper's numbers.
	Reference []Reference `yaml:"reference"`
	// Tolerance is the relative difference, in percent, within which a
	// number counts as reproduced (default 10).
	Tolerance float64 `yaml:"tolerance"`
	// Quick are the overrides of a quick run.
	Quick *Quick `yaml:"quick"`

	file  string         // the file name Parse was given, for errors
	lines map[string]int // line of every key by path, from Parse
	// applied holds the quick overrides ApplyQuick applied, for the
	// report to state what ran; nil for a full run.
	applied *Quick
}

// Preprocess filters the data before splitting.
type Preprocess struct {
	MinUserRatings int `yaml:"min_user_ratings"`
	MinItemRatings int `yaml:"min_item_ratings"`
}

// MethodSpec is one method of an experiment.
type MethodSpec struct {
	Name   string           `yaml:"name"`
	Label  string           `yaml:"label"`
	Params map[string]Value `yaml:"params"`
	// Grid lists candidate values; the best combination is chosen by
	// cross-validation on the training part.
	Grid map[string][]Value `yaml:"grid"`
	// Needs documents, for a method that is not built yet, what it is.
	Note string `yaml:"note"`
}

// Variant is a named parameter set.
type Variant struct {
	Name   string           `yaml:"name"`
	Params map[string]Value `yaml:"params"`
}

// Sweep is one swept parameter.
type Sweep struct {
	Param  string  `yaml:"param"`
	Label  string  `yaml:"label"`
	Values []Value `yaml:"values"`
	LogX   bool    `yaml:"log_x"`
}

// CV configures cross-validation on the training part.
type CV struct {
	// Folds of k-fold CV (default 5); Holdout, when set, is instead the
	// training fraction of a single holdout split.
	Folds   int     `yaml:"folds"`
	Holdout float64 `yaml:"holdout"`
	// Metric to minimize: rmse, mse or mae (default: the first metric).
	Metric string `yaml:"metric"`
	// Once selects the hyperparameters once per dataset, variant and
	// method, at the spec's base setting (without the sweep value), and
	// uses that choice at every sweep point; otherwise every sweep point
	// has its own selection.
	Once bool `yaml:"once"`
}

// Rank configures the ranking metrics.
type Rank struct {
	K        int     `yaml:"k"`
	Relevant float64 `yaml:"relevant"`
}

// Reference is one number from the paper.
type Reference struct {
	Dataset string  `yaml:"dataset"`
	Method  string  `yaml:"method"` // a method label or name
	Metric  string  `yaml:"metric"`
	Variant string  `yaml:"variant"`
	X       Value   `yaml:"x"`
	Value   float64 `yaml:"value"`
	SD      float64 `yaml:"sd"`
	Source  string  `yaml:"source"`
}

// Quick holds the overrides of a quick run; empty fields keep the spec's.
type Quick struct {
	Datasets    []string         `yaml:"datasets"`
	Preprocess  *Preprocess      `yaml:"preprocess"`
	Split       string           `yaml:"split"`
	Seeds       int              `yaml:"seeds"`
	Params      map[string]Value `yaml:"params"`
	SweepValues []Value          `yaml:"sweep_values"`
	Variants    []string         `yaml:"variants"`
	// NoCV drops every grid (the methods use their params).
	NoCV bool `yaml:"no_cv"`
	CV   *CV  `yaml:"cv"`
}

// Data parameters: swept or set by variants, they change the data, not a
// method.
const (
	// DataTrainFraction keeps this fraction of each user's training
	// ratings (ratings.SubsampleUsers).
	DataTrainFraction = "train-fraction"
	// DataVendors trains on the users of the first N of Spec.Vendors
	// random vendors and tests on vendor 0's users (horizontal split).
	DataVendors = "vendors"
	// DataItemVendors trains on the items of the first N of Spec.Vendors
	// random vendors and tests on vendor 0's items (vertical split).
	DataItemVendors = "item-vendors"
)

func isDataParam(name string) bool {
	return name == DataTrainFraction || name == DataVendors || name == DataItemVendors
}

var knownMetrics = []string{"rmse", "mse", "mae", "auc", "cdf"}

// Parse decodes a spec strictly: an unknown key is an error naming it and
// its line. name is used in error messages.
func Parse(data []byte, name string) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: empty", ErrSpec, name)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrSpec, name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: more than one YAML document", ErrSpec, name)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSpec, name, err)
	}
	s.file, s.lines = name, map[string]int{}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil {
		keyLines(&root, "", s.lines)
	}
	// Every method is built, so a name the registry lacks is a misspelling:
	// an error, not a method to skip.
	for k, m := range s.Methods {
		at := name
		if l, ok := s.lines[fmt.Sprintf("methods.%d.name", k)]; ok {
			at = fmt.Sprintf("%s:%d", name, l)
		}
		ms, err := method.Lookup(m.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: methods[%d]: unknown method %q (want one of %s)", ErrSpec, at, k, m.Name, strings.Join(method.Names(), ", "))
		}
		// A ranking-only method's scores are not ratings: rating errors
		// of them mean nothing.
		for _, metric := range s.Metrics {
			if ms.Ranks && slices.Contains([]string{"rmse", "mse", "mae", "cdf"}, metric) {
				return nil, fmt.Errorf("%w: %s: methods[%d]: %s is a ranking-only method, whose scores are not ratings: metric %s is not defined for it (use metrics: [auc])", ErrSpec, at, k, m.Name, metric)
			}
		}
	}
	return &s, nil
}

// keyLines records the line of every mapping key under n by its path,
// like "methods.2.params.lr".
func keyLines(n *yaml.Node, path string, lines map[string]int) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			keyLines(c, path, lines)
		}
	case yaml.MappingNode:
		for k := 0; k+1 < len(n.Content); k += 2 {
			p := join(n.Content[k].Value)
			lines[p] = n.Content[k].Line
			keyLines(n.Content[k+1], p, lines)
		}
	case yaml.SequenceNode:
		for k, c := range n.Content {
			keyLines(c, join(strconv.Itoa(k)), lines)
		}
	}
}

// where returns "file:line" of the key that sets parameter name for the
// method at index i of Methods (-1 for a baseline the runner added),
// looking where a value comes from, most specific first; the file alone
// when no key is found.
func (s *Spec) where(i int, name string) string {
	paths := []string{fmt.Sprintf("methods.%d.params.%s", i, name), fmt.Sprintf("methods.%d.grid.%s", i, name)}
	for k := range s.Variants {
		paths = append(paths, fmt.Sprintf("variants.%d.params.%s", k, name))
	}
	paths = append(paths, "privacy."+name, "params."+name)
	if s.Sweep != nil && s.Sweep.Param == name {
		paths = append(paths, "sweep.values")
	}
	for _, p := range paths {
		if l, ok := s.lines[p]; ok {
			return fmt.Sprintf("%s:%d", s.file, l)
		}
	}
	if s.file == "" {
		return s.Name
	}
	return s.file
}

// check validates what can be checked without running and fills defaults.
func (s *Spec) check() error {
	if s.Name == "" {
		return errors.New("name: missing")
	}
	if len(s.Datasets) == 0 {
		return errors.New("datasets: missing")
	}
	if s.Split == "" {
		s.Split = "random:0.9"
	}
	if _, err := ratings.ParseSplit(s.Split); err != nil {
		return fmt.Errorf("split: %v", err)
	}
	if s.Seeds == 0 {
		s.Seeds = 1
	}
	if s.Seeds < 0 {
		return fmt.Errorf("seeds: %d, want ≥ 1", s.Seeds)
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Vendors == 0 {
		s.Vendors = 10
	}
	if s.Tolerance == 0 {
		s.Tolerance = 10
	}
	if len(s.Metrics) == 0 {
		s.Metrics = []string{"rmse", "mse", "mae"}
	}
	for _, m := range s.Metrics {
		if !slices.Contains(knownMetrics, m) {
			return fmt.Errorf("metrics: unknown metric %q (want %s)", m, strings.Join(knownMetrics, ", "))
		}
	}
	if slices.Contains(s.Metrics, "cdf") && len(s.CDF) == 0 {
		s.CDF = []float64{0.25, 0.5, 0.75, 1, 1.5, 2, 3}
	}
	if slices.Contains(s.Metrics, "auc") && s.Rank.K == 0 {
		s.Rank.K = 10
	}
	if len(s.Methods) == 0 {
		return errors.New("methods: none")
	}
	seen := map[string]bool{}
	for k, m := range s.Methods {
		if m.Name == "" {
			return fmt.Errorf("methods[%d]: name missing", k)
		}
		if seen[m.label()] {
			return fmt.Errorf("methods[%d]: label %q used twice (set label:)", k, m.label())
		}
		seen[m.label()] = true
		for p, vs := range m.Grid {
			if len(vs) == 0 {
				return fmt.Errorf("methods[%d] (%s): grid %s: no values", k, m.Name, p)
			}
			if s.Sweep != nil && p == s.Sweep.Param {
				return fmt.Errorf("methods[%d] (%s): grid %s: is the swept parameter", k, m.Name, p)
			}
		}
	}
	if s.Sweep != nil {
		if s.Sweep.Param == "" || len(s.Sweep.Values) == 0 {
			return errors.New("sweep: needs param and values")
		}
		if s.Sweep.Param == DataTrainFraction {
			for _, v := range s.Sweep.Values {
				if f, err := strconv.ParseFloat(string(v), 64); err != nil || !(f > 0 && f <= 1) {
					return fmt.Errorf("sweep: %s value %q not in (0,1]", DataTrainFraction, v)
				}
			}
		}
	}
	vn := map[string]bool{}
	for k, v := range s.Variants {
		if v.Name == "" || vn[v.Name] {
			return fmt.Errorf("variants[%d]: name missing or repeated", k)
		}
		vn[v.Name] = true
	}
	if s.CV.Folds == 0 {
		s.CV.Folds = 5
	}
	if s.CV.Folds < 2 {
		return fmt.Errorf("cv: folds %d, want ≥ 2", s.CV.Folds)
	}
	if s.CV.Holdout != 0 && !(s.CV.Holdout > 0 && s.CV.Holdout < 1) {
		return fmt.Errorf("cv: holdout %g not in (0,1)", s.CV.Holdout)
	}
	if s.CV.Metric == "" {
		s.CV.Metric = s.Metrics[0]
		if !slices.Contains([]string{"rmse", "mse", "mae"}, s.CV.Metric) {
			s.CV.Metric = "rmse"
		}
	}
	if !slices.Contains([]string{"rmse", "mse", "mae"}, s.CV.Metric) {
		return fmt.Errorf("cv: metric %q, want rmse, mse or mae", s.CV.Metric)
	}
	for k, r := range s.Reference {
		if r.Method == "" || r.Metric == "" {
			return fmt.Errorf("reference[%d]: method and metric are required", k)
		}
	}
	return nil
}

func (m MethodSpec) label() string {
	if m.Label != "" {
		return m.Label
	}
	return m.Name
}

// OnlyDatasets returns a copy of s restricted to the named datasets, in
// the spec's order; a name the spec does not list is an error.
func (s *Spec) OnlyDatasets(names []string) (*Spec, error) {
	for _, n := range names {
		if !slices.Contains(s.Datasets, n) {
			return nil, fmt.Errorf("%w: %s: no dataset %q (the spec has %s)", ErrSpec, s.Name, n, strings.Join(s.Datasets, ", "))
		}
	}
	c := *s
	c.Datasets = slices.DeleteFunc(slices.Clone(s.Datasets), func(d string) bool { return !slices.Contains(names, d) })
	return &c, nil
}

// ApplyQuick returns a copy of s with its quick overrides applied.
func (s *Spec) ApplyQuick() *Spec {
	c := *s
	c.Methods = slices.Clone(s.Methods)
	q := s.Quick
	if q == nil {
		return &c
	}
	if len(q.Datasets) > 0 {
		c.Datasets = q.Datasets
		// The paper's numbers are for the paper's datasets.
	}
	if q.Preprocess != nil {
		c.Preprocess = *q.Preprocess
	}
	if q.Split != "" {
		c.Split = q.Split
	}
	if q.Seeds > 0 {
		c.Seeds = q.Seeds
	}
	if len(q.Params) > 0 {
		c.Params = maps.Clone(s.Params)
		if c.Params == nil {
			c.Params = map[string]Value{}
		}
		maps.Copy(c.Params, q.Params)
		// Quick params override the methods' own values too.
		for k := range c.Methods {
			m := &c.Methods[k]
			m.Params = maps.Clone(m.Params)
			for p, v := range q.Params {
				if _, ok := m.Params[p]; ok {
					m.Params[p] = v
				}
			}
		}
	}
	if len(q.SweepValues) > 0 && s.Sweep != nil {
		sw := *s.Sweep
		sw.Values = q.SweepValues
		c.Sweep = &sw
	}
	if len(q.Variants) > 0 {
		c.Variants = slices.DeleteFunc(slices.Clone(s.Variants), func(v Variant) bool { return !slices.Contains(q.Variants, v.Name) })
	}
	if q.NoCV {
		for k := range c.Methods {
			c.Methods[k].Grid = nil
		}
	}
	if q.CV != nil {
		c.CV = *q.CV
		if c.CV.Folds == 0 {
			c.CV.Folds = 2
		}
		if c.CV.Metric == "" {
			c.CV.Metric = s.CV.Metric
		}
		c.CV.Once = c.CV.Once || s.CV.Once
	}
	c.Quick = nil
	c.applied = q
	return &c
}

// Missing lists the methods of s that are not registered (not built yet).
// Parse refuses such a spec; Missing is for specs built in code.
func (s *Spec) Missing() []string {
	var out []string
	for _, m := range s.Methods {
		if _, err := method.Lookup(m.Name); err != nil && !slices.Contains(out, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// Names lists the shipped experiments, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(specFS, "specs")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Source returns the YAML text of the shipped experiment name.
func Source(name string) ([]byte, error) {
	b, err := specFS.ReadFile(path.Join("specs", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Get returns the shipped experiment name, decoded.
func Get(name string) (*Spec, error) {
	b, err := Source(name)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b, name+".yaml")
	if err != nil {
		return nil, err
	}
	if s.Name != name {
		return nil, fmt.Errorf("%w: %s.yaml: name %q differs from the file name", ErrSpec, name, s.Name)
	}
	return s, nil
}
