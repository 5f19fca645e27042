package experiment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// codeVersion is part of every cell key; bump it when a change to the
// runner or to the evaluation changes results, so stored cells are redone.
const codeVersion = 1

// Cell kinds.
const (
	KindTest = "test" // train on the training part, measure on the test part
	KindCV   = "cv"   // one grid point on one inner fold of the training part
)

// Cell is one unit of work: one method with fully resolved parameters on
// one dataset, split seed and fold.
type Cell struct {
	Kind    string            `json:"kind"`
	Dataset string            `json:"dataset"`
	Variant string            `json:"variant,omitempty"`
	X       string            `json:"x,omitempty"` // the sweep value
	Method  string            `json:"method"`
	Label   string            `json:"label"`
	Seed    uint64            `json:"seed"`
	Fold    int               `json:"fold"`
	Grid    int               `json:"grid,omitempty"` // grid point, for KindCV
	Params  Params            `json:"params"`         // resolved, with defaults
	Data    map[string]string `json:"data,omitempty"` // data parameters
	Key     string            `json:"key"`
}

// Params are a method's hyperparameters as text by name: the form in
// which experiment files give them and cells are keyed. resolve checks
// them against the method's typed config.
type Params map[string]string

// resolve returns params over the defaults of s's config, as text. Every
// name must be a field of the config and every value must parse as the
// field's type; given values keep their text, so that cell keys do not
// depend on how a number is formatted back.
func resolve(s method.Spec, params Params) (Params, error) {
	if _, err := s.Configure(params); err != nil {
		return nil, err
	}
	out := Params(s.Text(s.New()))
	maps.Copy(out, params)
	return out, nil
}

// planMethod is one method of a plan.
type planMethod struct {
	MethodSpec
	spec    method.Spec
	index   int  // in Spec.Methods, -1 when added
	added   bool // added by the runner as a baseline
	private bool // makes a privacy claim
}

// unit is one (dataset, variant, sweep value, method): the cells that
// differ only by seed and fold.
type unit struct {
	dataset, variant, x string
	m                   *planMethod
	params              Params // resolved, before a grid choice
	data                map[string]string
	grid                []Params // grid points, nil without CV
	// cvGrid and cvData are the grid and data parameters the CV cells use:
	// grid and data, or, with CV.Once, those of the base setting (without
	// the sweep value), shared by every sweep point.
	cvGrid []Params
	cvData map[string]string
}

// Plan is an expanded spec.
type Plan struct {
	Spec *Spec
	// Methods are the runnable methods in report order, baselines added.
	Methods []*planMethod
	// Missing are the spec's methods that are not built yet.
	Missing []string
	// Warnings are parameters of the spec that no runnable method has.
	Warnings []string
	units    []*unit
	folds    int // outer folds per seed
}

// Expand resolves s into units of work: every registered method's
// parameters are checked here, so that a typo fails before anything runs.
func Expand(s *Spec) (*Plan, error) {
	p := &Plan{Spec: s, Missing: s.Missing()}
	sp, _ := ratings.ParseSplit(s.Split)
	p.folds = 1
	if sp.Kind == ratings.SplitKFold {
		p.folds = sp.K
	}
	for i, m := range s.Methods {
		ms, err := method.Lookup(m.Name)
		if err != nil {
			continue
		}
		p.Methods = append(p.Methods, &planMethod{MethodSpec: m, spec: ms, index: i, private: ms.Claim.Unit != "none"})
	}
	if !slices.ContainsFunc(s.Methods, func(m MethodSpec) bool { return m.Name == "mf" }) {
		ms, _ := method.Lookup("mf")
		p.Methods = append(p.Methods, &planMethod{MethodSpec: MethodSpec{Name: "mf", Label: "mf"}, spec: ms, index: -1, added: true})
	}
	if !slices.ContainsFunc(s.Methods, func(m MethodSpec) bool { return m.Name == "dp-itemavg" }) {
		ms, _ := method.Lookup("dp-itemavg")
		pm := &planMethod{MethodSpec: MethodSpec{Name: "dp-itemavg", Label: "dp-itemavg"}, spec: ms, index: -1, added: true, private: true}
		_, inPriv := s.Privacy["eps"]
		swept := s.Sweep != nil && s.Sweep.Param == "eps"
		if !inPriv && !swept {
			eps := s.BaselineEps
			if eps == "" {
				eps = s.Privacy["eps-max"]
			}
			if eps == "" {
				eps = "1"
			}
			pm.Params = map[string]Value{"eps": eps}
		}
		p.Methods = append(p.Methods, pm)
	}
	p.Warnings = p.unused()
	variants := s.Variants
	if len(variants) == 0 {
		variants = []Variant{{}}
	}
	xs := []Value{""}
	if s.Sweep != nil {
		xs = s.Sweep.Values
	}
	for _, ds := range s.Datasets {
		for _, v := range variants {
			for _, x := range xs {
				for _, m := range p.Methods {
					u, err := p.unit(ds, v, x, m)
					if err != nil {
						return nil, err
					}
					p.units = append(p.units, u)
				}
			}
		}
	}
	return p, nil
}

