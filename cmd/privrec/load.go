package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/ratings"
)

// dataFlags select and preprocess a dataset.
type dataFlags struct {
	data, format, delimiter, columns, header, scale string
	skipBad                                         bool
	catalog                                         bool // load the public item catalog too (LoadOptions.Catalog): set for methods with Spec.Catalog
	minUser, minItem                                int
	scaleFrom                                       string // where the loaded scale came from, set by load
}

func (f *dataFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.data, "data", "ml-latest-small", "dataset: a built-in name (ml-latest-small), a name under $PRIVREC_DATA or the fetch cache (ml-100k, ml-1m, ...), a file or a folder")
	fs.StringVar(&f.format, "format", "", "file format: ml100k, ml1m, mlcsv, netflix, delimited (default: detected)")
	fs.StringVar(&f.delimiter, "delimiter", "", `field separator of a delimited file (default: detected; use "\t" for tab)`)
	fs.StringVar(&f.columns, "columns", "", `column order of a delimited file without a header, e.g. "user,item,rating,timestamp" ("-" skips a column); a file with a header is read by its names (userId, movieId, rating, timestamp, ...), and --columns given with one must agree with it`)
	fs.StringVar(&f.header, "header", "auto", "whether a delimited file starts with a header naming its columns: auto (a first line without numbers), yes, no")
	fs.StringVar(&f.scale, "scale", "", `the public rating scale "min,max[,step]" (default: the format's or the dataset's published scale; else inferred from the ratings, which private methods refuse)`)
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip malformed, out-of-scale and duplicate lines (and report how many) instead of failing")
	fs.IntVar(&f.minUser, "min-user-ratings", 0, "drop users with fewer ratings (repeated with --min-item-ratings until stable)")
	fs.IntVar(&f.minItem, "min-item-ratings", 0, "drop items with fewer ratings")
}

func (f *dataFlags) options() (ratings.LoadOptions, error) {
	opt := ratings.LoadOptions{SkipBad: f.skipBad, Catalog: f.catalog}
	var err error
	if opt.Format, err = ratings.ParseFormat(f.format); err != nil {
		return opt, fmt.Errorf("--format: %w", err)
	}
	opt.Delimiter = strings.NewReplacer(`\t`, "\t").Replace(f.delimiter)
	opt.Columns = f.columns
	switch f.header {
	case "auto", "":
		opt.Header = ratings.HeaderAuto
	case "yes":
		opt.Header = ratings.HeaderYes
	case "no":
		opt.Header = ratings.HeaderNo
	default:
		return opt, fmt.Errorf("--header %q: want auto, yes or no", f.header)
	}
	if f.scale != "" {
		s, err := parseScale(f.scale)
		if err != nil {
			return opt, fmt.Errorf("--scale: %w", err)
		}
		opt.Scale = &s
	}
	return opt, nil
}

func parseScale(s string) (ratings.Scale, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return ratings.Scale{}, fmt.Errorf("%q: want min,max[,step]", s)
	}
	var v [3]float64
	for k, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return ratings.Scale{}, fmt.Errorf("%q: %q is not a number", s, p)
		}
		v[k] = x
	}
	sc := ratings.Scale{Min: float32(v[0]), Max: float32(v[1]), Step: float32(v[2])}
	if !(sc.Min < sc.Max) || sc.Step < 0 {
		return ratings.Scale{}, fmt.Errorf("%q: want min < max and step ≥ 0", s)
	}
	return sc, nil
}

// load reads the dataset the flags name and applies the filters.
func (a *app) load(f *dataFlags) (*ratings.Dataset, error) {
	opt, err := f.options()
	if err != nil {
		return nil, err
	}
	d, rep, err := datasets.Open(f.data, opt)
	if err != nil {
		if errors.Is(err, ratings.ErrDuplicate) && f.columns == "" && !f.skipBad {
			// A headerless file read as user,item,rating whose columns are
			// in another order repeats "pairs" everywhere.
			return nil, &hintError{msg: err.Error() + "; if the file's columns are not user,item,rating in that order, name them in a header line (user,item,rating,...) or give --columns (e.g. --columns item,rating,user); --skip-bad keeps the first of each pair", err: err}
		}
		return nil, withDataHint(err)
	}
	f.scaleFrom = scaleSource(f, d, rep)
	if d.Scale.Inferred {
		fmt.Fprintf(a.stderr, "privrec: %s: rating scale %v read off the ratings; private methods need it declared: --scale MIN,MAX[,STEP]\n", f.data, d.Scale.Declared())
	}
	a.reportSkipped(f.data, rep)
	if f.minUser > 0 || f.minItem > 0 {
		n := d.Len()
		d = ratings.MinCounts(d, f.minUser, f.minItem)
		a.log.Info("filtered", "before", n, "after", d.Len(), "users", d.NumUsers(), "items", d.NumItems())
	}
	if d.Len() == 0 {
		return nil, fmt.Errorf("%s: no ratings left after filtering", f.data)
	}
	return d, nil
}

// scaleSource says where the scale of d, loaded by f, came from.
func scaleSource(f *dataFlags, d *ratings.Dataset, rep *ratings.LoadReport) string {
	switch {
	case f.scale != "":
		return "declared by --scale"
	case rep != nil && rep.ScaleFile != "":
		return "declared by " + rep.ScaleFile
	case d.Scale.Inferred:
		return "inferred from the ratings (not usable by private methods; declare it with --scale)"
	}
	if _, ok := datasets.DeclaredScale(f.data); ok {
		return "published with the dataset " + f.data
	}
	if rep != nil {
		return "the " + string(rep.Format) + " format's"
	}
	return "the embedded dataset's"
}

// dataDir returns the folder of the dataset the flags name, for files that
// sit beside the ratings (the official ML-100K splits).
func (f *dataFlags) dataDir() (string, error) {
	if st, err := os.Stat(f.data); err == nil {
		if st.IsDir() {
			return f.data, nil
		}
		return filepath.Dir(f.data), nil
	}
	return datasets.Dir(f.data)
}
