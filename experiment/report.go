package experiment

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/eval"
)

// group is the records of one (dataset, variant, sweep value, method).
type group struct {
	dataset, variant, x string
	m                   *planMethod
	recs                []*Record
}

func (g *group) values(metric string) []float64 {
	out := make([]float64, 0, len(g.recs))
	for _, r := range g.recs {
		v, ok := r.Metrics[metric]
		if metric == "seconds" {
			v, ok = Num(r.Seconds), true
		}
		if !ok {
			v = Num(math.NaN())
		}
		out = append(out, float64(v))
	}
	return out
}

func (g *group) summary(metric string) eval.Summary {
	xs := slices.DeleteFunc(g.values(metric), math.IsNaN)
	return eval.Summarize(xs)
}

// groups returns the groups in plan order (dataset, variant, x, method).
func groups(o *Outcome) []*group {
	var out []*group
	idx := map[string]*group{}
	for _, u := range o.Plan.units {
		k := unitName(u)
		g := &group{dataset: u.dataset, variant: u.variant, x: u.x, m: u.m}
		idx[k] = g
		out = append(out, g)
	}
	for _, r := range o.Records {
		if g := idx[r.Dataset+"/"+r.Variant+"/"+r.X+"/"+r.Label]; g != nil {
			g.recs = append(g.recs, r)
		}
	}
	return out
}