// unused lists the privacy, variant and sweep parameters that no runnable
// method has (a misspelt name, or one only a method not built yet has).
func (p *Plan) unused() []string {
	s := p.Spec
	var names []string
	add := func(src map[string]Value, where string) {
		for _, k := range slices.Sorted(maps.Keys(src)) {
			if !isDataParam(k) && !slices.ContainsFunc(p.Methods, func(m *planMethod) bool { return m.spec.Has(k) }) {
				names = append(names, where+" "+k)
			}
		}
	}
	add(s.Privacy, "privacy")
	for _, v := range s.Variants {
		add(v.Params, "variant "+v.Name)
	}
	if s.Sweep != nil {
		add(map[string]Value{s.Sweep.Param: ""}, "sweep")
	}
	return names
}

func (p *Plan) unit(ds string, v Variant, x Value, m *planMethod) (*unit, error) {
	s := p.Spec
	u := &unit{dataset: ds, variant: v.Name, x: string(x), m: m, data: map[string]string{}}
	params := Params{}
	setIf := func(src map[string]Value) {
		for k, val := range src {
			if isDataParam(k) {
				u.data[k] = string(val)
			} else if m.spec.Has(k) {
				params[k] = string(val)
			}
		}
	}
	setIf(s.Params)
	setIf(s.Privacy)
	setIf(v.Params)
	for k, val := range m.Params {
		params[k] = string(val) // strict: Resolve rejects an unknown name
	}
	base, baseData := maps.Clone(params), maps.Clone(u.data)
	if s.Sweep != nil {
		setIf(map[string]Value{s.Sweep.Param: x})
	}
	res, err := resolve(m.spec, params)
	if err != nil {
		return nil, p.paramErr(m, "", err)
	}
	u.params = res
	if u.grid, err = p.grid(m, res); err != nil {
		return nil, err
	}
	u.cvGrid, u.cvData = u.grid, u.data
	if s.CV.Once && s.Sweep != nil && len(u.grid) > 0 {
		if base, err = resolve(m.spec, base); err != nil {
			return nil, p.paramErr(m, "", err)
		}
		if u.cvGrid, err = p.grid(m, base); err != nil {
			return nil, err
		}
		u.cvData = baseData
	}
	return u, nil
}

// grid returns m's grid points over the resolved parameters res.
func (p *Plan) grid(m *planMethod, res Params) ([]Params, error) {
	var out []Params
	if len(m.Grid) > 0 {
		names := slices.Sorted(maps.Keys(m.Grid))
		points := []Params{{}}
		for _, n := range names {
			if !m.spec.Has(n) {
				return nil, p.paramErr(m, "grid: ", &method.ParamError{Method: m.Name, Name: n, Err: errors.New("no such parameter")})
			}
			var next []Params
			for _, pt := range points {
				for _, val := range m.Grid[n] {
					q := maps.Clone(pt)
					q[n] = string(val)
					next = append(next, q)
				}
			}
			points = next
		}
		for _, pt := range points {
			full := maps.Clone(res)
			maps.Copy(full, pt)
			if _, err := resolve(m.spec, full); err != nil {
				return nil, p.paramErr(m, "grid: ", err)
			}
			out = append(out, full)
		}
	}
	return out, nil
}

// paramErr is an ErrSpec for a parameter error of method m, naming the
// file and line of the key that set the parameter.
func (p *Plan) paramErr(m *planMethod, what string, err error) error {
	loc := p.Spec.Name
	var pe *method.ParamError
	if errors.As(err, &pe) {
		loc = p.Spec.where(m.index, pe.Name)
	}
	return fmt.Errorf("%w: %s: method %s: %s%w", ErrSpec, loc, m.label(), what, err)
}

