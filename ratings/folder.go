package ratings

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// existing returns dir/name or dir/name.gz, whichever exists first, or "".
func existing(dir, name string) string {
	for _, n := range []string{name, name + ".gz"} {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// globSorted returns the regular files of dir matching pattern (with or
// without .gz), sorted by name.
func globSorted(dir, pattern string) []string {
	var out []string
	for _, p := range []string{pattern, pattern + ".gz"} {
		m, _ := filepath.Glob(filepath.Join(dir, p))
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				out = append(out, f)
			}
		}
	}
	sort.Strings(out)
	return out
}

// metadataNames are files of the known dataset folders that hold no
// ratings.
var metadataNames = map[string]bool{
	"u.item": true, "u.user": true, "u.genre": true, "u.info": true, "u.occupation": true,
	"movies.dat": true, "users.dat": true, "tags.dat": true, "movies.csv": true,
	"tags.csv": true, "links.csv": true, "genome-scores.csv": true, "genome-tags.csv": true,
	"item_map.tsv": true, "movie_titles.txt": true, "movie_titles.csv": true,
	"probe.txt": true, "qualifying.txt": true, ScaleFileName: true,
}

// dataExts are the extensions of candidate rating files.
var dataExts = map[string]bool{
	".dat": true, ".csv": true, ".tsv": true, ".txt": true, ".data": true, ".base": true, ".test": true,
}

// resolveDir picks the rating files of a dataset folder.
func resolveDir(dir string, opt LoadOptions) ([]string, Format, error) {
	pick := func(f Format) Format {
		if opt.Format != FormatAuto {
			return opt.Format
		}
		return f
	}
	if p := existing(dir, "u.data"); p != "" {
		return []string{p}, pick(FormatAuto), nil
	}
	if p := existing(dir, "ratings.dat"); p != "" {
		return []string{p}, pick(FormatAuto), nil
	}
	if p := existing(dir, "ratings.csv"); p != "" {
		return []string{p}, pick(FormatAuto), nil
	}
	if fs := globSorted(dir, "combined_data_*.txt"); len(fs) > 0 {
		return fs, pick(FormatNetflix), nil
	}
	if fs := globSorted(filepath.Join(dir, "training_set"), "mv_*.txt"); len(fs) > 0 {
		return fs, pick(FormatNetflix), nil
	}
	if fs := globSorted(dir, "mv_*.txt"); len(fs) > 0 {
		return fs, pick(FormatNetflix), nil
	}
	if p := existing(dir, "ratings_uir_dense.tsv"); p != "" {
		return []string{p}, pick(FormatAuto), nil
	}
	cands, err := candidateFiles(dir)
	if err != nil {
		return nil, "", err
	}
	switch len(cands) {
	case 0:
		return nil, "", fmt.Errorf("ratings: %s: no rating file found (looked for u.data, ratings.dat, ratings.csv, Netflix combined_data_*.txt or training_set/, ratings_uir_dense.tsv): %w", dir, ErrFormat)
	case 1:
		return []string{filepath.Join(dir, cands[0])}, pick(FormatAuto), nil
	}
	e := &CandidatesError{Dir: dir, Files: cands}
	e.Train, e.Test = splitPair(cands)
	return nil, "", e
}

// candidateFiles returns the names of the regular files of dir that may
// hold ratings: a data extension (possibly with .gz), not a known metadata
// file, not a README; sorted.
func candidateFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ratings: %w", err)
	}
	var cands []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		n := strings.TrimSuffix(e.Name(), ".gz")
		if metadataNames[n] || strings.HasPrefix(strings.ToLower(n), "readme") || !dataExts[strings.ToLower(filepath.Ext(n))] {
			continue
		}
		cands = append(cands, e.Name())
	}
	return cands, nil
}
