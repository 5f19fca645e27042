package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
)

// run executes privrec with args and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb, args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// TestEvaluateJSONContract checks the output scripts depend on.
func TestEvaluateJSONContract(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on ml-latest-small")
	}
	out, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--method", "mf", "--split", "random:0.9",
		"--dim", "10", "--epochs", "5", "--seed", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"rmse", "mae", "mse", "train_seconds"} {
		if _, ok := rep[k].(float64); !ok {
			t.Errorf("JSON has no number %q", k)
		}
	}
	rmse, mse := rep["rmse"].(float64), rep["mse"].(float64)
	if rmse < 0.6 || rmse > 1.2 {
		t.Errorf("rmse = %g, want a plausible MovieLens RMSE in [0.6, 1.2]", rmse)
	}
	if d := rmse*rmse - mse; d > 1e-9 || d < -1e-9 {
		t.Errorf("rmse² = %g but mse = %g", rmse*rmse, mse)
	}
	// summary's keys are lowercase like the rest: mean, std, n.
	if sm, ok := rep["summary"].(map[string]any)["rmse"].(map[string]any); !ok || sm["mean"] != rmse || sm["n"] != 1.0 {
		t.Errorf("summary.rmse = %v, want mean %g and n 1", rep["summary"], rmse)
	}
	if n := int(rep["ratings"].(float64)); n != 100836 {
		t.Errorf("ratings = %d, want 100836", n)
	}
}

func TestEvaluateBaselinesAndFolds(t *testing.T) {
	small := filepath.Join("testdata", "small.tsv")
	tests := []struct {
		name string
		args []string
		runs int
	}{
		{"mean", []string{"--method", "mean", "--split", "random:0.7"}, 1},
		{"itemavg kfold", []string{"--method", "itemavg", "--split", "kfold:2"}, 2},
		{"mf repeats", []string{"--method", "mf", "--epochs", "2", "--dim", "2", "--repeats", "3", "--split", "random:0.7"}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"evaluate", "--data", small, "--json"}, tc.args...)
			out, _, err := run(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var rep evalReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Runs) != tc.runs {
				t.Errorf("%d runs, want %d", len(rep.Runs), tc.runs)
			}
			for _, r := range rep.Runs {
				if r.Train+r.Test != 10 {
					t.Errorf("train %d + test %d != 10 ratings", r.Train, r.Test)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	bad := filepath.Join("testdata", "bad.tsv")
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"malformed line names file and line", []string{"data", "info", "--data", bad}, "bad.tsv:5"},
		{"unknown method", []string{"evaluate", "--data", bad, "--method", "nope"}, `--method "nope"`},
		{"bad split", []string{"evaluate", "--data", bad, "--split", "random:1.5"}, "--split"},
		{"bad scale", []string{"data", "info", "--data", bad, "--scale", "5,1"}, "--scale"},
		{"missing file", []string{"data", "info", "--data", "testdata/none.tsv"}, "none.tsv"},
		{"unknown user", []string{"recommend", "--model", "testdata/none.prm", "--user", "1"}, "none.prm"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestSkipBadReports(t *testing.T) {
	out, errOut, err := run(t, "data", "info", "--data", filepath.Join("testdata", "bad.tsv"), "--skip-bad")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "skipped 1 bad line") {
		t.Errorf("stderr %q does not report the skipped line", errOut)
	}
	if !strings.Contains(out, "4") {
		t.Errorf("info output %q", out)
	}
}

func TestTrainRecommendRoundTrip(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join("testdata", "small.tsv")
	modelPath := filepath.Join(dir, "m.prm")
	if _, _, err := run(t, "train", "--data", small, "--dim", "2", "--epochs", "5", "--out", modelPath); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "recommend", "--model", modelPath, "--data", small, "--user", "1", "-n", "5", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var recs []model.Recommendation
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatal(err)
	}
	// User 1 rated 10, 11 and 13; only 12 is left.
	if len(recs) != 1 || recs[0].Item != "12" {
		t.Errorf("recommendations %+v, want only item 12", recs)
	}
	if _, _, err := run(t, "recommend", "--model", modelPath, "--user", "99"); err == nil || !strings.Contains(err.Error(), `"99"`) {
		t.Errorf("unknown user: error = %v", err)
	}
}

// TestEveryMethodTrainsSavesAndRecommends is the loop a new user runs:
// every method trains, saves a model, and recommends from it with scores
// on the rating scale.
func TestEveryMethodTrainsSavesAndRecommends(t *testing.T) {
	names, _, err := run(t, "methods")
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join("testdata", "small.tsv")
	for _, name := range strings.Fields(names) {
		t.Run(name, func(t *testing.T) {
			s, err := method.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "m.model")
			args := []string{"train", "--data", small, "--scale", "1,5,1", "--method", name, "--out", path}
			switch {
			case s.Has("epochs"):
				args = append(args, "--epochs", "3")
			case s.Has("iters"):
				args = append(args, "--iters", "3")
			}
			if _, _, err := run(t, args...); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if m.Method != name || len(m.Config) == 0 {
				t.Errorf("model records method %q, config %s", m.Method, m.Config)
			}
			out, _, err := run(t, "recommend", "--model", path, "--user", "1", "-n", "3", "--json")
			if err != nil {
				t.Fatal(err)
			}
			var recs []model.Recommendation
			if err := json.Unmarshal([]byte(out), &recs); err != nil {
				t.Fatal(err)
			}
			if len(recs) != 3 {
				t.Fatalf("%d recommendations, want 3", len(recs))
			}
			for _, r := range recs {
				if s.Ranks != (r.Rating == nil) {
					t.Errorf("item %s: rating %v for a method with Ranks %v", r.Item, r.Rating, s.Ranks)
				}
				if r.Rating != nil && (*r.Rating < m.Scale.Min || *r.Rating > m.Scale.Max) {
					t.Errorf("rating %v of item %s off the scale %v", *r.Rating, r.Item, m.Scale)
				}
			}
		})
	}
}

