package ratings

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
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
	// Columns is the column order of a delimited file, like
	// "item,user,rating,timestamp"; "-" names an ignored column; columns
	// beyond the list are ignored. Default "user,item,rating".
	Columns string
	// Header says whether the first line is a header (not used by Netflix).
	Header HeaderMode
	// Scale is the rating scale; ratings off the scale are ErrRange. nil
	// uses the format's scale: Stars5 for ml100k and netflix, HalfStars5 for
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
	NoTitles bool
}

// LoadReport describes what a load read.
type LoadReport struct {
	Path     string  // the rating file (or Netflix folder) read
	Format   Format  // the format used
	Lines    int     // data lines read: ratings plus skipped lines (of the title file too)
	Skipped  int     // bad lines skipped under SkipBad
	Examples []error // the first few (at most 5) skipped-line errors, in file order
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
// several candidate files and none of these names is an ErrFormat error
// listing them.
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
	l, err := newLoader(opt, reportPath)
	if err != nil {
		return nil, nil, err
	}
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
		titles, err := loadTitles(files[0], l.rep.Format, opt.SkipBad, l)
		if err != nil {
			return nil, nil, err
		}
		if titles != nil {
			d.ItemTitles = make([]string, len(d.ItemIDs))
			for i, id := range d.ItemIDs {
				d.ItemTitles[i] = titles[id]
			}
		}
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
	"probe.txt": true, "qualifying.txt": true,
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
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("ratings: %w", err)
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
	switch len(cands) {
	case 0:
		return nil, "", fmt.Errorf("ratings: %s: no rating file found (looked for u.data, ratings.dat, ratings.csv, Netflix combined_data_*.txt or training_set/, ratings_uir_dense.tsv): %w", dir, ErrFormat)
	case 1:
		return []string{filepath.Join(dir, cands[0])}, pick(FormatAuto), nil
	}
	return nil, "", fmt.Errorf("ratings: %s: several candidate rating files, load one of them: %s: %w", dir, strings.Join(cands, ", "), ErrFormat)
}

// fileSpan records where the ratings of one input file start.
type fileSpan struct {
	name  string
	start int
}

// example is a skipped-line error with its sort key.
type example struct {
	file int
	err  *ParseError
}

// loader parses rating streams into a Builder.
type loader struct {
	opt      LoadOptions
	rep      *LoadReport
	b        *Builder
	frozen   bool    // IDs must already be in b (OfficialSplit)
	lines    []int32 // line number of each rating
	files    []fileSpan
	examples []example

	scale    Scale
	check    bool // check values against scale while parsing
	scaleSet bool // scale fixed by options or format

	fields [][]byte
	long   []byte
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
		if _, err := parseColumns(opt.Columns); err != nil {
			return nil, err
		}
	}
	return &loader{
		opt: opt,
		rep: &LoadReport{Path: path},
		b:   NewBuilder(opt.Name, Scale{}),
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

const bufSize = 1 << 20

// headSize is the number of first bytes of an input looked at to detect its
// format and delimiter and to estimate its number of lines.
const headSize = 64 << 10

// input is one rating stream being read, decompressed if it was gzipped.
type input struct {
	name    string        // names the input in errors
	br      *bufio.Reader // the text
	gz      *gzip.Reader  // the decompressor; nil if the input is not gzipped
	size    int64         // the input size if known and not gzipped, else -1
	head    []byte        // the first headSize bytes of the text (peeked)
	partial bool          // head is a prefix of the text, not all of it
}

// openInput buffers r, undoes gzip compression (detected from the magic
// bytes) and peeks at the head of the text. size is r's size, or -1.
func openInput(r io.Reader, name string, size int64) (*input, error) {
	in := &input{name: name, br: bufio.NewReaderSize(r, bufSize), size: size}
	if magic, _ := in.br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(in.br)
		if err != nil {
			return nil, &ParseError{File: name, Err: fmt.Errorf("gzip: %v: %w", err, ErrFormat)}
		}
		in.gz, in.br, in.size = gz, bufio.NewReaderSize(gz, bufSize), -1
	}
	head, err := in.br.Peek(headSize)
	in.head, in.partial = head, err == nil
	return in, nil
}

// close releases the decompressor, if any.
func (in *input) close() {
	if in.gz != nil {
		in.gz.Close()
	}
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
	}
	return specFor(f), false, nil
}

