package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/ratings"
)

// TestFileReport is what `privrec evaluate` reports of a test set read from
// its own file (--test FILE or --split given) rather than split from the
// data. Its fields appear at the top level of the JSON report.
type TestFileReport struct {
	// TrainFile is the training file of --split given ("" with --test,
	// where the training data is --data).
	TrainFile string `json:"train_file,omitempty"`
	// TestFile is the test file.
	TestFile string `json:"test_file"`
	// TestSkipped counts the test file's bad lines skipped under --skip-bad.
	TestSkipped int `json:"test_skipped_lines"`
	// UnseenUsers and UnseenItems count the test file's users and items
	// without a training rating; the model predicts its fallback for them.
	UnseenUsers int `json:"unseen_users"`
	UnseenItems int `json:"unseen_items"`
	// UnseenRatings counts the test ratings of an unseen user or item.
	UnseenRatings int `json:"unseen_ratings"`
	// UnseenItemRatings counts the test ratings of an unseen item, which
	// the ranking metrics leave out (no model can rank them).
	UnseenItemRatings int `json:"unseen_item_ratings"`
}

// evalData returns what evaluate trains and tests on: the data and the
// splitter of --split; or, with --test FILE or --split given, the training
// data, a splitter that returns the one given train/test pair, and the
// report of the test file.
func (a *app) evalData(cmd *cobra.Command, df *dataFlags, split, testFile string) (*ratings.Dataset, splitter, *TestFileReport, error) {
	if testFile != "" && cmd.Flags().Changed("split") {
		return nil, nil, nil, fmt.Errorf("--split %s and --test %s: the test file is the test set and --data, whole, the training set; drop --split", split, testFile)
	}
	if testFile == "" && split != "given" {
		sp, err := parseSplitFlag(split, df)
		if err != nil {
			return nil, nil, nil, err
		}
		d, err := a.load(df)
		return d, sp, nil, err
	}
	rep := &TestFileReport{TestFile: testFile}
	trainFlags := *df
	if testFile == "" {
		dir, err := givenDir(df)
		if err != nil {
			return nil, nil, nil, err
		}
		if rep.TrainFile, rep.TestFile, err = ratings.GivenSplitFiles(dir); err != nil {
			return nil, nil, nil, fmt.Errorf("--split given: %w", err)
		}
		trainFlags.data = rep.TrainFile
		if s, ok := datasets.DeclaredScale(df.data); ok && df.scale == "" && !strings.ContainsAny(df.data, `/\`) {
			// A named dataset's published scale, as --data NAME gets it.
			trainFlags.scale = fmt.Sprintf("%g,%g,%g", s.Min, s.Max, s.Step)
		}
	}
	train, err := a.load(&trainFlags)
	if err != nil {
		return nil, nil, nil, err
	}
	opt, err := df.options()
	if err != nil {
		return nil, nil, nil, err
	}
	test, lrep, err := ratings.LoadTest(rep.TestFile, train, opt)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("test data: %w", err)
	}
	rep.TestSkipped = lrep.Skipped
	a.reportSkipped(rep.TestFile, lrep)
	rep.countUnseen(train, test)
	a.log.Info("test file", "file", rep.TestFile, "ratings", test.Len(), "unseen_users", rep.UnseenUsers,
		"unseen_items", rep.UnseenItems, "unseen_ratings", rep.UnseenRatings)
	sp := func(*ratings.Dataset, uint64) ([]ratings.Split, error) {
		return []ratings.Split{{Train: train, Test: test}}, nil
	}
	return train, sp, rep, nil
}

// givenDir returns the folder of --data for --split given.
func givenDir(df *dataFlags) (string, error) {
	if st, err := os.Stat(df.data); err == nil && !st.IsDir() {
		return "", fmt.Errorf("--split given: --data %s is a file; name a folder holding one *train* and one *test* rating file, or test on another file with --test FILE", df.data)
	}
	dir, err := df.dataDir()
	if err != nil {
		return "", fmt.Errorf("--split given needs a folder holding one *train* and one *test* rating file: %w", err)
	}
	return dir, nil
}

// countUnseen counts the users, items and ratings of test that train lacks:
// test's ID space extends train's (ratings.LoadTest), so they are those
// with an index at or beyond train's.
func (r *TestFileReport) countUnseen(train, test *ratings.Dataset) {
	nu, ni := int32(train.NumUsers()), int32(train.NumItems())
	r.UnseenUsers, r.UnseenItems = test.NumUsers()-int(nu), test.NumItems()-int(ni)
	r.UnseenRatings, r.UnseenItemRatings = 0, 0
	for k := range test.Values {
		unseenItem := test.Items[k] >= ni
		if unseenItem || test.Users[k] >= nu {
			r.UnseenRatings++
		}
		if unseenItem {
			r.UnseenItemRatings++
		}
	}
}

// print writes the report as text.
func (r *TestFileReport) print(w io.Writer, rankK int) {
	if r.TrainFile != "" {
		fmt.Fprintf(w, "given split: trained on %s, tested on %s\n", filepath.Base(r.TrainFile), filepath.Base(r.TestFile))
	} else {
		fmt.Fprintf(w, "trained on all of the data, tested on %s\n", r.TestFile)
	}
	if r.TestSkipped > 0 {
		fmt.Fprintf(w, "test file: skipped %d bad line(s)\n", r.TestSkipped)
	}
	if r.UnseenRatings == 0 {
		fmt.Fprintln(w, "every test user and item has training ratings")
	} else {
		fmt.Fprintf(w, "unseen in training: %d user(s), %d item(s); their %d test rating(s) get the model's fallback prediction\n",
			r.UnseenUsers, r.UnseenItems, r.UnseenRatings)
	}
	if rankK > 0 && r.UnseenItemRatings > 0 {
		fmt.Fprintf(w, "ranking leaves out the %d test rating(s) of unseen items\n", r.UnseenItemRatings)
	}
}

// reportSkipped tells stderr about the bad lines a load skipped.
func (a *app) reportSkipped(name string, rep *ratings.LoadReport) {
	if rep == nil || rep.Skipped == 0 {
		return
	}
	fmt.Fprintf(a.stderr, "privrec: %s: skipped %d bad line(s) of %d\n", name, rep.Skipped, rep.Lines)
	for _, e := range rep.Examples {
		fmt.Fprintf(a.stderr, "  %v\n", e)
	}
}

// rankable returns the test ratings that a model trained on train can
// rank: those of the items train has, in train's item space. It is test
// itself when test has no unseen item.
func rankable(train, test *ratings.Dataset) *ratings.Dataset {
	ni := train.NumItems()
	if test.NumItems() == ni {
		return test
	}
	var idx []int
	for k, i := range test.Items {
		if int(i) < ni {
			idx = append(idx, k)
		}
	}
	s := test.Subset(idx)
	s.ItemIDs, s.ItemTitles = train.ItemIDs, train.ItemTitles
	return s
}

// defaultRelevant is the --relevant threshold when the flag is not given:
// the top quarter of the scale, min + 0.75·(max − min) (4 on 1..5, 7.75 on
// 1..10).
func defaultRelevant(s ratings.Scale) float64 {
	return float64(s.Min) + 0.75*float64(s.Max-s.Min)
}

// relevanceNote says which --relevant threshold evaluate used.
func relevanceNote(threshold float64, isDefault bool, s ratings.Scale) string {
	if isDefault {
		return fmt.Sprintf("relevant: test rating ≥ %g (default: the top quarter of the %g..%g scale)", threshold, s.Min, s.Max)
	}
	return fmt.Sprintf("relevant: test rating ≥ %g (--relevant)", threshold)
}

// withDataHint rewrites the error of a folder holding several rating files
// to say how to choose on the command line: a file, or the train/test pair.
// The result still wraps err.
func withDataHint(err error) error {
	var ce *ratings.CandidatesError
	if !errors.As(err, &ce) || len(ce.Files) == 0 {
		return err
	}
	one := ce.Files[0]
	for _, f := range ce.Files {
		if f != ce.Train && f != ce.Test {
			one = f
			break
		}
	}
	msg := fmt.Sprintf("%s: several candidate rating files (%s): choose one, as in --data %s",
		ce.Dir, strings.Join(ce.Files, ", "), filepath.Join(ce.Dir, one))
	if ce.Train != "" {
		msg += fmt.Sprintf(", or train on %s and test on %s with privrec evaluate --split given", ce.Train, ce.Test)
	}
	return &hintError{msg: msg, err: err}
}

// hintError is an error with a message for the command line that wraps
// the library's error.
type hintError struct {
	msg string
	err error
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Unwrap() error { return e.err }
