package datasets

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/privrec/privrec/ratings"
)

//go:embed ml-latest-small/ratings.csv.gz ml-latest-small/movies.csv.gz ml-latest-small/README.txt ml-latest-small/NOTICE.md
var embedded embed.FS

// EmbeddedFile returns the content of a file of the embedded dataset:
// "README.txt" (its license), "NOTICE.md", or "ratings.csv" and
// "movies.csv" (decompressed).
func EmbeddedFile(name string) ([]byte, error) {
	switch name {
	case "README.txt", "NOTICE.md":
		return embedded.ReadFile("ml-latest-small/" + name)
	case "ratings.csv", "movies.csv":
		rc, err := embeddedReader(name)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	return nil, fmt.Errorf("datasets: embedded file %q: %w", name, os.ErrNotExist)
}

// embeddedReader returns a reader of the decompressed embedded file name
// ("ratings.csv" or "movies.csv").
func embeddedReader(name string) (io.ReadCloser, error) {
	b, err := embedded.ReadFile("ml-latest-small/" + name + ".gz")
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("datasets: embedded %s: %w", name, err)
	}
	return zr, nil
}

// Open loads a dataset named by spec, trying in order:
//
//   - "" or "ml-latest-small": the dataset embedded in the binary;
//   - a plain name (no path separator): the folder $PRIVREC_DATA/NAME, then
//     the completely extracted fetch-cache folder NAME (see Fetch and
//     CacheDir); any name works, not only the registry's, so
//     $PRIVREC_DATA/douban-monti opens as "douban-monti";
//   - a file or folder path, passed to ratings.Load.
//
// A plain name found in a data folder wins over a same-named path in the
// working directory; write "./NAME" for the latter. For registry names the
// dataset is named after the spec; a plain name with a published scale
// (DeclaredScale) gets it unless opt.Scale is set. The error when nothing matches lists every place
// tried and wraps ErrUnknown or ErrNotFound.
func Open(spec string, opt ratings.LoadOptions) (*ratings.Dataset, *ratings.LoadReport, error) {
	if spec == "" {
		spec = Default
	}
	_, known := lookup(spec)
	if known && opt.Name == "" {
		opt.Name = spec
	}
	if opt.Scale == nil && isPlainName(spec) {
		if s, ok := DeclaredScale(spec); ok {
			opt.Scale = &s
		}
	}
	if spec == Default {
		return openEmbeddedDataset(opt)
	}
	var tried []string
	if isPlainName(spec) {
		dir, t := findDir(spec)
		if dir != "" {
			if opt.Name == "" {
				opt.Name = spec
			}
			return load(dir, opt)
		}
		tried = t
	}
	if _, err := os.Stat(spec); err == nil {
		return load(spec, opt)
	} else {
		tried = append(tried, fmt.Sprintf("%s as a path: %v", spec, errors.Unwrap(err)))
	}
	if known {
		return nil, nil, fmt.Errorf("datasets: %[1]s is not available locally (tried %[2]s); download it with `privrec data fetch %[1]s`, or point PRIVREC_DATA at a folder holding it: %[3]w",
			spec, strings.Join(tried, "; "), ErrNotFound)
	}
	hint := ""
	if s := suggest(spec); s != "" {
		hint = fmt.Sprintf("; did you mean %s?", s)
	}
	return nil, nil, fmt.Errorf("datasets: %q is neither a known dataset (%s) nor found (tried %s)%s: %w",
		spec, knownNames(), strings.Join(tried, "; "), hint, ErrUnknown)
}

// suggest returns the dataset name closest to a plain name spec that
// names none, among the registry's and those found in the data folders
// (Found), if one is within an edit distance of 2 (1 for names of up to 4
// letters); else "".
func suggest(spec string) string {
	if !isPlainName(spec) {
		return ""
	}
	names := make([]string, 0, len(registry))
	for _, e := range registry {
		names = append(names, e.name)
	}
	for _, in := range Found() {
		names = append(names, in.Name)
	}
	limit := 2
	if len([]rune(spec)) <= 4 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(spec), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func load(path string, opt ratings.LoadOptions) (*ratings.Dataset, *ratings.LoadReport, error) {
	d, rep, err := ratings.Load(path, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: %w", err)
	}
	return d, rep, nil
}

// openEmbeddedDataset loads the embedded ml-latest-small with its movie titles.
func openEmbeddedDataset(opt ratings.LoadOptions) (*ratings.Dataset, *ratings.LoadReport, error) {
	rc, err := embeddedReader("ratings.csv")
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	d, rep, err := ratings.Read(rc, filepath.Join(Default, "ratings.csv"), opt)
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: embedded %s: %w", Default, err)
	}
	if d.ItemTitles == nil && !opt.NoTitles {
		mc, err := embeddedReader("movies.csv")
		if err != nil {
			return nil, nil, err
		}
		defer mc.Close()
		titles, err := readTitles(mc, Default+"/movies.csv")
		if err != nil {
			return nil, nil, err
		}
		d.ItemTitles = make([]string, len(d.ItemIDs))
		for i, id := range d.ItemIDs {
			d.ItemTitles[i] = titles[id]
		}
		if opt.Catalog {
			d = d.WithCatalog(titles, Default+"/movies.csv")
		}
		d.Side = ratings.ItemSideSource(Default+"/movies.csv", func() ([]byte, error) { return EmbeddedFile("movies.csv") })
	}
	return d, rep, nil
}

// readTitles reads a MovieLens movies.csv (movieId,title,genres with a
// header row) into a map from movieId to title.
func readTitles(r io.Reader, name string) (map[string]string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: header: %w", name, err)
	}
	if len(header) < 2 || header[0] != "movieId" || header[1] != "title" {
		return nil, fmt.Errorf("datasets: %s: header %q, want movieId,title,...", name, strings.Join(header, ","))
	}
	titles := make(map[string]string, 10000)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return titles, nil
		}
		if err != nil {
			return nil, fmt.Errorf("datasets: %s: %w", name, err)
		}
		if len(rec) < 2 {
			line, _ := cr.FieldPos(0)
			return nil, fmt.Errorf("datasets: %s:%d: %d fields, want movieId,title,...", name, line, len(rec))
		}
		titles[rec[0]] = rec[1]
	}
}