// TestMethodHelpIsThatMethods checks that --method M --help lists M's own
// flags and no other method's, and that another method's flag is an error.
func TestMethodHelpIsThatMethods(t *testing.T) {
	tests := []struct {
		method   string
		has, not []string
	}{
		{"hdpmf", []string{"--eps ", "--rescale", "--f-uc", "--data"}, []string{"--threshold", "--biased", "--iters"}},
		{"mf", []string{"--biased", "--dim ", "--split"}, []string{"--eps ", "--rescale"}},
		{"ldp-op", []string{"--per-round", "--eps "}, []string{"--rescale", "--eps-i"}},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			out, _, err := run(t, "evaluate", "--method", tc.method, "--help")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.has {
				if !strings.Contains(out, f) {
					t.Errorf("help lacks %s", f)
				}
			}
			for _, f := range tc.not {
				if strings.Contains(out, f) {
					t.Errorf("help lists %s", f)
				}
			}
		})
	}
	_, _, err := run(t, "evaluate", "--method", "mf", "--eps", "1")
	if err == nil || !strings.Contains(err.Error(), "--eps") || !strings.Contains(err.Error(), "method mf") {
		t.Errorf("mf with --eps: error = %v", err)
	}
	_, _, err = run(t, "evaluate", "--method", "mf", "--dim", "two")
	if err == nil || !strings.Contains(err.Error(), "--dim") {
		t.Errorf("--dim two: error = %v", err)
	}
}

func TestDataSplitWritesWholeFiles(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := run(t, "data", "split", "--data", filepath.Join("testdata", "small.tsv"), "--split", "kfold:2", "--out", dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"train1.tsv", "test1.tsv", "train2.tsv", "test2.tsv"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Errorf("%s is empty", f)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "test1.tsv"))
	b, _ := os.ReadFile(filepath.Join(dir, "test2.tsv"))
	if n := strings.Count(string(a), "\n") + strings.Count(string(b), "\n"); n != 10 {
		t.Errorf("the two test folds hold %d ratings, want 10", n)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("%d files in the output folder, want 4 (no temporary files left)", len(entries))
	}
}

// TestDataSplitKeepsTheScale: data split writes scale.txt for a dataset
// whose scale is declared, so its files load on that scale and a private
// method accepts them; a scale read off the ratings gets no such file.
func TestDataSplitKeepsTheScale(t *testing.T) {
	small := filepath.Join("testdata", "small.tsv")
	for _, tc := range []struct {
		name  string
		args  []string
		want  string // the scale of the loaded train file; "" for any
		from  string // in data info's "where the scale came from"
		file  bool   // scale.txt written
		fails bool   // a private method refuses the train file
	}{
		{"declared by --scale", []string{"--data", small, "--scale", "1,5"}, "1..5", "declared by", true, false},
		{"published with the dataset", []string{"--data", "ml-latest-small"}, "0.5..5 step 0.5", "declared by", true, false},
		// The train half's inferred scale may even differ from the whole's.
		{"read off the ratings", []string{"--data", small}, "", "inferred from the ratings", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"data", "split", "--split", "random:0.5", "--out", dir}, tc.args...)
			if _, _, err := run(t, args...); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "scale.txt")); (err == nil) != tc.file {
				t.Errorf("scale.txt: %v, want written %v", err, tc.file)
			}
			train, test := filepath.Join(dir, "train1.tsv"), filepath.Join(dir, "test1.tsv")
			out, _, err := run(t, "data", "info", "--data", train)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want+": "+tc.from) {
				t.Errorf("data info: %q, want scale %s %s", strings.SplitN(out, "\n", 2)[0], tc.want, tc.from)
			}
			_, _, err = run(t, "evaluate", "--data", train, "--test", test, "--method", "dp-biases", "--eps", "1", "--json")
			if (err != nil) != tc.fails {
				t.Errorf("dp-biases on the split: error %v, want failure %v", err, tc.fails)
			}
		})
	}
}
