package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/privrec/privrec/internal/progress"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// methodFlags configure the method to train: --method, and one typed flag
// per field of that method's config, bound to the config itself. Which
// method's flags exist is read from the command line before it is parsed,
// so `--method hdpmf --help` lists hdpmf's flags and nothing else.
type methodFlags struct {
	name   string
	err    error // an unknown --method, reported when the command runs
	spec   method.Spec
	cfg    any // the typed config the flags set
	result *method.Result
}

// methodArg returns the value of --method in args, or "mf".
func methodArg(args []string) string {
	for k, a := range args {
		switch {
		case a == "--":
			return "mf"
		case a == "--method" && k+1 < len(args):
			return args[k+1]
		case strings.HasPrefix(a, "--method="):
			return strings.TrimPrefix(a, "--method=")
		}
	}
	return "mf"
}

// register adds --method and the flags of the method named in args to fs.
func (f *methodFlags) register(fs *pflag.FlagSet, args []string) {
	fs.StringVar(&f.name, "method", "mf", "method (privrec methods lists them; --method M --help shows M's flags)")
	s, err := method.Lookup(methodArg(args))
	if err != nil {
		f.err = fmt.Errorf("--method %q: %w", methodArg(args), err)
		s, _ = method.Lookup("mf")
	}
	f.spec, f.cfg = s, s.New()
	for _, fl := range s.Fields(f.cfg) {
		fs.Var(fl.Value, fl.Name, fl.Usage)
		if fl.Value.Type() == "bool" {
			fs.Lookup(fl.Name).NoOptDefVal = "true"
		}
	}
}

// validate reports an unknown --method.
func (f *methodFlags) validate() error { return f.err }

// String prints the method and its settings, as a run reports them.
func (f *methodFlags) String() string {
	return f.spec.Name + " " + method.String(f.spec.Fields(f.cfg))
}

// config returns the method's settings as a JSON object.
func (f *methodFlags) config() json.RawMessage { return method.JSON(f.spec.Fields(f.cfg)) }