// delimitedSpec returns the lineSpec of a delimited input: the columns and
// delimiter of the options, the delimiter detected from the head if unset.
// blank is as for lineSpec.
func (l *loader) delimitedSpec(in *input) (spec lineSpec, blank bool, err error) {
	cols, err := parseColumns(l.opt.Columns)
	if err != nil {
		return lineSpec{}, false, err
	}
	delim := l.opt.Delimiter
	if delim == "" {
		var ok bool
		delim, ok = detectDelimiter(in.head, in.partial, len(cols))
		if !ok {
			if !in.partial && len(firstLines(in.head, 1, false)) == 0 {
				return lineSpec{}, true, nil
			}
			return lineSpec{}, false, &ParseError{File: in.name, Err: fmt.Errorf("cannot detect the delimiter (tried tab, comma, ::, |, ;, space) for %d columns: %w", len(cols), ErrFormat)}
		}
	}
	return newSpec(delim, cols, false), false, nil
}

// parseLines reads the lines of an input of format f, the fileIdx-th file,
// skipping blank lines and a header, and adds their ratings.
func (l *loader) parseLines(in *input, fileIdx int, f Format, spec *lineSpec) error {
	l.cur = l.cur[:0]
	curIdx := int32(-1)
	lineNo := 0
	headerDone := f == FormatNetflix || l.opt.Header == HeaderNo
	for {
		line, err := l.readLine(in.br)
		if err != nil && err != io.EOF {
			return l.readError(in, lineNo+1, err)
		}
		if len(line) == 0 && err == io.EOF {
			return nil
		}
		lineNo++
		line = cleanLine(line, lineNo)
		if isBlank(line) {
			continue
		}
		if !headerDone {
			headerDone = true
			if l.headerLine(spec, line) {
				continue
			}
		}
		pe, data := l.parseLine(f, spec, line, &curIdx)
		if !data {
			continue
		}
		if err := l.record(in.name, fileIdx, lineNo, pe); err != nil {
			return err
		}
	}
}

// readError is the error of a read that failed at line n. A line cut by a
// failed read is not trusted. A broken gzip stream (truncated, bad
// checksum) is bad input: ErrFormat.
func (l *loader) readError(in *input, n int, err error) error {
	if in.gz != nil {
		err = fmt.Errorf("gzip: %w: %w", err, ErrFormat)
	}
	return l.fatal(&ParseError{File: in.name, Line: n, Err: fmt.Errorf("read: %w", err)})
}

// cleanLine trims the line end of line n and, from the first line, a UTF-8
// byte order mark.
func cleanLine(line []byte, n int) []byte {
	line = trimLine(line)
	if n == 1 {
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	}
	return line
}

// headerLine reports whether the first non-blank line is a header to skip:
// always under HeaderYes, else (HeaderAuto) if its fields look like one.
func (l *loader) headerLine(spec *lineSpec, line []byte) bool {
	if l.opt.Header == HeaderYes {
		return true
	}
	l.fields = spec.split(l.fields[:0], line, len(spec.cols)+1)
	return isHeader(spec, l.fields)
}

// parseLine parses a non-blank line of format f and adds its rating. data
// is false for a Netflix "MovieID:" line, which only sets the current movie
// (*curIdx); else pe says why the line gave no rating, if it gave none.
func (l *loader) parseLine(f Format, spec *lineSpec, line []byte, curIdx *int32) (pe *ParseError, data bool) {
	if f != FormatNetflix {
		return l.dataLine(spec, line), true
	}
	pe = l.netflixLine(line, curIdx)
	if pe == nil && *curIdx == -2 { // a MovieID line
		*curIdx = -1
		return nil, false
	}
	return pe, true
}

// record counts data line lineNo of a file: the line of its rating, or,
// given its error pe, a bad line (fatal unless SkipBad).
func (l *loader) record(file string, fileIdx, lineNo int, pe *ParseError) error {
	l.rep.Lines++
	if pe != nil {
		pe.File, pe.Line = file, lineNo
		return l.bad(fileIdx, pe)
	}
	l.lines = append(l.lines, int32(min(lineNo, math.MaxInt32)))
	return nil
}

