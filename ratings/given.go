package ratings

import (
	"fmt"
	"os"
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
