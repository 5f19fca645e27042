package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/privrec/privrec/ratings"
)

// ErrUsage is wrapped by every error about an unknown attack or method, or
// an invalid Config.
var ErrUsage = errors.New("audit: bad request")

// Role says what a row of the audit must show.
type Role string

const (
	// Control is the naive variant an attack must break: if the attack does
	// not beat the bound on it, the attack is too weak to vouch for
	// anything, and the audit fails.
	Control Role = "control"
	// Protected is a method whose claim the attack tests: the attack's
	// success must stay within the bound the claim implies.
	Protected Role = "protected"
	// Finding is a configuration outside the claim (secure aggregation
	// off, say), measured for information and never failed.
	Finding Role = "finding"
)

// Status is the verdict of a row.
type Status string

const (
	Broken   Status = "broken"             // a control the attack broke (as it must)
	Within   Status = "within bound"       // a protected method that held
	Failed   Status = "FAIL"               // a control that held, or a protected method that leaked
	Info     Status = "info"               // a finding
	NotBuilt Status = "target not built"   // the method's package does not exist yet
	NoHook   Status = "no transcript hook" // the method cannot be observed yet
)

// Result is one row of the audit: one attack on one target.
type Result struct {
	Attack string `json:"attack"` // attack name, like "inversion"
	Method string `json:"method"` // target name, like "dpmf" or "fedmf"
	Role   Role   `json:"role"`
	// Case tells rows of one method and attack apart ("secagg off",
	// "restarts"); empty when there is one.
	Case string `json:"case,omitempty"`
	// Setting gives the target's parameters and the data, in words.
	Setting string `json:"setting"`
	// Metric names what Value measures, like "balanced accuracy".
	Metric string `json:"metric"`
	// Value is the attack's success, with a 95% confidence interval
	// [Lo, Hi] (Wilson for accuracies, bootstrap over users for error
	// ratios; for the server-knows-h audit, Lo is the lower confidence
	// bound on the log-ratio and Hi is unused).
	Value, Lo, Hi float64
	// N is the number of scored cases (ratings, item bits, samples).
	N int `json:"n"`
	// Baseline is what an attacker learns from nothing: chance, or the
	// global mean's error.
	Baseline float64 `json:"baseline"`
	// Bound is the line between broken and within, the stated margin
	// included: a control is broken when its whole interval lies beyond it
	// (the attack beats the bound, with 95% confidence); a protected method
	// holds when its interval reaches back to it (no significant evidence
	// that the attack beats the bound). With the sample sizes of a full
	// audit the intervals are narrow, so the two rules are close to
	// comparing the estimate itself.
	Bound float64 `json:"bound"`
	// HigherLeaks tells the direction: true when a larger Value is a
	// larger leak (accuracy, δ), false when smaller is (error ratios).
	HigherLeaks bool   `json:"higher_leaks"`
	Status      Status `json:"status"`
	// Curve, when not nil, shows Value against CurveX (rounds observed,
	// say) up to the final figure.
	Curve  []Point `json:"curve,omitempty"`
	CurveX string  `json:"curve_x,omitempty"`
	// Note explains the bound and anything else a reader needs.
	Note    string        `json:"note,omitempty"`
	Elapsed time.Duration `json:"elapsed"`

	// extraFail, when set on a protected row, fails it whatever the
	// bound says (a second condition of the attack), and says why.
	extraFail string
}

// Point is one point of a Result's curve, with its 95% interval.
type Point struct {
	X             float64
	Value, Lo, Hi float64
}

// judge sets r.Status from Role, Value, the interval and Bound.
func (r *Result) judge() {
	if r.Status == NotBuilt || r.Status == NoHook {
		return
	}
	switch r.Role {
	case Finding:
		r.Status = Info
	case Control:
		beyond := r.Lo > r.Bound
		if !r.HigherLeaks {
			beyond = r.Hi < r.Bound
		}
		r.Status = Failed
		if beyond {
			r.Status = Broken
		}
	case Protected:
		within := r.Lo <= r.Bound
		if !r.HigherLeaks {
			within = r.Hi >= r.Bound
		}
		r.Status = Failed
		if within && r.extraFail == "" {
			r.Status = Within
		}
		if r.extraFail != "" {
			r.Note += "; FAILED: " + r.extraFail
		}
	}
}

// OK reports whether the row does what its role asks (findings and
// targets that do not exist yet are not failures).
func (r *Result) OK() bool { return r.Status != Failed }

// Config selects and sizes an audit run.
type Config struct {
	// Data is the rating data the data-driven attacks run on (gradient
	// inversion, average and shape attacks); nil means a synthetic set.
	Data *ratings.Dataset
	// Quick shrinks every attack (fewer users, rounds and samples) so that
	// the whole audit takes about a minute of CPU (57 s measured with the
	// sensitivity canary).
	Quick bool
	// Seed labels every random stream of the run.
	Seed uint64
	// Workers is the number of client goroutines (0: all cores); results
	// do not depend on it.
	Workers int
	// Attack and Method, when not empty, restrict the run to one attack
	// and to one target (the attack's controls always run with it, so that
	// the result can be trusted).
	Attack, Method string
	// Log, when not nil, receives one line per finished row.
	Log func(string)
}