// isHeader reports whether the fields of a first line look like a header:
// the line reaches the rating column and none of its columns is a number.
// A first line with numeric IDs but a bad rating is a malformed data line,
// not a header, so it is reported rather than silently dropped.
func isHeader(s *lineSpec, fields [][]byte) bool {
	if len(fields) <= s.rating {
		return false
	}
	for _, f := range fields[:min(len(fields), len(s.cols))] {
		if isNumber(trimField(f)) {
			return false
		}
	}
	return true
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

// readLine returns the next line, including its newline; lines longer than
// the buffer are collected in l.long.
func (l *loader) readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	l.long = append(l.long[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = br.ReadSlice('\n')
		l.long = append(l.long, line...)
	}
	return l.long, err
}

// bad records a bad line: an error unless SkipBad.
func (l *loader) bad(fileIdx int, pe *ParseError) error {
	if !l.opt.SkipBad {
		return l.fatal(pe)
	}
	l.rep.Skipped++
	if len(l.examples) < maxExamples {
		l.examples = append(l.examples, example{file: fileIdx, err: pe})
	}
	return nil
}

// fatal returns the first error of the input: a duplicate among the ratings
// read so far (they all precede the failing line), else err.
func (l *loader) fatal(err *ParseError) error {
	if dups := findDuplicates(l.b.us, l.b.is, len(l.b.users.ids), len(l.b.items.ids)); len(dups) > 0 {
		return l.dupError(dups[0])
	}
	return err
}

// fileOf returns the index of the file holding rating k.
func (l *loader) fileOf(k int32) int {
	return sort.Search(len(l.files), func(f int) bool { return l.files[f].start > int(k) }) - 1
}

func (l *loader) dupError(d duplicate) *ParseError {
	ff, fl := l.fileOf(d.first), l.fileOf(d.later)
	at := fmt.Sprint(l.lines[d.first])
	if ff != fl {
		at = fmt.Sprintf("%s:%d", l.files[ff].name, l.lines[d.first])
	}
	return &ParseError{
		File: l.files[fl].name,
		Line: int(l.lines[d.later]),
		Err: fmt.Errorf("user %q, item %q rated again (first at line %s): %w",
			l.b.users.ids[l.b.us[d.later]], l.b.items.ids[l.b.is[d.later]], at, ErrDuplicate),
	}
}

// rating parses and checks a rating field.
func (l *loader) rating(b []byte) (float32, *ParseError) {
	v, ok := parseFloat32(b)
	switch {
	case !ok:
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q: %w", b, ErrSyntax)}
	case !finite(v):
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q is not finite: %w", b, ErrRange)}
	case l.check && !l.scale.Contains(v):
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q outside scale %v: %w", b, l.scale, ErrRange)}
	}
	return v, nil
}

// index returns the index of an ID in m, adding it unless the loader is
// frozen. field names the column in errors.
func (l *loader) index(m *idMap, b []byte, field string) (int32, *ParseError) {
	if len(b) == 0 {
		return 0, &ParseError{Field: field, Err: fmt.Errorf("empty ID: %w", ErrSyntax)}
	}
	if !l.frozen {
		return m.index(b), nil
	}
	i := m.find(b)
	if i < 0 {
		return 0, &ParseError{Field: field, Err: fmt.Errorf("ID %q not in the full dataset: %w", b, ErrRange)}
	}
	return i, nil
}

// ids returns the indices of a user and an item ID; nothing is added unless
// both are valid.
func (l *loader) ids(user, item []byte) (u, i int32, pe *ParseError) {
	if len(user) == 0 {
		return 0, 0, &ParseError{Field: "user", Err: fmt.Errorf("empty ID: %w", ErrSyntax)}
	}
	if len(item) == 0 {
		return 0, 0, &ParseError{Field: "item", Err: fmt.Errorf("empty ID: %w", ErrSyntax)}
	}
	if l.frozen && l.b.items.find(item) < 0 {
		return 0, 0, &ParseError{Field: "item", Err: fmt.Errorf("ID %q not in the full dataset: %w", item, ErrRange)}
	}
	if u, pe = l.index(&l.b.users, user, "user"); pe != nil {
		return 0, 0, pe
	}
	i, pe = l.index(&l.b.items, item, "item")
	return u, i, pe
}

// dataLine parses one line of a delimited or MovieLens file.
func (l *loader) dataLine(s *lineSpec, line []byte) *ParseError {
	l.fields = s.split(l.fields[:0], line, len(s.cols)+1)
	fs := l.fields
	if len(fs) < len(s.cols) || (s.exact && len(fs) != len(s.cols)) {
		return &ParseError{Err: fmt.Errorf("%d fields, want %d: %w", len(fs), len(s.cols), ErrSyntax)}
	}
	v, pe := l.rating(trimField(fs[s.rating]))
	if pe != nil {
		return pe
	}
	if s.time >= 0 {
		if t := trimField(fs[s.time]); !isNumber(t) {
			return &ParseError{Field: "timestamp", Err: fmt.Errorf("value %q: %w", t, ErrSyntax)}
		}
	}
	u, i, pe := l.ids(trimField(fs[s.user]), trimField(fs[s.item]))
	if pe != nil {
		return pe
	}
	l.b.add(u, i, v)
	return nil
}

// netflixLine parses one line of a Netflix Prize file: "MovieID:" sets the
// current movie (and sets *cur to -2), "CustomerID,Rating,Date" adds a
// rating of it.
func (l *loader) netflixLine(line []byte, cur *int32) *ParseError {
	t := trimField(line)
	if len(t) > 0 && t[len(t)-1] == ':' && bytes.IndexByte(t, ',') < 0 {
		id := trimField(t[:len(t)-1])
		if len(id) == 0 {
			return &ParseError{Field: "item", Err: fmt.Errorf("empty MovieID: %w", ErrSyntax)}
		}
		l.cur = append(l.cur[:0], id...)
		*cur = -2
		return nil
	}
	if len(l.cur) == 0 {
		return &ParseError{Field: "item", Err: fmt.Errorf("rating line before any \"MovieID:\" line: %w", ErrSyntax)}
	}
	l.fields = (&lineSpec{delim: ","}).split(l.fields[:0], line, 4)
	fs := l.fields
	if len(fs) != 3 {
		return &ParseError{Err: fmt.Errorf("%d fields, want 3 (CustomerID,Rating,Date): %w", len(fs), ErrSyntax)}
	}
	v, pe := l.rating(trimField(fs[1]))
	if pe != nil {
		return pe
	}
	if len(trimField(fs[2])) == 0 {
		return &ParseError{Field: "date", Err: fmt.Errorf("empty date: %w", ErrSyntax)}
	}
	user := trimField(fs[0])
	if *cur < 0 {
		u, i, pe := l.ids(user, l.cur)
		if pe != nil {
			return pe
		}
		*cur = i
		l.b.add(u, i, v)
		return nil
	}
	u, pe := l.index(&l.b.users, user, "user")
	if pe != nil {
		return pe
	}
	l.b.add(u, *cur, v)
	return nil
}

// finish removes or reports duplicates, settles the scale and returns the
// dataset.
func (l *loader) finish() (*Dataset, error) {
	b := l.b
	dups := findDuplicates(b.us, b.is, len(b.users.ids), len(b.items.ids))
	if len(dups) > 0 {
		if !l.opt.SkipBad {
			return nil, l.dupError(dups[0])
		}
		for _, d := range dups[:min(len(dups), maxExamples)] {
			l.examples = append(l.examples, example{file: l.fileOf(d.later), err: l.dupError(d)})
		}
		l.rep.Skipped += len(dups)
		// Drop the repetitions. Their users and items occur earlier, so
		// the index space does not change.
		w, next := 0, 0
		for k := range b.vs {
			if next < len(dups) && int(dups[next].later) == k {
				next++
				continue
			}
			b.us[w], b.is[w], b.vs[w], l.lines[w] = b.us[k], b.is[k], b.vs[k], l.lines[k]
			w++
		}
		b.us, b.is, b.vs, l.lines = b.us[:w], b.is[:w], b.vs[:w], l.lines[:w]
	}
	sort.SliceStable(l.examples, func(a, c int) bool {
		ea, ec := l.examples[a], l.examples[c]
		if ea.file != ec.file {
			return ea.file < ec.file
		}
		return ea.err.Line < ec.err.Line
	})
	for _, e := range l.examples[:min(len(l.examples), maxExamples)] {
		l.rep.Examples = append(l.rep.Examples, e.err)
	}
	if len(b.vs) == 0 {
		return nil, &ParseError{File: l.rep.Path, Err: ErrEmpty}
	}
	switch {
	case l.opt.Scale != nil:
		b.scale = *l.opt.Scale
	case l.check:
		b.scale = l.scale
		if l.rep.Format == FormatML1M && allOn(b.vs, Stars5) {
			b.scale = Stars5
		}
	default:
		s, err := inferScale(b.vs)
		if err != nil {
			return nil, &ParseError{File: l.rep.Path, Field: "rating", Err: err}
		}
		b.scale = s
	}
	return b.Dataset(), nil
}

// allOn reports whether every value is on the scale.
func allOn(vs []float32, s Scale) bool {
	for _, v := range vs {
		if !s.Contains(v) {
			return false
		}
	}
	return true
}

// inferScale returns the scale of a set of finite ratings: min, max and step
// 1 if they are all integers, 0.5 if all are halves, else 0.
func inferScale(vs []float32) (Scale, error) {
	lo, hi := vs[0], vs[0]
	ints, halves := true, true
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
		if ints && v != float32(math.Trunc(float64(v))) {
			ints = false
		}
		if halves && 2*v != float32(math.Trunc(float64(2*v))) {
			halves = false
		}
	}
	if !finite(hi - lo) {
		return Scale{}, fmt.Errorf("ratings span %g..%g, too wide: %w", lo, hi, ErrRange)
	}
	s := Scale{Min: lo, Max: hi}
	switch {
	case ints:
		s.Step = 1
	case halves:
		s.Step = 0.5
	}
	if s.Step > 0 && !allOn(vs, s) { // float rounding far from zero
		s.Step = 0
	}
	return s, nil
}