// seeds returns the split seeds.
func (p *Plan) seeds() []uint64 {
	out := make([]uint64, p.Spec.Seeds)
	for r := range out {
		out[r] = p.Spec.Seed + uint64(r)
	}
	return out
}

// cvCells returns the cross-validation cells of u (nil without a grid).
func (p *Plan) cvCells(u *unit) []*Cell {
	var out []*Cell
	inner := p.Spec.CV.Folds
	if p.Spec.CV.Holdout > 0 {
		inner = 1
	}
	for g, pt := range u.cvGrid {
		for f := range inner {
			c := p.cell(u, KindCV, p.Spec.Seed, f, pt)
			c.Grid = g
			c.Data = u.cvData
			c.Key = p.key(c)
			out = append(out, c)
		}
	}
	return out
}

// testCells returns the test cells of u with params (the grid choice, or
// u's params).
func (p *Plan) testCells(u *unit, params Params) []*Cell {
	var out []*Cell
	for _, seed := range p.seeds() {
		for f := range p.folds {
			c := p.cell(u, KindTest, seed, f, params)
			c.Key = p.key(c)
			out = append(out, c)
		}
	}
	return out
}

func (p *Plan) cell(u *unit, kind string, seed uint64, fold int, params Params) *Cell {
	return &Cell{Kind: kind, Dataset: u.dataset, Variant: u.variant, X: u.x, Method: u.m.Name, Label: u.m.label(),
		Seed: seed, Fold: fold, Params: params, Data: u.data}
}

// NumCells returns the number of cells of the plan, before deduplication.
func (p *Plan) NumCells() int {
	n := 0
	for _, u := range p.units {
		n += len(p.cvCells(u)) + p.Spec.Seeds*p.folds
	}
	return n
}

// resultNeutral are method parameters that by contract do not change a
// fitted model, only how it is computed or what the server sees: the
// worker count, secure aggregation between off and ideal (the server
// adds the same float uploads either way; hdpmf's TestSecureAggregation
// checks the models agree, and on ml-latest-small they are
// bit-identical), and ease's max-items (a catalog size above which it
// refuses to run, never a change to the model it fits). secagg=masked is
// not neutral: it runs the integer path with Skellam noise, another model
// (see neutral).
var resultNeutral = []string{"workers", "secagg", "max-items"}

// neutral reports whether parameter name set to value leaves the fitted
// model as it is (resultNeutral).
func neutral(name, value string) bool {
	if !slices.Contains(resultNeutral, name) {
		return false
	}
	if name == "secagg" {
		a, err := protocol.ParseAggregation(value)
		return err == nil && a != protocol.AggMasked
	}
	return true
}

// key hashes everything that can change a cell's result: the code
// version, the data and its preprocessing, the split, seed and fold, the
// method and all its parameters (except the resultNeutral ones), and
// what is measured. Labels, variant names
// and sweep values as written are not part of it; their effect is.
func (p *Plan) key(c *Cell) string {
	s := p.Spec
	params := maps.Clone(c.Params)
	maps.DeleteFunc(params, neutral)
	k := map[string]any{
		"v": codeVersion, "kind": c.Kind, "dataset": c.Dataset, "pre": s.Preprocess,
		"split": s.Split, "seed": c.Seed, "fold": c.Fold, "method": c.Method,
		"params": sortedPairs(params), "data": sortedPairs(c.Data),
	}
	if c.Kind == KindCV {
		k["cv"] = []any{s.CV.Folds, s.CV.Holdout}
	} else {
		if slices.Contains(s.Metrics, "cdf") {
			k["cdf"] = s.CDF
		}
		if slices.Contains(s.Metrics, "auc") {
			k["rank"] = s.Rank
		}
		if len(c.Data) > 0 && (c.Data[DataVendors] != "" || c.Data[DataItemVendors] != "") {
			k["vendors"] = s.Vendors
		}
	}
	b, _ := json.Marshal(k)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

func sortedPairs[M ~map[string]string](m M) [][2]string {
	out := make([][2]string, 0, len(m))
	for k, v := range m {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

// xFloat parses a sweep value for plotting; ok is false for text.
func xFloat(x string) (float64, bool) {
	f, err := strconv.ParseFloat(x, 64)
	return f, err == nil
}
