package ratings

import (
	"fmt"
	"path/filepath"
	"strings"
)

// OfficialSplit loads the official ML-100K split uK.base/uK.test (fold "1"
// to "5", or "u1" to "u5") or ua/ub (fold "a", "b", "ua" or "ub") from dir,
// the ML-100K folder. Both datasets are in the index space of the full
// u.data (user u is the same user in train, test and Load(dir)), carry its
// item titles when u.item is present, and keep the file order. An ID in a
// split file that is not in u.data is an ErrRange error.
func OfficialSplit(dir string, fold string) (train, test *Dataset, err error) {
	f := strings.ToLower(strings.TrimSpace(fold))
	f = strings.TrimPrefix(f, "u")
	switch f {
	case "1", "2", "3", "4", "5", "a", "b":
	default:
		return nil, nil, fmt.Errorf("ratings: official ML-100K fold %q: want 1..5, a or b: %w", fold, ErrFormat)
	}
	data := existing(dir, "u.data")
	if data == "" {
		return nil, nil, fmt.Errorf("ratings: %s: no u.data: %w", dir, ErrFormat)
	}
	name := filepath.Base(filepath.Clean(dir))
	full, err := newLoader(LoadOptions{Name: name, Format: FormatML100K}, data)
	if err != nil {
		return nil, nil, err
	}
	if err := full.readFile(data, FormatML100K); err != nil {
		return nil, nil, err
	}
	all, err := full.finish()
	if err != nil {
		return nil, nil, err
	}
	titles, err := loadTitles(data, FormatML100K, false, full, false)
	if err != nil {
		return nil, nil, err
	}
	if titles != nil {
		all.ItemTitles = make([]string, len(all.ItemIDs))
		for i, id := range all.ItemIDs {
			all.ItemTitles[i] = titles[id]
		}
	}
	part := func(file string) (*Dataset, error) {
		path := existing(dir, file)
		if path == "" {
			return nil, fmt.Errorf("ratings: %s: no %s: %w", dir, file, ErrFormat)
		}
		opt := LoadOptions{Name: name + "/" + file, Format: FormatML100K}
		d, _, err := readAligned(path, opt, full.b.users, full.b.items, true)
		if err != nil {
			return nil, err
		}
		d.UserIDs, d.ItemIDs, d.ItemTitles = all.UserIDs, all.ItemIDs, all.ItemTitles
		return d, nil
	}
	if train, err = part("u" + f + ".base"); err != nil {
		return nil, nil, err
	}
	if test, err = part("u" + f + ".test"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}