// titleFile returns the path of the title file for a rating file of format
// f, and whether it goes through an item map. "" if there is none.
func titleFile(ratingFile string, f Format) (path, itemMap string) {
	dir := filepath.Dir(ratingFile)
	switch f {
	case FormatML100K:
		return existing(dir, "u.item"), ""
	case FormatML1M:
		return existing(dir, "movies.dat"), ""
	case FormatMLCSV:
		return existing(dir, "movies.csv"), ""
	case FormatNetflix:
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if p := existing(d, "movie_titles.txt"); p != "" {
				return p, ""
			}
		}
	case FormatDelimited:
		m, t := existing(dir, "item_map.tsv"), existing(dir, "movies.dat")
		if m != "" && t != "" {
			return t, m
		}
	}
	return "", ""
}

// loadTitles returns the item titles by item ID for a rating file, or nil.
func loadTitles(ratingFile string, f Format, skipBad bool, l *loader) (map[string]string, error) {
	path, mapPath := titleFile(ratingFile, f)
	if path == "" {
		return nil, nil
	}
	data, err := readAll(path)
	if err != nil {
		return nil, err
	}
	var onBad func(*ParseError) error
	onBad = func(pe *ParseError) error {
		if !skipBad {
			return pe
		}
		l.rep.Lines++
		l.rep.Skipped++
		if len(l.rep.Examples) < maxExamples {
			l.rep.Examples = append(l.rep.Examples, pe)
		}
		return nil
	}
	var titles map[string]string
	switch filepath.Base(strings.TrimSuffix(path, ".gz")) {
	case "u.item":
		titles, err = parseTitles(data, path, "|", onBad)
	case "movies.dat":
		titles, err = parseTitles(data, path, "::", onBad)
	case "movies.csv":
		titles, err = parseMoviesCSV(data, path, onBad)
	case "movie_titles.txt":
		titles, err = parseNetflixTitles(data, path, onBad)
	}
	if err != nil || mapPath == "" {
		return titles, err
	}
	mdata, err := readAll(mapPath)
	if err != nil {
		return nil, err
	}
	m, err := parseItemMap(mdata, mapPath, onBad)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for dense, movie := range m {
		out[dense] = titles[movie]
	}
	return out, nil
}

