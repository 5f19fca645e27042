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

// reportMetrics are the scalar metrics reported, in order: auc brings
// recall and NDCG at the spec's rank K with it.
func reportMetrics(s *Spec) []string {
	var out []string
	for _, m := range s.Metrics {
		switch m {
		case "cdf":
		case "auc":
			out = append(out, "auc", "recall", "ndcg")
		default:
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

// reportMD returns report.md: header, setup, methods, result tables, plots
// and the reading with its generated facts.
func reportMD(o *Outcome, gs []*group, plots []string, dir string) []byte {
	r := &mdReport{o: o, gs: gs}
	r.header()
	r.setup()
	r.methods()
	r.results()
	r.plots(plots, dir)
	r.reading(dir)
	return r.b.Bytes()
}

// mdReport accumulates the Markdown report of an outcome.
type mdReport struct {
	b  bytes.Buffer
	o  *Outcome
	gs []*group
}

// w appends formatted text to the report.
func (r *mdReport) w(format string, a ...any) { fmt.Fprintf(&r.b, format, a...) }

// header writes the title, the paper, how and when the results were made,
// and the spec's description.
func (r *mdReport) header() {
	s, o := r.o.Spec, r.o
	title := s.Title
	if title == "" {
		title = s.Name
	}
	r.w("# %s\n\n", title)
	if s.Paper != "" {
		r.w("Paper: %s. ", s.Paper)
	}
	r.w("Experiment `%s`, generated %s by `%s`; %d cells computed now, %d reused from `cells.jsonl`; wall time of this run %s; all cells together took %s of one worker's time.\n\n",
		s.Name, time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.command, o.Computed, o.Reused,
		o.Wall.Round(10*time.Millisecond), o.CellTime.Round(time.Second))
	if s.Description != "" {
		r.w("%s\n\n", strings.TrimSpace(s.Description))
	}
	if q := s.applied; q != nil {
		r.w("%s\n\n", quickNote(s, q))
	}
}

// quickNote says what a quick run ran, where the description (the full
// experiment's) says otherwise: seeds, datasets, split and the parameters
// the quick overrides set.
func quickNote(s *Spec, q *Quick) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Quick run** (`--quick`): the description above is the full experiment's; this run used %d seed(s) (%d..%d)",
		s.Seeds, s.Seed, s.Seed+uint64(s.Seeds)-1)
	if len(q.Datasets) > 0 {
		fmt.Fprintf(&b, ", datasets %s", strings.Join(s.Datasets, ", "))
	}
	if q.Split != "" {
		fmt.Fprintf(&b, ", split `%s`", s.Split)
	}
	if len(q.Params) > 0 {
		fmt.Fprintf(&b, ", %s", kv(q.Params))
	}
	if len(q.SweepValues) > 0 {
		fmt.Fprintf(&b, ", sweep values %s", joinValues(q.SweepValues))
	}
	if len(q.Variants) > 0 {
		fmt.Fprintf(&b, ", variants %s", strings.Join(q.Variants, ", "))
	}
	if q.NoCV {
		b.WriteString(", no hyperparameter search (each method at its params)")
	}
	b.WriteString(".")
	return b.String()
}

// setup writes the Setup section: data, split, seeds, parameters, variants,
// sweep, cross-validation, and what was not run.
func (r *mdReport) setup() {
	s, o := r.o.Spec, r.o
	r.w("## Setup\n\n")
	r.w("- datasets: %s", strings.Join(s.Datasets, ", "))
	if s.Preprocess.MinUserRatings > 0 || s.Preprocess.MinItemRatings > 0 {
		r.w(" (kept users with ≥ %d and items with ≥ %d ratings)", s.Preprocess.MinUserRatings, s.Preprocess.MinItemRatings)
	}
	r.w("\n- split: `%s`; seeds %d..%d\n", s.Split, s.Seed, s.Seed+uint64(s.Seeds)-1)
	if len(s.Privacy) > 0 {
		r.w("- privacy specification (method parameters): %s\n", kv(s.Privacy))
	}
	if len(s.Params) > 0 {
		r.w("- common parameters: %s\n", kv(s.Params))
	}
	if len(s.Variants) > 0 {
		var vs []string
		for _, v := range s.Variants {
			vs = append(vs, fmt.Sprintf("%s (%s)", v.Name, kv(v.Params)))
		}
		r.w("- variants: %s\n", strings.Join(vs, "; "))
	}
	if s.Sweep != nil {
		r.w("- sweep: `%s` over %s\n", s.Sweep.Param, joinValues(s.Sweep.Values))
	}
	if len(o.Chosen) > 0 {
		kind := fmt.Sprintf("%d-fold cross-validation", s.CV.Folds)
		if s.CV.Holdout > 0 {
			kind = fmt.Sprintf("a %g holdout", s.CV.Holdout)
		}
		r.w("- hyperparameters of methods with a grid: %s on the training part of seed %d, by validation %s (see cv.csv)\n", kind, s.Seed, s.CV.Metric)
	}
	if len(o.Plan.Missing) > 0 {
		r.w("- **not built yet, skipped:** %s\n", strings.Join(o.Plan.Missing, ", "))
	}
	if len(o.Plan.Warnings) > 0 {
		r.w("- parameters no method run here has (they take effect once a method with them is built): %s\n", strings.Join(o.Plan.Warnings, "; "))
	}
}

// methods writes the Methods section: a row per method with its
// parameters, privacy, time and cell count, then the methods' notes.
func (r *mdReport) methods() {
	r.w("\n## Methods\n\n")
	r.w("| label | method | parameters | protects | trusted | ε per round | ε total | δ | seconds per cell | cells |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.o.Plan.Methods {
		recs := methodRecords(r.gs, m)
		pr := recordsPrivacy(m, recs)
		label := m.label()
		if m.added {
			label += " (added baseline)"
		}
		r.w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", label, m.Name, methodParams(r.o, m), pr.unit, pr.trusted,
			short(pr.epsRound), short(pr.epsTotal), short(pr.delta), f4(meanSeconds(recs)), len(recs))
	}
	for _, m := range r.o.Plan.Methods {
		if n := m.spec.Claim.Note; n != "" {
			r.w("\n- %s: %s", m.label(), n)
		}
	}
}

