package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fixtures of these tests: testdata/given10 holds a 1..10 training file
// (users u1..u4, items i1..i4, 12 ratings), a test file with 7 ratings of
// which 3 involve the unseen user u5 or the unseen item i5 (1 of them i5),
// and ratings_all.tsv, their union. testdata/test_bad.tsv has a rating of
// 11, off the training scale, at line 3.
var (
	given10      = filepath.Join("testdata", "given10")
	given10Train = filepath.Join(given10, "ratings_train.tsv")
	given10Test  = filepath.Join(given10, "ratings_test.tsv")
	testBad      = filepath.Join("testdata", "test_bad.tsv")
)

func TestEvaluateTestFile(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		train, test int // ratings
		skipped     int
		unseen      [4]int   // users, items, ratings, item ratings
		relevant    *float64 // nil: not reported
		trainFile   string
		text        []string // in the text output (run again without --json)
	}{
		{name: "test file", args: []string{"--data", given10Train, "--test", given10Test},
			train: 12, test: 7, unseen: [4]int{1, 1, 3, 1},
			text: []string{"tested on " + given10Test, "unseen in training: 1 user(s), 1 item(s); their 3 test rating(s)"}},
		{name: "given split", args: []string{"--data", given10, "--split", "given"},
			train: 12, test: 7, unseen: [4]int{1, 1, 3, 1}, trainFile: given10Train,
			text: []string{"given split: trained on ratings_train.tsv, tested on ratings_test.tsv"}},
		{name: "relevant default on 1..10", args: []string{"--data", given10, "--split", "given", "--rank", "2"},
			train: 12, test: 7, unseen: [4]int{1, 1, 3, 1}, relevant: ptr(7.75), trainFile: given10Train,
			text: []string{"relevant: test rating ≥ 7.75 (default: the top quarter of the 1..10 scale)",
				"ranking leaves out the 1 test rating(s) of unseen items", "precision@2"}},
		{name: "relevant given", args: []string{"--data", given10Train, "--test", given10Test, "--rank", "2", "--relevant", "9"},
			train: 12, test: 7, unseen: [4]int{1, 1, 3, 1}, relevant: ptr(9),
			text: []string{"relevant: test rating ≥ 9 (--relevant)", "auc            -"}},
		{name: "relevant default on 1..5", args: []string{"--data", filepath.Join("testdata", "small.tsv"), "--split", "kfold:2", "--rank", "2"},
			train: 5, test: 5, relevant: ptr(4),
			text: []string{"relevant: test rating ≥ 4 (default: the top quarter of the 1..5 scale)"}},
		{name: "skip bad test line", args: []string{"--data", given10Train, "--test", testBad, "--skip-bad"},
			train: 12, test: 3, skipped: 1, unseen: [4]int{1, 0, 1, 0},
			text: []string{"test file: skipped 1 bad line(s)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"evaluate", "--method", "itemavg", "--json"}, tc.args...)
			out, errOut, err := run(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var rep map[string]any
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			runs := rep["runs"].([]any)
			r0 := runs[0].(map[string]any)
			if got := [2]int{int(r0["train_ratings"].(float64)), int(r0["test_ratings"].(float64))}; got != [2]int{tc.train, tc.test} {
				t.Errorf("train, test ratings %v, want %d, %d", got, tc.train, tc.test)
			}
			if rmse := rep["rmse"].(float64); math.IsNaN(rmse) || rmse < 0 || rmse > 9 {
				t.Errorf("rmse %g, want a number in [0, 9]", rmse)
			}
			_, held := rep["test_file"]
			if want := slices.Contains(tc.args, "--test") || slices.Contains(tc.args, "given"); held != want {
				t.Errorf("test_file reported: %v, want %v", held, want)
			}
			if held {
				var got [4]int
				for k, f := range []string{"unseen_users", "unseen_items", "unseen_ratings", "unseen_item_ratings"} {
					got[k] = int(rep[f].(float64))
				}
				if got != tc.unseen {
					t.Errorf("unseen users, items, ratings, item ratings %v, want %v", got, tc.unseen)
				}
				if s := int(rep["test_skipped_lines"].(float64)); s != tc.skipped {
					t.Errorf("test_skipped_lines %d, want %d", s, tc.skipped)
				}
				if f, _ := rep["train_file"].(string); f != tc.trainFile {
					t.Errorf("train_file %q, want %q", f, tc.trainFile)
				}
			}
			if tc.skipped > 0 && !strings.Contains(errOut, "test_bad.tsv:3") {
				t.Errorf("stderr %q does not name the skipped line", errOut)
			}
			rel, ok := rep["relevant"].(float64)
			switch {
			case tc.relevant == nil && ok:
				t.Errorf("relevant %g reported without --rank", rel)
			case tc.relevant != nil && (!ok || rel != *tc.relevant):
				t.Errorf("relevant %v, want %g", rep["relevant"], *tc.relevant)
			}
			text, _, err := run(t, append([]string{"evaluate", "--method", "itemavg"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.text {
				if !strings.Contains(text, s) {
					t.Errorf("text output lacks %q:\n%s", s, text)
				}
			}
		})
	}
}

func ptr(x float64) *float64 { return &x }

func TestEvaluateTestFileErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // in the error
	}{
		{"bad test line", []string{"evaluate", "--data", given10Train, "--test", testBad},
			[]string{"test_bad.tsv:3", "field rating", `"11" outside scale 1..10`}},
		{"split and test", []string{"evaluate", "--data", given10Train, "--test", given10Test, "--split", "random:0.9"},
			[]string{"--split random:0.9 and --test", "drop --split"}},
		{"given on a file", []string{"evaluate", "--data", given10Train, "--split", "given"},
			[]string{"is a file", "--test FILE"}},
		{"given without a pair", []string{"evaluate", "--data", "testdata", "--split", "given"},
			[]string{"no given train/test split", "test_bad.tsv"}},
		{"missing test file", []string{"evaluate", "--data", given10Train, "--test", "testdata/none.tsv"},
			[]string{"none.tsv"}},
		{"folder of several files says how to choose", []string{"data", "info", "--data", given10},
			[]string{"several candidate rating files", "--data " + filepath.Join(given10, "ratings_all.tsv"), "--split given"}},
		{"given is for evaluate", []string{"data", "split", "--data", given10, "--split", "given", "--out", t.TempDir()},
			[]string{"only privrec evaluate"}},
		{"unknown split kind lists them all", []string{"evaluate", "--data", given10Train, "--split", "holdout:0.9"},
			[]string{`unknown kind "holdout"`, "random:F", "leave:K", "loo", "kfold:K", "official[:N]", "given"}},
		{"data split lists them all", []string{"data", "split", "--data", given10Train, "--split", "", "--out", t.TempDir()},
			[]string{"--split: empty", "official[:N]", "given"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestEvaluateDoubanGiven runs the given train/test split of the Douban
// subset of Monti et al. (PRIVREC_DATA/douban-monti).
func TestEvaluateDoubanGiven(t *testing.T) {
	root := os.Getenv("PRIVREC_DATA")
	if root == "" {
		t.Skip("PRIVREC_DATA is not set: the douban-monti train/test files are not available")
	}
	if _, err := os.Stat(filepath.Join(root, "douban-monti", "ratings_test.tsv")); err != nil {
		t.Skipf("no douban-monti under PRIVREC_DATA: %v", err)
	}
	if testing.Short() {
		t.Skip("trains MF on 123,202 ratings")
	}
	out, _, err := run(t, "evaluate", "--data", "douban-monti", "--split", "given", "--method", "mf", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep evalReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.Train != 123202 || r.Test != 13689 || rep.UnseenRatings != 0 {
		t.Errorf("train %d, test %d, unseen %d ratings; want 123202, 13689, 0", r.Train, r.Test, rep.UnseenRatings)
	}
	// Non-private MF on this split reaches about 0.74; GC-MC reports 0.734.
	if rep.RMSE > 0.78 {
		t.Errorf("RMSE %.4f, want ≤ 0.78", rep.RMSE)
	}
	// The training file gets the dataset's published scale, which a
	// private method needs, as --data douban-monti alone would.
	if _, _, err := run(t, "evaluate", "--data", "douban-monti", "--split", "given", "--method", "dp-itemavg"); err != nil {
		t.Errorf("dp-itemavg on the given split: %v", err)
	}
}