// readAll reads a whole file, undoing gzip.
func readAll(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ratings: %w", err)
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, &ParseError{File: path, Err: fmt.Errorf("gzip: %v: %w", err, ErrFormat)}
		}
		data, err = io.ReadAll(gz)
		if err != nil {
			return nil, &ParseError{File: path, Err: fmt.Errorf("gzip: %v: %w", err, ErrFormat)}
		}
	}
	return data, nil
}

// decodeText returns data as a string: as is if it is valid UTF-8, else
// decoded from ISO-8859-1 (each byte is the rune of the same value), the
// encoding of u.item and the ML-1M movies.dat.
func decodeText(data []byte) string {
	ascii := true
	for _, c := range data {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii || utf8.Valid(data) {
		return string(data)
	}
	r := make([]rune, len(data))
	for i, c := range data {
		r[i] = rune(c)
	}
	return string(r)
}

// eachLine calls fn with each non-blank line of s and its 1-based number.
func eachLine(s string, fn func(n int, line string) error) error {
	n := 0
	for len(s) > 0 {
		n++
		i := strings.IndexByte(s, '\n')
		var line string
		if i < 0 {
			line, s = s, ""
		} else {
			line, s = s[:i], s[i+1:]
		}
		line = strings.TrimSuffix(line, "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return nil
}

// parseTitles parses "ID<sep>Title<sep>..." lines (u.item, movies.dat). The
// first title of an ID wins.
func parseTitles(data []byte, file, sep string, onBad func(*ParseError) error) (map[string]string, error) {
	titles := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		id, rest, ok := strings.Cut(line, sep)
		id = strings.TrimSpace(id)
		if !ok || id == "" {
			return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("want ID%sTitle: %w", sep, ErrSyntax)})
		}
		title, _, _ := strings.Cut(rest, sep)
		if _, seen := titles[id]; !seen {
			titles[id] = title
		}
		return nil
	})
	return titles, err
}

