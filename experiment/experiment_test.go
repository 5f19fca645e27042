package experiment

import (
	"context"
	"errors"
	"fmt"
	"github.com/privrec/privrec/method"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readSpec(t *testing.T, name string) *Spec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(b, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseErrors(t *testing.T) {
	b, err := os.ReadFile("testdata/unknown-key.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key names key and line", string(b), []string{"line 5", "spilt"}},
		{"unknown nested key", "name: x\ndatasets: [a]\nmethods:\n  - {name: mean, parms: {a: 1}}\n", []string{"line 4", "parms"}},
		{"missing name", "datasets: [a]\nmethods: [{name: mean}]\n", []string{"name: missing"}},
		{"bad split", "name: x\ndatasets: [a]\nsplit: half\nmethods: [{name: mean}]\n", []string{"split"}},
		{"bad metric", "name: x\ndatasets: [a]\nmetrics: [rsme]\nmethods: [{name: mean}]\n", []string{"rsme"}},
		{"list as value", "name: x\ndatasets: [a]\nparams: {dim: [1, 2]}\nmethods: [{name: mean}]\n", []string{"line 3", "single value"}},
		{"grid on the swept param", "name: x\ndatasets: [a]\nsweep: {param: reg, values: [1]}\nmethods: [{name: mf, grid: {reg: [1, 2]}}]\n", []string{"swept"}},
		{"two documents", "name: x\ndatasets: [a]\nmethods: [{name: mean}]\n---\nname: y\n", []string{"more than one"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "t.yaml")
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("err = %v, want ErrSpec", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestShippedSpecs(t *testing.T) {
	names := Names()
	if len(names) < 10 {
		t.Fatalf("only %d shipped specs", len(names))
	}
	for _, n := range names {
		s, err := Get(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		for _, sp := range []*Spec{s, s.ApplyQuick()} {
			if _, err := Expand(sp); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		}
	}
	if _, err := Get("no-such"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Get(no-such) = %v, want ErrUnknown", err)
	}
}

func TestExpand(t *testing.T) {
	s := readSpec(t, "tiny.yaml")
	s.Methods = append(s.Methods, MethodSpec{Name: "not-built-yet"},
		MethodSpec{Name: "mf", Label: "mf-cv", Grid: map[string][]Value{"lr": {"0.01", "0.02"}, "init": {"0.1", "0.2", "0.3"}}})
	p, err := Expand(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Missing) != 1 || p.Missing[0] != "not-built-yet" {
		t.Errorf("Missing = %v", p.Missing)
	}
	// mean, itemavg, mf, mf-cv, and the added dp-itemavg.
	var labels []string
	for _, m := range p.Methods {
		labels = append(labels, m.label())
	}
	if strings.Join(labels, ",") != "mean,itemavg,mf,mf-cv,dp-itemavg" {
		t.Errorf("methods = %v", labels)
	}
	if len(p.units) != 2*5 {
		t.Fatalf("%d units, want 10", len(p.units))
	}
	// Test cells: 10 units × 2 seeds; CV cells: 2 sweep values × 6 grid points × 5 folds.
	if got, want := p.NumCells(), 10*2+2*6*5; got != want {
		t.Errorf("NumCells = %d, want %d", got, want)
	}
	keys := map[string]int{}
	for _, u := range p.units {
		if u.m.Name == "mf" && u.params["reg"] != u.x {
			t.Errorf("%s: reg = %s, want the sweep value", unitName(u), u.params["reg"])
		}
		if u.m.Name == "mf" && u.params["epochs"] != "3" {
			t.Errorf("%s: epochs = %s, want 3 from params", unitName(u), u.params["epochs"])
		}
		if u.m.label() == "mf-cv" {
			continue
		}
		for _, c := range p.testCells(u, u.params) {
			keys[c.Key]++
		}
	}
	// mean, itemavg and dp-itemavg do not have reg: their cells are the
	// same at both sweep values.
	shared := 0
	for _, n := range keys {
		if n == 2 {
			shared++
		}
	}
	if shared != 3*2 {
		t.Errorf("%d keys shared across sweep values, want 6", shared)
	}
	s.Methods[0].Params = map[string]Value{"dim": "3"}
	if _, err := Expand(s); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "dim") {
		t.Errorf("unknown method param: err = %v", err)
	}
}

func TestRunResumeAndInvalidate(t *testing.T) {
	s := readSpec(t, "tiny.yaml")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	opt := Options{Out: dir, Workers: 1, OnComputed: func(n int) {
		if n == 3 {
			cancel()
		}
	}}
	if _, err := Run(ctx, s, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err == nil {
		t.Error("an interrupted run wrote report.md")
	}
	stored, err := openStore(filepath.Join(dir, "cells.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := len(stored.recs)
	stored.close()
	if first < 3 {
		t.Fatalf("%d cells stored before the interrupt, want ≥ 3", first)
	}
	opt.OnComputed = nil
	o, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	// 2 seeds × (mean, itemavg, dp-itemavg once, mf at 2 sweep values).
	if o.Reused != first || o.Computed+o.Reused != 2*5 {
		t.Errorf("resumed run: computed %d, reused %d; %d were stored", o.Computed, o.Reused, first)
	}
	fresh, err := Run(context.Background(), s, Options{Out: t.TempDir(), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh.Records) != len(o.Records) {
		t.Fatalf("%d records, fresh run %d", len(o.Records), len(fresh.Records))
	}
	for k, r := range o.Records {
		f := fresh.Records[k]
		if r.Key != f.Key || r.Metrics["rmse"] != f.Metrics["rmse"] || r.Metrics["mae"] != f.Metrics["mae"] {
			t.Errorf("record %d (%s %s): resumed %v, fresh %v", k, r.Label, r.X, r.Metrics, f.Metrics)
		}
		if math.IsNaN(float64(r.Metrics["rmse"])) || len(r.CDF) != len(s.CDF) {
			t.Errorf("record %d: rmse %v, %d CDF points", k, r.Metrics["rmse"], len(r.CDF))
		}
	}
	// A rerun computes nothing.
	again, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	if again.Computed != 0 || again.Reused != 10 {
		t.Errorf("rerun: computed %d, reused %d", again.Computed, again.Reused)
	}
	// Changing mf's epochs invalidates only mf's cells; a new label
	// invalidates nothing.
	s.Params["epochs"] = "2"
	s.Methods[0].Label = "global mean"
	changed, err := Run(context.Background(), s, opt)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Computed != 4 || changed.Reused != 6 {
		t.Errorf("after changing epochs: computed %d, reused %d, want 4 and 6", changed.Computed, changed.Reused)
	}
	for _, name := range []string{"cells.csv", "summary.csv", "report.md", "plots/rmse_ml-latest-small.png",
		"plots/rmse_ml-latest-small.svg", "plots/cdf_ml-latest-small_x0.01.png"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"global mean", "dp-itemavg (added baseline)", "[0.9000]", "paper numbers reproduce", "## Reading", "not written yet"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// A hand-written reading.md becomes the Reading section of the next
	// run's report, which reuses every cell.
	if err := os.WriteFile(filepath.Join(dir, "reading.md"), []byte("MF wins here.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opt.Command = "privrec experiment run tiny --out X"
	if _, err := Run(context.Background(), s, opt); err != nil {
		t.Fatal(err)
	}
	rep, _ = os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"MF wins here.", "`privrec experiment run tiny --out X`"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report.md with reading.md lacks %q", want)
		}
	}
	if strings.Contains(string(rep), "not written yet") {
		t.Error("report.md still says the reading is not written")
	}
}

func TestOnlyDatasets(t *testing.T) {
	s := &Spec{Name: "x", Datasets: []string{"a", "b", "c"}}
	for _, tc := range []struct {
		only []string
		want string // datasets, or "error"
	}{
		{[]string{"c", "a"}, "a,c"},
		{[]string{"b"}, "b"},
		{[]string{"d"}, "error"},
	} {
		got, err := s.OnlyDatasets(tc.only)
		switch {
		case tc.want == "error":
			if !errors.Is(err, ErrSpec) {
				t.Errorf("%v: err = %v, want ErrSpec", tc.only, err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.only, err)
		case strings.Join(got.Datasets, ",") != tc.want:
			t.Errorf("%v: datasets %v, want %s", tc.only, got.Datasets, tc.want)
		}
	}
	if len(s.Datasets) != 3 {
		t.Error("OnlyDatasets changed its receiver")
	}
}

func TestStoreDropsPartialLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cells.jsonl")
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.put(&Record{Cell: Cell{Key: "a"}, Metrics: map[string]Num{"rmse": Num(math.NaN())}}); err != nil {
		t.Fatal(err)
	}
	st.close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"key":"b","met`) // a crash mid-write
	f.Close()
	st, err = openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.recs) != 1 || !math.IsNaN(float64(st.recs["a"].Metrics["rmse"])) {
		t.Fatalf("records %v", st.recs)
	}
	if err := st.put(&Record{Cell: Cell{Key: "c"}}); err != nil {
		t.Fatal(err)
	}
	st.close()
	st, err = openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if len(st.recs) != 2 || st.recs["c"] == nil {
		t.Errorf("after append: %d records", len(st.recs))
	}
}

// TestCVOnce checks that with cv.once the sweep points share one
// selection: their CV cells are the same cells, made at the base setting.
func TestCVOnce(t *testing.T) {
	for _, tc := range []struct {
		once     bool
		distinct int
	}{
		{once: false, distinct: 2 * 2 * 5}, // 2 sweep values × 2 points × 5 folds
		{once: true, distinct: 2 * 5},
	} {
		s := readSpec(t, "tiny.yaml")
		s.Methods = []MethodSpec{{Name: "mf", Grid: map[string][]Value{"lr": {"0.01", "0.02"}}}}
		s.CV.Once = tc.once
		p, err := Expand(s)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		for _, u := range p.units {
			for _, c := range p.cvCells(u) {
				keys[c.Key] = true
				if tc.once && c.Params["reg"] != p.units[0].cvGrid[0]["reg"] {
					t.Errorf("once: CV cell at %s has reg %s, want the base value", u.x, c.Params["reg"])
				}
			}
		}
		if len(keys) != tc.distinct {
			t.Errorf("once=%v: %d distinct CV cells, want %d", tc.once, len(keys), tc.distinct)
		}
	}
}

// TestDivergedCellIsARecord checks that a diverging setting is recorded
// and reported, not an error that stops the experiment, for a method whose
// divergence error comes from mf and one whose comes from pmf.
func TestDivergedCellIsARecord(t *testing.T) {
	for _, tc := range []struct {
		method string
		params map[string]Value
	}{
		{"mf", map[string]Value{"lr": "1000"}},
		{"pdp-pmf", map[string]Value{"lr": "1e12", "momentum": "0", "epochs": "5"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			s := readSpec(t, "tiny.yaml")
			s.Sweep = nil
			s.Methods = []MethodSpec{{Name: tc.method, Label: "huge-lr", Params: tc.params}}
			dir := t.TempDir()
			o, err := Run(context.Background(), s, Options{Out: dir, Workers: 1})
			if err != nil {
				t.Fatalf("a diverging method stopped the run: %v", err)
			}
			n := 0
			for _, r := range o.Records {
				if r.Label == "huge-lr" {
					n++
					if !math.IsNaN(float64(r.Metrics["rmse"])) || r.Stats["diverged"] != 1 {
						t.Errorf("diverged record: rmse %v, stats %v", r.Metrics["rmse"], r.Stats)
					}
				}
			}
			if n != s.Seeds {
				t.Errorf("%d diverged records, want %d", n, s.Seeds)
			}
			rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
			if !strings.Contains(string(rep), "diverged (2 of 2)") {
				t.Error("report.md does not say the method diverged")
			}
		})
	}
}

// TestSpecErrorsNameFileAndLine checks that a parameter a method does not
// have, or a value that does not parse as its field's type, is an error
// naming the file and the line of the key.
func TestSpecErrorsNameFileAndLine(t *testing.T) {
	head := "name: t\ndatasets: [ml-latest-small]\nparams: {epochs: 3}\nmethods:\n"
	tests := []struct {
		name, methods, want string
	}{
		{"ill-typed method param", "  - name: mf\n    params: {lr: fast}\n", "t.yaml:6: method mf: bad parameter: mf lr = \"fast\": not a number"},
		{"unknown method param", "  - name: mf\n    params:\n      eps: 1\n", "t.yaml:7: method mf: bad parameter: mf eps: no such parameter"},
		{"unknown grid param", "  - name: mean\n  - name: hdpmf\n    grid:\n      epsilon: [1, 2]\n", "t.yaml:8: method hdpmf: grid: "},
		{"ill-typed grid value", "  - name: mf\n    grid:\n      dim: [2, two]\n", "t.yaml:7: method mf: grid: bad parameter: mf dim = \"two\""},
		{"ill-typed shared param", "  - name: mf\n", "t.yaml:3: method mf: bad parameter: mf epochs = \"x\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := head
			if tc.name == "ill-typed shared param" {
				src = strings.Replace(src, "epochs: 3", "epochs: x", 1)
			}
			s, err := Parse([]byte(src+tc.methods), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Expand(s)
			if !errors.Is(err, ErrSpec) || !errors.Is(err, method.ErrParam) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q and wrap ErrSpec and method.ErrParam", err, tc.want)
			}
		})
	}
}

// TestSecaggNeutral: the worker count, secagg off/ideal and ease's
// max-items leave a cell's key alone; secagg=masked, another noise path,
// does not.
func TestSecaggNeutral(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{"workers", "4", true}, {"secagg", "ideal", true}, {"secagg", "off", true},
		{"secagg", "true", true}, {"secagg", "masked", false}, {"eps", "1", false},
		{"max-items", "20000", true}, {"top-items", "300", false},
	} {
		if got := neutral(tc.name, tc.value); got != tc.want {
			t.Errorf("neutral(%s=%s) = %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}

// TestMisspeltMethodIsAnError: a method name the registry lacks is an
// error naming the file and line, not a method skipped with a warning.
func TestMisspeltMethodIsAnError(t *testing.T) {
	src := "name: typo\ndatasets: [ml-latest-small]\nmethods:\n  - name: mf\n  - name: hdpfm\n"
	_, err := Parse([]byte(src), "typo.yaml")
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `typo.yaml:5: methods[1]: unknown method "hdpfm"`) {
		t.Errorf("err = %v, want an ErrSpec at typo.yaml:5 naming hdpfm", err)
	}
}

// TestQuickNoteStatesWhatRan: a quick report says the seeds and the
// parameters the quick run used, where the description is the full run's.
func TestQuickNoteStatesWhatRan(t *testing.T) {
	s, err := Get("hdpmf-table3")
	if err != nil {
		t.Fatal(err)
	}
	q := s.ApplyQuick()
	if q.applied == nil || s.applied != nil {
		t.Fatal("ApplyQuick does not record its overrides on the copy only")
	}
	note := quickNote(q, q.applied)
	want := fmt.Sprintf("%d seed(s)", q.Seeds)
	if !strings.Contains(note, want) || !strings.Contains(note, "Quick run") {
		t.Errorf("note %q lacks %q", note, want)
	}
	if e, ok := q.applied.Params["epochs"]; ok && !strings.Contains(note, "epochs="+string(e)) {
		t.Errorf("note %q lacks epochs=%s", note, e)
	}
}

// TestRankingMethodRefusesRatingMetrics: a spec asking a ranking-only
// method for RMSE is an error naming the file and line.
func TestRankingMethodRefusesRatingMetrics(t *testing.T) {
	src := "name: r\ndatasets: [ml-latest-small]\nmetrics: [rmse]\nmethods:\n  - name: bpr-sgld\n"
	_, err := Parse([]byte(src), "r.yaml")
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "r.yaml:5") || !strings.Contains(err.Error(), "ranking-only") {
		t.Errorf("err = %v, want an ErrSpec at r.yaml:5 saying ranking-only", err)
	}
	if _, err := Parse([]byte(strings.Replace(src, "[rmse]", "[auc]", 1)), "r.yaml"); err != nil {
		t.Errorf("auc: %v", err)
	}
}
