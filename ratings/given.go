package ratings

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadTest reads the rating file at path as test data for a model trained
// on train: a user or item ID that train has keeps train's index, and an ID
// train lacks gets the next free index after train's, so the result's
// UserIDs and ItemIDs extend train's and its unseen users and items are
// exactly the indices ≥ train.NumUsers() and ≥ train.NumItems() (a model
// predicts its fallback for them). ItemTitles, when train has them, are
// extended with "" for the unseen items.
//
// The file is read with opt (format, delimiter, columns, header, SkipBad)
// on train's scale, whatever opt.Scale says: a rating off it is an ErrRange
// *ParseError naming the file, line and field, skipped and counted under
// SkipBad like any bad line. No titles are loaded. path must be a file.
func LoadTest(path string, train *Dataset, opt LoadOptions) (*Dataset, *LoadReport, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ratings: %w", err)
	}
	if st.IsDir() {
		return nil, nil, fmt.Errorf("ratings: test data %s is a folder, not a rating file: %w", path, ErrFormat)
	}
	if opt.Name == "" {
		opt.Name = defaultName(path, false)
	}
	s := train.Scale
	opt.Scale = &s
	users, err := idMapOf(train.UserIDs, "user")
	if err != nil {
		return nil, nil, err
	}
	items, err := idMapOf(train.ItemIDs, "item")
	if err != nil {
		return nil, nil, err
	}
	d, rep, err := readAligned(path, opt, users, items, false)
	if err != nil {
		return nil, nil, err
	}
	if train.ItemTitles != nil {
		n := len(train.ItemTitles)
		d.ItemTitles = append(train.ItemTitles[:n:n], make([]string, d.NumItems()-n)...)
	}
	return d, rep, nil
}

// LoadForItems reads the rating file at path, whose items must be among
// items, a fixed catalog (a model's or a server's items): item index k of
// the result is items[k] (its ItemIDs are items), users are indexed in
// file order. An item ID not in items is an ErrRange *ParseError naming
// the file, line and ID, and catalog names the items in its message ("the
// model"); under SkipBad such lines are skipped and counted like any bad
// line. The file is read with opt, on opt.Scale if set. No titles are
// loaded. path must be a file.
func LoadForItems(path string, items []string, catalog string, opt LoadOptions) (*Dataset, *LoadReport, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ratings: %w", err)
	}
	if st.IsDir() {
		return nil, nil, fmt.Errorf("ratings: %s is a folder, not a rating file: %w", path, ErrFormat)
	}
	if opt.Name == "" {
		opt.Name = defaultName(path, false)
	}
	im, err := idMapOf(items, "item")
	if err != nil {
		return nil, nil, err
	}
	l, err := newLoader(opt, path)
	if err != nil {
		return nil, nil, err
	}
	l.b.items = im
	l.catalog, l.catalogName = true, catalog
	if err := l.readFile(path, opt.Format); err != nil {
		return nil, nil, err
	}
	d, err := l.finish()
	if err != nil {
		return nil, nil, err
	}
	return d, l.rep, nil
}

// readAligned reads the rating file path with opt into the index space of
// the ID maps users and items: an ID they hold keeps its index; a new one
// is an ErrRange error if frozen, else it gets the next index. The maps are
// taken over: unless frozen, the caller must not share them.
func readAligned(path string, opt LoadOptions, users, items idMap, frozen bool) (*Dataset, *LoadReport, error) {
	l, err := newLoader(opt, path)
	if err != nil {
		return nil, nil, err
	}
	l.b.users, l.b.items = users, items
	l.frozen = frozen
	if err := l.readFile(path, opt.Format); err != nil {
		return nil, nil, err
	}
	d, err := l.finish()
	if err != nil {
		return nil, nil, err
	}
	return d, l.rep, nil
}

// idMapOf returns an idMap that gives each of ids its position. field
// ("user" or "item") names the IDs in the error for a repeated one.
func idMapOf(ids []string, field string) (idMap, error) {
	var m idMap
	for k, id := range ids {
		if m.index([]byte(id)) != int32(k) {
			return idMap{}, fmt.Errorf("ratings: training data: %s ID %q appears twice: %w", field, id, ErrFormat)
		}
	}
	return m, nil
}

// GivenSplitFiles returns the training and test files of a train/test split
// given as two files of the folder dir: among the files Load considers as
// rating files there (a data extension such as .tsv or .csv, possibly
// .gz; not a known metadata file or a README), the one whose name contains
// "train" and the one whose name contains "test", ignoring case — for
// example ratings_train.tsv and ratings_test.tsv beside ratings_all.tsv.
// Unless there is exactly one of each (and no name contains both), it is an
// ErrFormat error listing the candidates.
func GivenSplitFiles(dir string) (train, test string, err error) {
	cands, err := candidateFiles(dir)
	if err != nil {
		return "", "", err
	}
	tr, te := splitPair(cands)
	if tr == "" {
		list := strings.Join(cands, ", ")
		if list == "" {
			list = "none"
		}
		return "", "", fmt.Errorf("ratings: %s: no given train/test split: want one rating file named *train* and one named *test*, found %s: %w", dir, list, ErrFormat)
	}
	return filepath.Join(dir, tr), filepath.Join(dir, te), nil
}

// splitPair returns the names among cands that contain "train" and "test"
// (ignoring case), or "", "" unless there is exactly one of each and no
// name contains both.
func splitPair(cands []string) (train, test string) {
	var trs, tes []string
	for _, c := range cands {
		n := strings.ToLower(c)
		tr, te := strings.Contains(n, "train"), strings.Contains(n, "test")
		switch {
		case tr && te:
			return "", ""
		case tr:
			trs = append(trs, c)
		case te:
			tes = append(tes, c)
		}
	}
	if len(trs) != 1 || len(tes) != 1 {
		return "", ""
	}
	return trs[0], tes[0]
}

// CandidatesError is the error of Load for a folder that holds several
// candidate rating files and none of the names Load looks for. It wraps
// ErrFormat.
type CandidatesError struct {
	// Dir is the folder.
	Dir string
	// Files are the names of the candidate files, sorted.
	Files []string
	// Train and Test name the files of a train/test split among Files
	// (see GivenSplitFiles), or are "" when there is none.
	Train, Test string
}

// Error says how to choose: one of the files, or the train/test pair.
func (e *CandidatesError) Error() string {
	s := fmt.Sprintf("ratings: %s: several candidate rating files (%s): load one of them", e.Dir, strings.Join(e.Files, ", "))
	if e.Train != "" {
		s += fmt.Sprintf(", or use %s and %s as a given train/test split", e.Train, e.Test)
	}
	return s + ": " + ErrFormat.Error()
}

// Unwrap returns ErrFormat.
func (e *CandidatesError) Unwrap() error { return ErrFormat }