// parseNetflixTitles parses movie_titles.txt: "MovieID,Year,Title", where
// the title may contain commas.
func parseNetflixTitles(data []byte, file string, onBad func(*ParseError) error) (map[string]string, error) {
	titles := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		id, rest, ok1 := strings.Cut(line, ",")
		_, title, ok2 := strings.Cut(rest, ",")
		id = strings.TrimSpace(id)
		if !ok1 || !ok2 || id == "" {
			return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("want MovieID,Year,Title: %w", ErrSyntax)})
		}
		if _, seen := titles[id]; !seen {
			titles[id] = title
		}
		return nil
	})
	return titles, err
}

// parseMoviesCSV parses movies.csv: header "movieId,title,genres", fields
// quoted as in RFC 4180 when they hold commas.
func parseMoviesCSV(data []byte, file string, onBad func(*ParseError) error) (map[string]string, error) {
	titles := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		if n == 1 && strings.HasPrefix(strings.ToLower(line), "movieid,") {
			return nil
		}
		id, rest, ok := strings.Cut(line, ",")
		id = strings.TrimSpace(id)
		if !ok || id == "" {
			return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("want movieId,title,genres: %w", ErrSyntax)})
		}
		var title string
		if strings.HasPrefix(rest, `"`) {
			// Quoted: runs to the first quote not doubled.
			var sb strings.Builder
			i := 1
			closed := false
			for i < len(rest) {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						sb.WriteByte('"')
						i += 2
						continue
					}
					closed = true
					break
				}
				sb.WriteByte(rest[i])
				i++
			}
			if !closed {
				return onBad(&ParseError{File: file, Line: n, Field: "title", Err: fmt.Errorf("unterminated quote: %w", ErrSyntax)})
			}
			title = sb.String()
		} else {
			title, _, _ = strings.Cut(rest, ",")
		}
		if _, seen := titles[id]; !seen {
			titles[id] = title
		}
		return nil
	})
	return titles, err
}

// parseItemMap parses item_map.tsv (header "item_idx movie_id note"): dense
// item ID to original MovieID. Rows with an empty movie_id (ambiguous
// items) map to "", which has no title.
func parseItemMap(data []byte, file string, onBad func(*ParseError) error) (map[string]string, error) {
	m := make(map[string]string)
	err := eachLine(decodeText(data), func(n int, line string) error {
		fs := strings.Split(line, "\t")
		if n == 1 && !isDigits([]byte(strings.TrimSpace(fs[0]))) {
			return nil // header
		}
		if len(fs) < 2 || strings.TrimSpace(fs[0]) == "" {
			return onBad(&ParseError{File: file, Line: n, Err: fmt.Errorf("want item TAB movie_id: %w", ErrSyntax)})
		}
		m[strings.TrimSpace(fs[0])] = strings.TrimSpace(fs[1])
		return nil
	})
	return m, err
}