// fit trains the method on train with the given seed, showing a bar on w.
func (f *methodFlags) fit(ctx context.Context, train *ratings.Dataset, seed uint64, w io.Writer) (*model.Model, error) {
	var bar *progress.Bar
	defer func() { bar.Finish() }()
	m, res, err := f.spec.Fit(ctx, train, f.cfg, seed, func(p method.Progress) {
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

// methodInfo is one method in `privrec methods --json`.
type methodInfo struct {
	Name    string    `json:"name"`
	Summary string    `json:"summary"`
	Ranks   bool      `json:"ranks,omitempty"`
	Limits  string    `json:"limits,omitempty"`
	Privacy claimInfo `json:"privacy"`
	// DefaultEps is what the method spends at its defaults (nil for a
	// non-private method).
	DefaultEps *budgetInfo `json:"default_eps"`
	// Serve is true when privrec serve runs the method (it has a
	// client/server protocol, method.Spec.Federated).
	Serve  bool        `json:"serve"`
	Config []paramInfo `json:"config"`
}

// claimInfo is a method's privacy claim in privrec methods --json: what
// it protects, whom it trusts and against which neighbours, without the
// amounts a run spends (default_eps gives those at the defaults), which a
// claim does not have.
type claimInfo struct {
	Unit         string `json:"unit"`
	Trusted      string `json:"trusted"`
	Note         string `json:"note,omitempty"`
	Aggregation  string `json:"aggregation,omitempty"`
	Noise        string `json:"noise,omitempty"`
	Neighbouring string `json:"neighbouring,omitempty"`
}

// claimOf returns the claim part of p.
func claimOf(p model.Privacy) claimInfo {
	return claimInfo{Unit: p.Unit, Trusted: p.Trusted, Note: p.Note, Aggregation: p.Aggregation, Noise: p.Noise, Neighbouring: p.Neighbouring}
}

// paramInfo is one hyperparameter in `privrec methods --json`.
type paramInfo struct {
	Name    string `json:"name"`
	Field   string `json:"field,omitempty"` // the Go config field it sets
	Type    string `json:"type"`
	Default any    `json:"default"`
	Usage   string `json:"usage"`
}

func (a *app) methodsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "methods",
		Short: "List the methods, one name per line (--json: configs and claims)",
		Long: `methods prints the name of every method, one per line, for scripts. With
--json it prints each method's summary, its privacy claim (what one
protected unit is, who is trusted, the neighbouring relation; no ε, as a
claim spends nothing), default_eps (ε of one round and in total at the
defaults for that unit, with δ; null for a non-private method; a range
where the spend depends on the data), serve (whether privrec serve runs
it) and its configuration: every parameter with its type, default and
meaning.`,
		Example: `  for m in $(privrec methods); do privrec train --method $m --epochs 3 --out /tmp/m.model; done
  privrec methods --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !asJSON {
				for _, n := range method.Names() {
					fmt.Fprintln(a.stdout, n)
				}
				return nil
			}
			var out []methodInfo
			for _, s := range method.All() {
				mi := methodInfo{Name: s.Name, Summary: s.Summary, Ranks: s.Ranks, Limits: s.Limits, Privacy: claimOf(s.Claim),
					DefaultEps: budgetOf(s), Serve: s.Federated != nil, Config: []paramInfo{}}
				for _, f := range s.Fields(s.New()) {
					def := f.Value.Get()
					if x, ok := def.(float64); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
						def = f.Value.String()
					}
					mi.Config = append(mi.Config, paramInfo{f.Name, f.Go, f.Value.Type(), def, f.Usage})
				}
				out = append(out, mi)
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print every method's config, defaults and privacy claim as JSON")
	return cmd
}

// nameFlagsInErrors makes cmd, whose flags include f's, report a
// method's refusal of its config by its flag names (flagNames).
func (f *methodFlags) nameFlagsInErrors(cmd *cobra.Command) {
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error { return f.flagNames(run(c, args)) }
}

// flagNames rewrites a method's refusal of its config (an error wrapping
// method.ErrParam), which names the config's Go fields ("Eps = -1 must be
// > 0"), in the flags that set them ("--eps = -1 must be > 0"): a whole
// Go selector ("Spec.User.Low"), or its last part when no other field
// shares it. Other errors are returned as they are.
func (f *methodFlags) flagNames(err error) error {
	if err == nil || !errors.Is(err, method.ErrParam) {
		return err
	}
	fields := f.spec.Fields(f.spec.New())
	last := map[string]int{}
	for _, fl := range fields {
		if fl.Go != "" {
			last[fl.Go[strings.LastIndexByte(fl.Go, '.')+1:]]++
		}
	}
	var pairs []string
	for _, fl := range fields {
		if fl.Go == "" {
			continue
		}
		pairs = append(pairs, fl.Go, "--"+fl.Name)
		if short := fl.Go[strings.LastIndexByte(fl.Go, '.')+1:]; short != fl.Go && last[short] == 1 {
			pairs = append(pairs, short, "--"+fl.Name)
		}
	}
	msg := err.Error()
	out := replaceWords(msg, pairs)
	if out == msg {
		return err
	}
	return &hintError{msg: out, err: err}
}

// replaceWords replaces each whole-word occurrence in s of pairs[2k]
// with pairs[2k+1], longest first; a word is a run of letters, digits,
// '_' and '.'.
func replaceWords(s string, pairs []string) string {
	to := map[string]string{}
	for k := 0; k+1 < len(pairs); k += 2 {
		to[pairs[k]] = pairs[k+1]
	}
	isWord := func(r rune) bool { return r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexFunc(s, isWord)
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !isWord(r) })
		if j < 0 {
			j = len(s)
		}
		w := s[:j]
		trail := ""
		for strings.HasSuffix(w, ".") { // a sentence's full stop
			w, trail = w[:len(w)-1], "."+trail
		}
		if r, ok := to[w]; ok {
			w = r
		}
		b.WriteString(w + trail)
		s = s[j:]
	}
	return b.String()
}

// flagError explains a flag error by the method whose flags were
// registered: a flag of another method is unknown here, and the error says
// in one line which parameters this method has instead. Other flag errors
// (a bad value of a known flag) already say what is wrong.
func (f *methodFlags) flagError(cmd *cobra.Command, err error) error {
	if !strings.Contains(err.Error(), "unknown flag") && !strings.Contains(err.Error(), "unknown shorthand flag") {
		return fmt.Errorf("method %s: %w", f.spec.Name, err)
	}
	var names []string
	for _, fl := range f.spec.Fields(f.spec.New()) {
		names = append(names, "--"+fl.Name)
	}
	has := "none: it trains in one pass"
	if len(names) > 0 {
		has = strings.Join(names, ", ")
	}
	return fmt.Errorf("%w: not a parameter of method %s (its parameters: %s)", err, f.spec.Name, has)
}