// methodRecords returns the records of a method, in group order.
func methodRecords(gs []*group, m *planMethod) []*Record {
	var recs []*Record
	for _, g := range gs {
		if g.m == m {
			recs = append(recs, g.recs...)
		}
	}
	return recs
}

// usedPrivacy is the privacy a method's records report: what is protected,
// who is trusted, and the distinct ε per round, ε total and δ in record
// order (none if nothing is protected).
type usedPrivacy struct {
	unit, trusted             string
	epsRound, epsTotal, delta []string
}

// recordsPrivacy returns the privacy of a method's records: the method's
// claim, overridden by the last record that names its unit.
func recordsPrivacy(m *planMethod, recs []*Record) usedPrivacy {
	pr := usedPrivacy{unit: m.spec.Claim.Unit, trusted: m.spec.Claim.Trusted}
	for _, r := range recs {
		pr.epsRound = addDistinct(pr.epsRound, fg(float64(r.Privacy.EpsRound)))
		pr.epsTotal = addDistinct(pr.epsTotal, fg(float64(r.Privacy.EpsTotal)))
		pr.delta = addDistinct(pr.delta, fg(float64(r.Privacy.Delta)))
		if r.Privacy.Unit != "" {
			pr.unit, pr.trusted = r.Privacy.Unit, r.Privacy.Trusted
		}
	}
	if pr.unit == "none" {
		pr.epsRound, pr.epsTotal, pr.delta = nil, nil, nil
	}
	return pr
}

// meanSeconds returns the mean time of the records' cells.
func meanSeconds(recs []*Record) float64 {
	var secs []float64
	for _, r := range recs {
		secs = append(secs, r.Seconds)
	}
	return eval.Summarize(secs).Mean
}

// results writes the Results section: how to read the cells, then a table
// per dataset, variant and metric.
func (r *mdReport) results() {
	r.w("\n\n## Results\n\n")
	ref := refMethod(r.o.Plan)
	if ref != nil {
		r.w("Mean ± sd over seeds × folds; the paper's number in brackets. Marks: paired t-test against %s "+
			"over the same seeds and folds, * p < 0.1, ** p < 0.05, *** p < 0.01; ↑ or ↓ says whether the mean is above or below %s's.\n\n", ref.label(), ref.label())
	}
	variants, xs := axes(r.o)
	for _, ds := range r.o.Spec.Datasets {
		for _, v := range variants {
			for _, metric := range reportMetrics(r.o.Spec) {
				r.resultTable(ds, v, metric, xs, ref)
			}
		}
	}
}

// resultTable writes the table of a metric on a dataset and variant: a row
// per method, a column per sweep value, cells as resultCell makes them
// (tested against ref).
func (r *mdReport) resultTable(ds, v, metric string, xs []string, ref *planMethod) {
	head := "### " + ds
	if v != "" {
		head += ", " + v
	}
	r.w("%s: %s\n\n", head, strings.ToUpper(metric))
	r.w("| method |")
	for _, x := range xs {
		if x == "" {
			r.w(" %s |", metric)
		} else {
			r.w(" %s = %s |", r.o.Spec.Sweep.Param, x)
		}
	}
	r.w("\n|---|%s\n", strings.Repeat("---|", len(xs)))
	for _, m := range r.o.Plan.Methods {
		r.w("| %s |", m.label())
		for _, x := range xs {
			g := findGroup(r.gs, ds, v, x, m)
			r.w(" %s |", resultCell(r.o, r.gs, g, ref, metric))
		}
		r.w("\n")
	}
	r.w("\n")
}

// plots writes the Plots section, linking the PNG files (paths relative to
// dir), if there are plots.
func (r *mdReport) plots(plots []string, dir string) {
	if len(plots) == 0 {
		return
	}
	r.w("## Plots\n\n")
	for _, p := range plots {
		if strings.HasSuffix(p, ".png") {
			rel, _ := filepath.Rel(dir, p)
			r.w("![%s](%s)\n\n", rel, rel)
		}
	}
}

// reading writes the Reading section: the hand-written reading.md of dir,
// or a note that it is missing, then the generated facts.
func (r *mdReport) reading(dir string) {
	r.w("## Reading\n\n")
	if reading, err := os.ReadFile(filepath.Join(dir, "reading.md")); err == nil {
		r.w("%s\n\n", strings.TrimSpace(string(reading)))
		r.w("Generated facts:\n\n")
	} else {
		r.w("_Interpretation: not written yet (put it in reading.md beside this report and rerun). The facts below are generated._\n\n")
	}
	for _, f := range facts(r.o, r.gs) {
		r.w("- %s\n", f)
	}
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
	defaults := m.spec.New()
	for _, p := range m.spec.Fields(defaults) {
		if p.Name == "workers" {
			continue
		}
		var vals []string // every value used, shown unless all are the default
		for _, u := range o.Plan.units {
			if u.m == m {
				vals = addDistinct(vals, u.params[p.Name])
			}
		}
		if len(vals) == 1 && vals[0] == p.Value.String() {
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