// Report is the outcome of an audit run.
type Report struct {
	Results []Result
	// Data describes the data set the data-driven attacks used.
	Data    string
	Quick   bool
	Seed    uint64
	Elapsed time.Duration
}

// OK reports whether every control was broken and every protected method
// stayed within its bound.
func (r *Report) OK() bool {
	for i := range r.Results {
		if !r.Results[i].OK() {
			return false
		}
	}
	return true
}

// Failures returns the rows that failed.
func (r *Report) Failures() []Result {
	var out []Result
	for _, x := range r.Results {
		if !x.OK() {
			out = append(out, x)
		}
	}
	return out
}

// testCase is one row to compute.
type testCase struct {
	method string
	role   Role
	run    func(ctx context.Context, e *env) (Result, error)
}

// Attack is one attack of the audit and the targets it runs on.
type Attack struct {
	// Name is the --attack name.
	Name string
	// Title is a one-line description.
	Title string
	// Doc explains the attack, its control and its bound, for the report.
	Doc string
	// cases lists the rows; the first ones are the controls.
	cases func(e *env) []testCase
}

// Methods lists the target names of the attack, controls first.
func (a *Attack) Methods() []string {
	var out []string
	for _, c := range a.cases(&env{}) {
		if !slices.Contains(out, c.method) {
			out = append(out, c.method)
		}
	}
	return out
}

var attacks []*Attack

func register(a *Attack) { attacks = append(attacks, a) }

// Attacks returns every attack in report order.
func Attacks() []*Attack {
	order := map[string]int{"inversion": 0, "difference": 1, "average": 2, "shape": 3, "grid": 4, "server-h": 5, "canary": 6}
	out := slices.Clone(attacks)
	slices.SortStableFunc(out, func(a, b *Attack) int { return order[a.Name] - order[b.Name] })
	return out
}

// Lookup returns the attack called name.
func Lookup(name string) (*Attack, error) {
	for _, a := range attacks {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w: no attack %q (have %s)", ErrUsage, name, strings.Join(AttackNames(), ", "))
}

// AttackNames lists the attack names in report order.
func AttackNames() []string {
	var out []string
	for _, a := range Attacks() {
		out = append(out, a.Name)
	}
	return out
}

// MethodNames lists every target name of every attack.
func MethodNames() []string {
	var out []string
	for _, a := range Attacks() {
		for _, m := range a.Methods() {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Run runs the attacks cfg selects and returns their rows.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	sel := Attacks()
	if cfg.Attack != "" {
		a, err := Lookup(cfg.Attack)
		if err != nil {
			return nil, err
		}
		sel = []*Attack{a}
	}
	if cfg.Method != "" {
		var keep []*Attack
		for _, a := range sel {
			if slices.Contains(a.Methods(), cfg.Method) {
				keep = append(keep, a)
			}
		}
		if len(keep) == 0 {
			where := "any attack"
			if cfg.Attack != "" {
				where = "attack " + cfg.Attack + " (it has " + strings.Join(sel[0].Methods(), ", ") + ")"
			}
			return nil, fmt.Errorf("%w: method %q is not a target of %s; targets: %s", ErrUsage, cfg.Method, where, strings.Join(MethodNames(), ", "))
		}
		sel = keep
	}
	e, err := newEnv(cfg)
	if err != nil {
		return nil, err
	}
	rep := &Report{Data: e.dataDesc, Quick: cfg.Quick, Seed: cfg.Seed}
	for _, a := range sel {
		for _, c := range a.cases(e) {
			if cfg.Method != "" && c.method != cfg.Method && c.role != Control {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			r, err := c.run(ctx, e)
			if err != nil {
				return nil, fmt.Errorf("audit: %s on %s: %w", a.Name, c.method, err)
			}
			r.Attack, r.Method, r.Role = a.Name, c.method, c.role
			r.Elapsed = time.Since(t0)
			r.judge()
			rep.Results = append(rep.Results, r)
			if cfg.Log != nil {
				cfg.Log(r.line())
			}
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// line is a one-line summary of r.
func (r *Result) line() string {
	if r.Status == NotBuilt || r.Status == NoHook {
		return fmt.Sprintf("%-10s %-22s %-9s %s", r.Attack, r.name(), r.Role, r.Status)
	}
	return fmt.Sprintf("%-10s %-22s %-9s %s %s [%s, %s] bound %s: %s (%.1fs)", r.Attack, r.name(), r.Role, r.Metric,
		num(r.Value), num(r.Lo), num(r.Hi), num(r.Bound), r.Status, r.Elapsed.Seconds())
}

// name returns the method with its case, if any.
func (r *Result) name() string {
	if r.Case == "" {
		return r.Method
	}
	return r.Method + " (" + r.Case + ")"
}

// num formats a figure with 4 significant digits.
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case math.IsInf(x, 1):
		return "∞"
	case math.IsInf(x, -1):
		return "−∞"
	}
	return fmt.Sprintf("%.4g", x)
}
