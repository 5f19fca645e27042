package ratings

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// LoadOptions configures Load and Read. The zero value detects everything.
type LoadOptions struct {
	// Name is the dataset name. Default: the folder name for a folder or a
	// standard full-dataset file (u.data, ratings.dat, ratings.csv,
	// ratings_uir_dense.tsv), else the file name without extensions.
	Name string
	// Format is the file format; FormatAuto detects it from the first lines.
	Format Format
	// Delimiter is the field delimiter of a delimited file; "" detects it
	// among "\t", ",", "::", "|", ";" and " " (the first that cuts the first
	// lines into equal numbers of fields, enough for Columns). " " stands
	// for any run of blanks. Setting Delimiter or Columns with FormatAuto
	// selects FormatDelimited.
	Delimiter string
	// Columns is the column order of a delimited file without a header,
	// like "item,user,rating,timestamp"; "-" names an ignored column;
	// columns beyond the list are ignored. Default "user,item,rating".
	//
	// A delimited (or mlcsv) file with a header is read by the header's
	// names instead (see HeaderNames: "userId", "item_id", "score", "ts",
	// ...; unknown names are ignored columns): it must name a user, an
	// item and a rating column, and every line must have as many fields as
	// the header. Columns given for a file with a header are used, but must
	// put every column the header names where the header does.
	Columns string
	// Header says whether the first line is a header (not used by Netflix).
	Header HeaderMode
	// User, when set, is the ID of the one user whose ratings a delimited
	// file holds when it has no user column: a header that names an item
	// and a rating but no user ("movieId,rating"), Columns without a user,
	// or, without both, lines of two fields read as item,rating. A file
	// with a user column is read as usual.
	User string
	// Scale is the rating scale; ratings off the scale are ErrRange. nil
	// uses the scale declared by a ScaleFileName beside the rating file
	// (Load only), else the format's scale: Stars5 for ml100k and netflix, HalfStars5 for
	// mlcsv; for ml1m Stars5, or HalfStars5 if any rating is a half star
	// (ML-10M); for delimited files the scale is inferred from the data
	// (min, max, step 1 if all ratings are integers, 0.5 if all are halves,
	// else 0).
	Scale *Scale
	// SkipBad skips malformed, out-of-range and duplicate lines (the first
	// occurrence of a pair is kept) instead of failing; they are counted in
	// the LoadReport.
	SkipBad bool
	// NoTitles disables loading item titles. By default Load attaches titles
	// from the sibling file of the rating file when it exists: u.item
	// (ml100k), movies.dat (ml1m), movies.csv (mlcsv), movie_titles.txt
	// (netflix), or item_map.tsv plus movies.dat for a delimited file (the
	// shared ML-1M ratings_uir_dense.tsv, whose item IDs are not MovieIDs).
	// It also leaves out the side features (Dataset.Side, see SideFiles).
	NoTitles bool
	// Catalog extends the item index with every item of the title file
	// (the public catalog: movies.dat, movies.csv, u.item, ...) that has
	// no rating, after the rated items (Dataset.WithCatalog), and sets
	// Dataset.Catalog to the file, so that methods whose releases span the
	// item index (dp-als) do not take it from the ratings. With an item map
	// (the shared ML-1M copy), movies outside the map get the ID
	// "movie:MovieID". Nothing changes when there is no title file or
	// NoTitles is set.
	Catalog bool
}

// LoadReport describes what a load read.
type LoadReport struct {
	Path    string // the rating file (or Netflix folder) read
	Format  Format // the format used
	Lines   int    // data lines read: ratings plus skipped lines (of the title file too)
	Skipped int    // bad lines skipped under SkipBad
	// ScaleFile is the ScaleFileName the scale was read from, "" if none.
	ScaleFile string
	Examples  []error // the first few (at most 5) skipped-line errors, in file order
}

// maxExamples is the number of skipped-line errors kept in a LoadReport.
const maxExamples = 5

