package ratings

import (
	"fmt"
	"io"
	"os"
)

// fileSpan records where the ratings of one input file start.
type fileSpan struct {
	name  string
	start int
}

// loader parses rating streams into a Builder.
type loader struct {
	opt     LoadOptions
	rep     *LoadReport
	b       *Builder
	frozen  bool // IDs must already be in b (OfficialSplit)
	catalog bool // item IDs must already be in b (LoadForItems)

	catalogName string  // names the items of a catalog load in errors
	lines       []int32 // line number of each rating
	files       []fileSpan
	examples    []example

	scale    Scale
	check    bool // check values against scale while parsing
	scaleSet bool // scale fixed by options or format

	fields [][]byte
	long   []byte
	user   []byte // LoadOptions.User
	cur    []byte // Netflix: current MovieID
}

func newLoader(opt LoadOptions, path string) (*loader, error) {
	if opt.Scale != nil {
		s := *opt.Scale
		if !finite(s.Min) || !finite(s.Max) || !finite(s.Step) || s.Min > s.Max || s.Step < 0 || !finite(s.Max-s.Min) {
			return nil, fmt.Errorf("ratings: invalid scale %v: %w", s, ErrFormat)
		}
	}
	if opt.Header < HeaderAuto || opt.Header > HeaderNo {
		return nil, fmt.Errorf("ratings: invalid header mode %d: %w", opt.Header, ErrFormat)
	}
	switch opt.Format {
	case FormatAuto, FormatDelimited:
	case FormatML100K, FormatML1M, FormatMLCSV, FormatNetflix:
		if opt.Delimiter != "" || opt.Columns != "" {
			return nil, fmt.Errorf("ratings: Delimiter and Columns apply only to the delimited format, not %s: %w", opt.Format, ErrFormat)
		}
	default:
		return nil, fmt.Errorf("ratings: format %q: %w", opt.Format, ErrFormat)
	}
	if opt.Columns != "" {
		if _, err := parseColumns(opt.Columns, opt.User != ""); err != nil {
			return nil, err
		}
	}
	return &loader{
		opt:  opt,
		user: []byte(opt.User),
		rep:  &LoadReport{Path: path},
		b:    NewBuilder(opt.Name, Scale{}),
	}, nil
}

// setScale fixes the scale policy for format f (on the first file).
func (l *loader) setScale(f Format) {
	if l.scaleSet {
		return
	}
	l.scaleSet = true
	switch {
	case l.opt.Scale != nil:
		l.scale, l.check = *l.opt.Scale, true
	case f == FormatML100K || f == FormatNetflix:
		l.scale, l.check = Stars5, true
	case f == FormatML1M || f == FormatMLCSV:
		l.scale, l.check = HalfStars5, true
	default:
		l.check = false
	}
}

// readFile opens path (gzip or not) and parses it.
func (l *loader) readFile(path string, f Format) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("ratings: %w", err)
	}
	defer fh.Close()
	size := int64(-1)
	if st, err := fh.Stat(); err == nil {
		size = st.Size()
	}
	return l.readStream(fh, path, f, size)
}

// readStream parses one input. size, if positive, is the input size, used
// to preallocate.
func (l *loader) readStream(r io.Reader, file string, f Format, size int64) error {
	in, err := openInput(r, file, size)
	if err != nil {
		return err
	}
	defer in.close()
	f = l.streamFormat(f, in)
	fileIdx := l.startFile(file, f)
	l.preallocate(in)
	spec, blank, err := l.lineSpec(f, in)
	if err != nil || blank {
		return err
	}
	return l.parseLines(in, fileIdx, f, &spec)
}

// streamFormat returns the format of an input given as f: f itself unless
// it is FormatAuto; then FormatDelimited if a delimiter or columns are set,
// else the format detected from the head.
func (l *loader) streamFormat(f Format, in *input) Format {
	switch {
	case f != FormatAuto:
		return f
	case l.opt.Delimiter != "" || l.opt.Columns != "":
		return FormatDelimited
	}
	return detectFormat(in.head, in.partial)
}

