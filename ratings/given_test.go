package ratings

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadTest(t *testing.T) {
	dir := t.TempDir()
	trainPath := filepath.Join(dir, "train.tsv")
	writeFile(t, trainPath, "u1\ti1\t4\nu2\ti1\t2\nu1\ti2\t5\n")
	train, _, err := Load(trainPath, LoadOptions{Scale: &Stars5})
	if err != nil {
		t.Fatal(err)
	}
	train.ItemTitles = []string{"One", "Two"}
	tests := []struct {
		name    string
		data    string
		opt     LoadOptions
		users   []string // UserIDs of the test data
		items   []string
		rats    []idRating
		skipped int
		err     error  // wrapped by the error
		where   string // in the error: file:line
	}{
		{name: "seen and unseen", data: "u2\ti2\t3\nu3\ti1\t1\nu1\ti3\t5\n",
			users: []string{"u1", "u2", "u3"}, items: []string{"i1", "i2", "i3"},
			rats: []idRating{{"u2", "i2", 3}, {"u3", "i1", 1}, {"u1", "i3", 5}}},
		{name: "off the training scale", data: "u2\ti2\t3\nu1\ti1\t1.5\n", err: ErrRange, where: "test.tsv:2"},
		{name: "above the training scale", data: "u2\ti2\t6\n", err: ErrRange, where: "test.tsv:1"},
		{name: "opt.Scale ignored", data: "u2\ti2\t6\n", opt: LoadOptions{Scale: &Scale{Min: 0, Max: 10, Step: 1}}, err: ErrRange, where: "test.tsv:1"},
		{name: "malformed", data: "u2\ti2\t3\nu4\ti4\tx\n", err: ErrSyntax, where: "test.tsv:2"},
		{name: "skip bad", data: "u2\ti2\t3\nu4\ti4\t9\nu5\ti1\t2\n", opt: LoadOptions{SkipBad: true},
			users: []string{"u1", "u2", "u5"}, items: []string{"i1", "i2"},
			rats: []idRating{{"u2", "i2", 3}, {"u5", "i1", 2}}, skipped: 1},
		{name: "duplicate", data: "u2\ti2\t3\nu2\ti2\t4\n", err: ErrDuplicate, where: "test.tsv:2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "test.tsv")
			writeFile(t, p, tc.data)
			d, rep, err := LoadTest(p, train, tc.opt)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.where) {
					t.Fatalf("err = %v, want %v at %s", err, tc.err, tc.where)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.UserIDs, tc.users) || !reflect.DeepEqual(d.ItemIDs, tc.items) {
				t.Errorf("IDs %q %q, want %q %q", d.UserIDs, d.ItemIDs, tc.users, tc.items)
			}
			if got := idTriples(d); !reflect.DeepEqual(got, tc.rats) {
				t.Errorf("ratings %v, want %v", got, tc.rats)
			}
			if d.Scale != train.Scale {
				t.Errorf("scale %v, want the training scale %v", d.Scale, train.Scale)
			}
			if len(d.ItemTitles) != len(d.ItemIDs) || d.ItemTitles[1] != "Two" {
				t.Errorf("titles %q for items %q", d.ItemTitles, d.ItemIDs)
			}
			if rep.Skipped != tc.skipped {
				t.Errorf("skipped %d, want %d", rep.Skipped, tc.skipped)
			}
			// The training data is untouched.
			if len(train.UserIDs) != 2 || len(train.ItemIDs) != 2 || len(train.ItemTitles) != 2 {
				t.Errorf("train changed: %q %q %q", train.UserIDs, train.ItemIDs, train.ItemTitles)
			}
		})
	}
	if _, _, err := LoadTest(dir, train, LoadOptions{}); !errors.Is(err, ErrFormat) {
		t.Errorf("folder: err = %v, want ErrFormat", err)
	}
}

func TestGivenSplitFiles(t *testing.T) {
	tests := []struct {
		name        string
		files       []string
		train, test string // "" for an error
	}{
		{"douban style", []string{"ratings_all.tsv", "ratings_train.tsv", "ratings_test.tsv", "README.md"}, "ratings_train.tsv", "ratings_test.tsv"},
		{"case and gzip", []string{"Train.csv.gz", "TEST.csv", "movies.csv"}, "Train.csv.gz", "TEST.csv"},
		{"no test", []string{"ratings_all.tsv", "ratings_train.tsv"}, "", ""},
		{"two trains", []string{"a_train.tsv", "b_train.tsv", "test.tsv"}, "", ""},
		{"one name has both", []string{"train_test.tsv", "test.tsv", "train.tsv"}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				writeFile(t, filepath.Join(dir, f), "1\t1\t1\n")
			}
			tr, te, err := GivenSplitFiles(dir)
			if tc.train == "" {
				if !errors.Is(err, ErrFormat) {
					t.Errorf("err = %v, want ErrFormat", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr != filepath.Join(dir, tc.train) || te != filepath.Join(dir, tc.test) {
				t.Errorf("got %s, %s; want %s, %s", tr, te, tc.train, tc.test)
			}
		})
	}
}

// TestCandidatesError checks that Load of a folder with several rating
// files says how to choose, naming a train/test pair when there is one.
func TestCandidatesError(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ratings_all.tsv", "ratings_train.tsv", "ratings_test.tsv"} {
		writeFile(t, filepath.Join(dir, f), "1\t1\t1\n")
	}
	_, _, err := Load(dir, LoadOptions{})
	var ce *CandidatesError
	if !errors.As(err, &ce) || !errors.Is(err, ErrFormat) {
		t.Fatalf("err = %v, want a *CandidatesError wrapping ErrFormat", err)
	}
	if ce.Train != "ratings_train.tsv" || ce.Test != "ratings_test.tsv" || len(ce.Files) != 3 {
		t.Errorf("got %+v", ce)
	}
	for _, want := range []string{"load one of them", "ratings_train.tsv and ratings_test.tsv as a given train/test split"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestLoadForItems checks that a file read against a catalog keeps the
// catalog's item indices and names the line of an item not in it, which
// SkipBad skips and counts.
func TestLoadForItems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.csv")
	if err := os.WriteFile(path, []byte("user,item,rating\nme,b,4\nme,zz,5\nme,a,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	items := []string{"a", "b", "c"}
	_, _, err := LoadForItems(path, items, "the model", LoadOptions{Scale: &Stars5})
	var pe *ParseError
	if !errors.Is(err, ErrRange) || !errors.As(err, &pe) || pe.Line != 3 || pe.Field != "item" ||
		!strings.Contains(err.Error(), `"zz" is not among the 3 items of the model`) {
		t.Fatalf("err = %v, want item zz at line 3", err)
	}
	d, rep, err := LoadForItems(path, items, "the model", LoadOptions{Scale: &Stars5, SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 1 || d.Len() != 2 || !slices.Equal(d.ItemIDs, items) || d.Items[0] != 1 || d.Items[1] != 0 {
		t.Errorf("skipped %d, items %v %v, want 1 skipped and indices 1, 0 of %v", rep.Skipped, d.ItemIDs, d.Items, items)
	}
}