// Load reads a rating file or a folder holding one.
//
// A file is read in the given or detected format; gzip compression is
// detected from the magic bytes and undone transparently. For a folder, the
// rating file is chosen in this order: u.data (ML-100K); ratings.dat
// (ML-1M, ML-10M); ratings.csv (ML-20M, ML-25M, latest); Netflix Prize
// combined_data_*.txt, or training_set/mv_*.txt (the folder may also be
// training_set itself); ratings_uir_dense.tsv (the shared ML-1M copy, which
// lacks ratings.dat); else the only data file of the folder that is not a
// known metadata file. Each name may carry a .gz suffix. A folder with
// several candidate files and none of these names is a *CandidatesError
// (wrapping ErrFormat) listing them; GivenSplitFiles picks a *train* and
// *test* pair among them, for LoadTest.
//
// The dataset keeps the file order of the ratings. Malformed input yields a
// *ParseError naming file, line and field.
func Load(path string, opt LoadOptions) (*Dataset, *LoadReport, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ratings: %w", err)
	}
	var files []string
	format := opt.Format
	reportPath := path
	if st.IsDir() {
		files, format, err = resolveDir(path, opt)
		if err != nil {
			return nil, nil, err
		}
		if len(files) == 1 {
			reportPath = files[0]
		}
	} else {
		files = []string{path}
	}
	if opt.Name == "" {
		opt.Name = defaultName(path, st.IsDir())
	}
	var scaleFile string
	if opt.Scale == nil {
		s, p, ok, err := readScaleFile(filepath.Dir(files[0]))
		if err != nil {
			return nil, nil, err
		}
		if ok {
			opt.Scale, scaleFile = &s, p
		}
	}
	l, err := newLoader(opt, reportPath)
	if err != nil {
		return nil, nil, err
	}
	l.rep.ScaleFile = scaleFile
	for _, f := range files {
		if err := l.readFile(f, format); err != nil {
			return nil, nil, err
		}
	}
	d, err := l.finish()
	if err != nil {
		return nil, nil, err
	}
	if !opt.NoTitles {
		titles, err := loadTitles(files[0], l.rep.Format, opt.SkipBad, l, opt.Catalog)
		if err != nil {
			return nil, nil, err
		}
		if titles != nil && opt.Catalog {
			tf, _ := titleFile(files[0], l.rep.Format)
			d = d.WithCatalog(titles, tf)
		} else if titles != nil {
			d.ItemTitles = make([]string, len(d.ItemIDs))
			for i, id := range d.ItemIDs {
				d.ItemTitles[i] = titles[id]
			}
		}
		d.Side = sideSource(files[0], l.rep.Format)
	}
	return d, l.rep, nil
}

// Read reads ratings from r in the given or detected format; gzip is undone
// transparently. name names the input in errors and is the default dataset
// name. Read loads no titles.
func Read(r io.Reader, name string, opt LoadOptions) (*Dataset, *LoadReport, error) {
	if opt.Name == "" {
		opt.Name = name
	}
	l, err := newLoader(opt, name)
	if err != nil {
		return nil, nil, err
	}
	if err := l.readStream(r, name, opt.Format, -1); err != nil {
		return nil, nil, err
	}
	d, err := l.finish()
	if err != nil {
		return nil, nil, err
	}
	return d, l.rep, nil
}

// defaultName derives a dataset name from a path.
func defaultName(path string, dir bool) string {
	path = filepath.Clean(path)
	if dir {
		return filepath.Base(path)
	}
	base := strings.TrimSuffix(filepath.Base(path), ".gz")
	switch base {
	case "u.data", "ratings.dat", "ratings.csv", "ratings_uir_dense.tsv":
		if d := filepath.Base(filepath.Dir(path)); d != "." && d != string(filepath.Separator) {
			return d
		}
	}
	if ext := filepath.Ext(base); ext != "" && ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}