// reportMetrics are the scalar metrics reported, in order.
func reportMetrics(s *Spec) []string {
	var out []string
	for _, m := range s.Metrics {
		if m != "cdf" {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = []string{"rmse"}
	}
	return out
}

// refMethod is the first private method: significance is tested against it.
func refMethod(p *Plan) *planMethod {
	for _, m := range p.Methods {
		if m.private {
			return m
		}
	}
	return nil
}

// paper finds the paper's number for a result.
func paper(s *Spec, dataset, variant, x string, m *planMethod, metric string) (Reference, bool) {
	for _, r := range s.Reference {
		if r.Metric != metric || (r.Dataset != "" && r.Dataset != dataset) ||
			(r.Variant != "" && r.Variant != variant) || (r.X != "" && !sameX(string(r.X), x)) {
			continue
		}
		if strings.EqualFold(r.Method, m.label()) || strings.EqualFold(r.Method, m.Name) {
			return r, true
		}
	}
	return Reference{}, false
}

func sameX(a, b string) bool {
	fa, oka := xFloat(a)
	fb, okb := xFloat(b)
	if oka && okb {
		return fa == fb
	}
	return a == b
}

// ttest compares g with the reference group; ok is false when it cannot.
func ttest(g, ref *group, metric string) (eval.TTest, bool) {
	if ref == nil || g == ref || len(g.recs) != len(ref.recs) {
		return eval.TTest{}, false
	}
	t, err := eval.PairedTTest(g.values(metric), ref.values(metric))
	if err != nil || math.IsNaN(t.P) {
		return eval.TTest{}, false
	}
	return t, true
}

func stars(p float64) string {
	switch {
	case p < 0.01:
		return "***"
	case p < 0.05:
		return "**"
	case p < 0.1:
		return "*"
	}
	return ""
}

func f4(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', 4, 64)
}

func fg(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}

// writeOutputs writes cells.csv, summary.csv, cv.csv, the plots and
// report.md into dir, each atomically.
func writeOutputs(o *Outcome, dir string) ([]string, error) {
	var files []string
	put := func(name string, data []byte) error {
		p := filepath.Join(dir, name)
		if err := writeAtomic(p, data); err != nil {
			return err
		}
		files = append(files, p)
		return nil
	}
	gs := groups(o)
	if err := put("cells.csv", cellsCSV(o)); err != nil {
		return files, err
	}
	if err := put("summary.csv", summaryCSV(o, gs)); err != nil {
		return files, err
	}
	if len(o.Chosen) > 0 {
		if err := put("cv.csv", cvCSV(o)); err != nil {
			return files, err
		}
	}
	plots, err := writePlots(o, gs, dir)
	files = append(files, plots...)
	if err != nil {
		return files, err
	}
	if err := put("report.md", reportMD(o, gs, plots, dir)); err != nil {
		return files, err
	}
	return files, nil
}

func csvBytes(rows [][]string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.WriteAll(rows) // a bytes.Buffer does not fail
	return b.Bytes()
}

func cellsCSV(o *Outcome) []byte {
	ms := []string{"rmse", "mse", "mae"}
	if slices.Contains(o.Spec.Metrics, "auc") {
		ms = append(ms, "auc", "precision", "recall", "ndcg")
	}
	head := []string{"experiment", "dataset", "variant", "sweep_param", "x", "label", "method", "seed", "fold"}
	head = append(head, ms...)
	head = append(head, "seconds", "train_ratings", "test_ratings", "privacy_unit", "eps_round", "eps_total", "delta", "params", "key")
	rows := [][]string{head}
	sp := ""
	if o.Spec.Sweep != nil {
		sp = o.Spec.Sweep.Param
	}
	for _, r := range o.Records {
		row := []string{o.Spec.Name, r.Dataset, r.Variant, sp, r.X, r.Label, r.Method, strconv.FormatUint(r.Seed, 10), strconv.Itoa(r.Fold)}
		for _, m := range ms {
			v, ok := r.Metrics[m]
			if !ok {
				v = Num(math.NaN())
			}
			row = append(row, fg(float64(v)))
		}
		pj, _ := json.Marshal(r.Params)
		row = append(row, fg(r.Seconds), strconv.Itoa(r.Train), strconv.Itoa(r.Test), r.Privacy.Unit,
			fg(float64(r.Privacy.EpsRound)), fg(float64(r.Privacy.EpsTotal)), fg(float64(r.Privacy.Delta)), string(pj), r.Key)
		rows = append(rows, row)
	}
	return csvBytes(rows)
}

func summaryCSV(o *Outcome, gs []*group) []byte {
	rows := [][]string{{"dataset", "variant", "sweep_param", "x", "label", "method", "metric", "mean", "sd", "n", "paper", "paper_sd", "diff_pct", "vs", "p_value"}}
	sp := ""
	if o.Spec.Sweep != nil {
		sp = o.Spec.Sweep.Param
	}
	ref := refMethod(o.Plan)
	for _, g := range gs {
		rg := findGroup(gs, g.dataset, g.variant, g.x, ref)
		for _, m := range append(reportMetrics(o.Spec), "seconds") {
			s := g.summary(m)
			row := []string{g.dataset, g.variant, sp, g.x, g.m.label(), g.m.Name, m, fg(s.Mean), fg(s.Std), strconv.Itoa(s.N)}
			if r, ok := paper(o.Spec, g.dataset, g.variant, g.x, g.m, m); ok {
				row = append(row, fg(r.Value), fg(r.SD), fg(100*(s.Mean-r.Value)/r.Value))
			} else {
				row = append(row, "", "", "")
			}
			if t, ok := ttest(g, rg, m); ok {
				row = append(row, ref.label(), fg(t.P))
			} else {
				row = append(row, "", "")
			}
			rows = append(rows, row)
		}
	}
	return csvBytes(rows)
}

func cvCSV(o *Outcome) []byte {
	rows := [][]string{{"unit", "params", "metric", "score", "grid_points"}}
	for _, u := range o.Plan.units {
		ch, ok := o.Chosen[unitName(u)]
		if !ok {
			continue
		}
		pj, _ := json.Marshal(ch.Params)
		rows = append(rows, []string{unitName(u), string(pj), ch.Metric, fg(ch.Score), strconv.Itoa(ch.Points)})
	}
	return csvBytes(rows)
}

func findGroup(gs []*group, ds, v, x string, m *planMethod) *group {
	for _, g := range gs {
		if g.dataset == ds && g.variant == v && g.x == x && g.m == m {
			return g
		}
	}
	return nil
}

// axes returns the variants and sweep values in spec order.
func axes(o *Outcome) (variants, xs []string) {
	variants = []string{""}
	if len(o.Spec.Variants) > 0 {
		variants = variants[:0]
		for _, v := range o.Spec.Variants {
			variants = append(variants, v.Name)
		}
	}
	xs = []string{""}
	if o.Spec.Sweep != nil {
		xs = xs[:0]
		for _, x := range o.Spec.Sweep.Values {
			xs = append(xs, string(x))
		}
	}
	return variants, xs
}

func reportMD(o *Outcome, gs []*group, plots []string, dir string) []byte {
	s := o.Spec
	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	title := s.Title
	if title == "" {
		title = s.Name
	}
	w("# %s\n\n", title)
	if s.Paper != "" {
		w("Paper: %s. ", s.Paper)
	}
	w("Experiment `%s`, generated %s by `%s`; %d cells computed now, %d reused from `cells.jsonl`; wall time of this run %s; all cells together took %s of one worker's time.\n\n",
		s.Name, time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.command, o.Computed, o.Reused,
		o.Wall.Round(10*time.Millisecond), o.CellTime.Round(time.Second))
	if s.Description != "" {
		w("%s\n\n", strings.TrimSpace(s.Description))
	}
	w("## Setup\n\n")
	w("- datasets: %s", strings.Join(s.Datasets, ", "))
	if s.Preprocess.MinUserRatings > 0 || s.Preprocess.MinItemRatings > 0 {
		w(" (kept users with ≥ %d and items with ≥ %d ratings)", s.Preprocess.MinUserRatings, s.Preprocess.MinItemRatings)
	}
	w("\n- split: `%s`; seeds %d..%d\n", s.Split, s.Seed, s.Seed+uint64(s.Seeds)-1)
	if len(s.Privacy) > 0 {
		w("- privacy specification (method parameters): %s\n", kv(s.Privacy))
	}
	if len(s.Params) > 0 {
		w("- common parameters: %s\n", kv(s.Params))
	}
	if len(s.Variants) > 0 {
		var vs []string
		for _, v := range s.Variants {
			vs = append(vs, fmt.Sprintf("%s (%s)", v.Name, kv(v.Params)))
		}
		w("- variants: %s\n", strings.Join(vs, "; "))
	}
	if s.Sweep != nil {
		w("- sweep: `%s` over %s\n", s.Sweep.Param, joinValues(s.Sweep.Values))
	}
	if len(o.Chosen) > 0 {
		kind := fmt.Sprintf("%d-fold cross-validation", s.CV.Folds)
		if s.CV.Holdout > 0 {
			kind = fmt.Sprintf("a %g holdout", s.CV.Holdout)
		}
		w("- hyperparameters of methods with a grid: %s on the training part of seed %d, by validation %s (see cv.csv)\n", kind, s.Seed, s.CV.Metric)
	}
	if len(o.Plan.Missing) > 0 {
		w("- **not built yet, skipped:** %s\n", strings.Join(o.Plan.Missing, ", "))
	}
	if len(o.Plan.Warnings) > 0 {
		w("- parameters no method run here has (they take effect once a method with them is built): %s\n", strings.Join(o.Plan.Warnings, "; "))
	}
	w("\n## Methods\n\n")
	w("| label | method | parameters | protects | trusted | ε per round | ε total | δ | seconds per cell | cells |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range o.Plan.Methods {
		var recs []*Record
		for _, g := range gs {
			if g.m == m {
				recs = append(recs, g.recs...)
			}
		}
		var secs []float64
		var er, et, dl []string
		unit, trusted := m.spec.Claim.Unit, m.spec.Claim.Trusted
		for _, r := range recs {
			secs = append(secs, r.Seconds)
			er = addDistinct(er, fg(float64(r.Privacy.EpsRound)))
			et = addDistinct(et, fg(float64(r.Privacy.EpsTotal)))
			dl = addDistinct(dl, fg(float64(r.Privacy.Delta)))
			if r.Privacy.Unit != "" {
				unit, trusted = r.Privacy.Unit, r.Privacy.Trusted
			}
		}
		if unit == "none" {
			er, et, dl = nil, nil, nil
		}
		label := m.label()
		if m.added {
			label += " (added baseline)"
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", label, m.Name, methodParams(o, m), unit, trusted,
			short(er), short(et), short(dl), f4(eval.Summarize(secs).Mean), len(recs))
	}
	for _, m := range o.Plan.Methods {
		if n := m.spec.Claim.Note; n != "" {
			w("\n- %s: %s", m.label(), n)
		}
	}
	w("\n\n## Results\n\n")
	ref := refMethod(o.Plan)
	if ref != nil {
		w("Mean ± sd over seeds × folds; the paper's number in brackets. Marks: paired t-test against %s "+
			"over the same seeds and folds, * p < 0.1, ** p < 0.05, *** p < 0.01; ↑ or ↓ says whether the mean is above or below %s's.\n\n", ref.label(), ref.label())
	}
	variants, xs := axes(o)
	for _, ds := range s.Datasets {
		for _, v := range variants {
			for _, metric := range reportMetrics(s) {
				head := "### " + ds
				if v != "" {
					head += ", " + v
				}
				w("%s: %s\n\n", head, strings.ToUpper(metric))
				w("| method |")
				for _, x := range xs {
					if x == "" {
						w(" %s |", metric)
					} else {
						w(" %s = %s |", s.Sweep.Param, x)
					}
				}
				w("\n|---|%s\n", strings.Repeat("---|", len(xs)))
				for _, m := range o.Plan.Methods {
					w("| %s |", m.label())
					for _, x := range xs {
						g := findGroup(gs, ds, v, x, m)
						w(" %s |", resultCell(o, gs, g, ref, metric))
					}
					w("\n")
				}
				w("\n")
			}
		}
	}
	if len(plots) > 0 {
		w("## Plots\n\n")
		for _, p := range plots {
			if strings.HasSuffix(p, ".png") {
				rel, _ := filepath.Rel(dir, p)
				w("![%s](%s)\n\n", rel, rel)
			}
		}
	}
	w("## Reading\n\n")
	if reading, err := os.ReadFile(filepath.Join(dir, "reading.md")); err == nil {
		w("%s\n\n", strings.TrimSpace(string(reading)))
		w("Generated facts:\n\n")
	} else {
		w("_Interpretation: not written yet (put it in reading.md beside this report and rerun). The facts below are generated._\n\n")
	}
	for _, f := range facts(o, gs) {
		w("- %s\n", f)
	}
	return b.Bytes()
}

func resultCell(o *Outcome, gs []*group, g *group, ref *planMethod, metric string) string {
	if g == nil || len(g.recs) == 0 {
		return "—"
	}
	sum := g.summary(metric)
	cell := f4(sum.Mean)
	if sum.N > 1 {
		cell += " ± " + f4(sum.Std)
	}
	if bad := len(g.recs) - sum.N; bad > 0 {
		cell += fmt.Sprintf(" (%d of %d diverged)", bad, len(g.recs))
		if sum.N == 0 {
			cell = fmt.Sprintf("diverged (%d of %d)", bad, len(g.recs))
		}
	}
	if t, ok := ttest(g, findGroup(gs, g.dataset, g.variant, g.x, ref), metric); ok {
		if st := stars(t.P); st != "" {
			arrow := "↓"
			if t.MeanDiff > 0 {
				arrow = "↑"
			}
			cell += " " + st + arrow
		}
	}
	if r, ok := paper(o.Spec, g.dataset, g.variant, g.x, g.m, metric); ok {
		cell += " [" + f4(r.Value) + "]"
	}
	return cell
}

// facts are the generated statements of the reading section.
func facts(o *Outcome, gs []*group) []string {
	s := o.Spec
	var out []string
	var within, total int
	var misses []string
	for _, g := range gs {
		for _, metric := range reportMetrics(s) {
			r, ok := paper(s, g.dataset, g.variant, g.x, g.m, metric)
			if !ok || len(g.recs) == 0 {
				continue
			}
			total++
			mean := g.summary(metric).Mean
			d := 100 * (mean - r.Value) / r.Value
			where := g.dataset + " " + g.m.label() + " " + metric
			if g.variant != "" {
				where += " " + g.variant
			}
			if g.x != "" {
				where += " at " + s.Sweep.Param + " = " + g.x
			}
			if math.Abs(d) <= s.Tolerance {
				within++
			} else {
				misses = append(misses, fmt.Sprintf("%s: ours %s, paper %s (%+.1f%%)", where, f4(mean), f4(r.Value), d))
			}
		}
	}
	if total == 0 {
		out = append(out, "No result here has a paper number to compare with (the paper's numbers are for "+
			datasetsOf(s.Reference)+"; a quick run uses other data or settings).")
	} else {
		out = append(out, fmt.Sprintf("%d of %d paper numbers reproduce within %g%%.", within, total, s.Tolerance))
		for _, m := range misses {
			out = append(out, "Does not reproduce within "+fg(s.Tolerance)+"%: "+m+".")
		}
	}
	// Every private method against the DP item-average baseline.
	var base *planMethod
	for _, m := range o.Plan.Methods {
		if m.Name == "dp-itemavg" {
			base = m
		}
	}
	metric := reportMetrics(s)[0]
	if metric != "auc" && base != nil {
		for _, m := range o.Plan.Methods {
			if !m.private || m == base {
				continue
			}
			wins, n := 0, 0
			for _, g := range gs {
				if g.m != m || len(g.recs) == 0 {
					continue
				}
				bg := findGroup(gs, g.dataset, g.variant, g.x, base)
				if bg == nil || len(bg.recs) == 0 {
					continue
				}
				n++
				if g.summary(metric).Mean < bg.summary(metric).Mean {
					wins++
				}
			}
			if n > 0 {
				out = append(out, fmt.Sprintf("%s has a lower mean %s than the DP item-average baseline (%s) in %d of %d settings.",
					m.label(), metric, base.label(), wins, n))
			}
		}
	}
	if ref := refMethod(o.Plan); ref != nil {
		for _, m := range o.Plan.Methods {
			if m == ref {
				continue
			}
			lo, hi, n := 0, 0, 0
			for _, g := range gs {
				if g.m != m {
					continue
				}
				t, ok := ttest(g, findGroup(gs, g.dataset, g.variant, g.x, ref), metric)
				if !ok {
					continue
				}
				n++
				if t.P < 0.05 {
					if t.MeanDiff < 0 {
						lo++
					} else {
						hi++
					}
				}
			}
			if n > 0 {
				out = append(out, fmt.Sprintf("%s vs %s (%s, paired t-test, p < 0.05): significantly lower in %d, higher in %d of %d settings.",
					m.label(), ref.label(), metric, lo, hi, n))
			}
		}
	}
	if len(o.Plan.Missing) > 0 {
		out = append(out, "Not run because not built yet: "+strings.Join(o.Plan.Missing, ", ")+".")
	}
	return out
}

func datasetsOf(refs []Reference) string {
	var ds []string
	for _, r := range refs {
		if r.Dataset != "" {
			ds = addDistinct(ds, r.Dataset)
		}
	}
	if len(ds) == 0 {
		return "the paper's settings"
	}
	return strings.Join(ds, ", ")
}

func methodParams(o *Outcome, m *planMethod) string {
	var parts []string
	for _, p := range m.spec.Params {
		if p.Name == "workers" {
			continue
		}
		var vals []string // every value used, shown unless all are the default
		for _, u := range o.Plan.units {
			if u.m == m {
				vals = addDistinct(vals, u.params[p.Name])
			}
		}
		if len(vals) == 1 && vals[0] == p.Default {
			vals = nil
		}
		if _, ok := m.Grid[p.Name]; ok {
			vals = []string{"CV over " + joinValues(m.Grid[p.Name])}
		}
		if len(vals) > 0 {
			parts = append(parts, p.Name+"="+strings.Join(vals, "/"))
		}
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ")
}

func addDistinct(xs []string, x string) []string {
	if x == "" || slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

func short(xs []string) string {
	if len(xs) == 0 {
		return "—"
	}
	if len(xs) > 5 {
		return xs[0] + " … " + xs[len(xs)-1]
	}
	return strings.Join(xs, ", ")
}

func kv(m map[string]Value) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + string(m[k])
	}
	return strings.Join(keys, ", ")
}

func joinValues(vs []Value) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return "{" + strings.Join(s, ", ") + "}"
}