// startFile registers the next input file, of format f, and returns its
// index. The first file sets the reported format and the scale policy.
func (l *loader) startFile(name string, f Format) int {
	if l.rep.Format == "" {
		l.rep.Format = f
	}
	l.setScale(f)
	l.files = append(l.files, fileSpan{name: name, start: len(l.b.vs)})
	return len(l.files) - 1
}

// preallocate makes room for the ratings of an input of known size, their
// number estimated from the length of its first 100 lines.
func (l *loader) preallocate(in *input) {
	if in.size <= 0 {
		return
	}
	lines := firstLines(in.head, 100, in.partial)
	if len(lines) == 0 {
		return
	}
	n := 0
	for _, ln := range lines {
		n += len(ln) + 1
	}
	l.grow(int(in.size/int64(n)*int64(len(lines))) + 16)
}

// lineSpec returns how the lines of an input of format f are cut into
// fields; Netflix lines are cut by netflixLine, so theirs is the zero
// lineSpec. blank reports a delimited input without a non-blank line, which
// has nothing to parse (finish then reports ErrEmpty).
func (l *loader) lineSpec(f Format, in *input) (spec lineSpec, blank bool, err error) {
	switch f {
	case FormatNetflix:
		return lineSpec{}, false, nil
	case FormatDelimited:
		return l.delimitedSpec(in)
	case FormatMLCSV:
		spec, err = l.withHeader(in, specFor(f), false)
		return spec, false, err
	}
	return specFor(f), false, nil
}

// delimitedSpec returns the lineSpec of a delimited input: the delimiter of
// the options, detected from the head if unset; the columns named by a
// header, else those of the options (see withHeader). blank is as for
// lineSpec.
func (l *loader) delimitedSpec(in *input) (spec lineSpec, blank bool, err error) {
	cols, err := parseColumns(l.opt.Columns, l.opt.User != "")
	if err != nil {
		return lineSpec{}, false, err
	}
	delim := l.opt.Delimiter
	if delim == "" {
		var ok bool
		delim, ok = detectDelimiter(in.head, in.partial, len(cols))
		if !ok && l.opt.User != "" && l.opt.Columns == "" {
			// One user's file without a user column: item,rating.
			cols = []int8{colItem, colRating}
			delim, ok = detectDelimiter(in.head, in.partial, len(cols))
		}
		if !ok {
			if !in.partial && len(firstLines(in.head, 1, false)) == 0 {
				return lineSpec{}, true, nil
			}
			return lineSpec{}, false, &ParseError{File: in.name, Err: delimiterError(in, cols)}
		}
	}
	spec, err = l.withHeader(in, newSpec(delim, cols, false), l.opt.Columns != "")
	return spec, false, err
}

// delimiterError says why no delimiter cuts the head of in into fields
// for the columns cols: its lines have too few fields for any, or no
// candidate cuts them alike.
func delimiterError(in *input, cols []int8) error {
	for n := len(cols) - 1; n >= 2; n-- {
		if d, ok := detectDelimiter(in.head, in.partial, n); ok {
			return fmt.Errorf("the first lines have %d fields (delimiter %q), want at least %d (%s): %w", n, d, len(cols), columnNames(cols), ErrFormat)
		}
	}
	return fmt.Errorf("cannot detect the delimiter: none of tab, comma, ::, |, ; and space cuts the first lines alike into at least %d fields (%s): %w",
		len(cols), columnNames(cols), ErrFormat)
}

// grow makes room for n more ratings.
func (l *loader) grow(n int) {
	n = min(n, 1<<26)
	b := l.b
	if cap(b.vs)-len(b.vs) >= n {
		return
	}
	b.us = append(make([]int32, 0, len(b.us)+n), b.us...)
	b.is = append(make([]int32, 0, len(b.is)+n), b.is...)
	b.vs = append(make([]float32, 0, len(b.vs)+n), b.vs...)
	l.lines = append(make([]int32, 0, len(l.lines)+n), l.lines...)
}
