package ratings

import (
	"fmt"
	"io"
	"math"
	"time"
)

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

// headerLine reports whether the first non-blank line is a header to skip:
// always under HeaderYes, else (HeaderAuto) if its fields look like one.
func (l *loader) headerLine(spec *lineSpec, line []byte) bool {
	switch {
	case spec.header == headerPresent:
		return true
	case spec.header == headerAbsent:
		return false
	case l.opt.Header == HeaderYes:
		return true
	}
	l.fields = spec.split(l.fields[:0], line, len(spec.cols)+1)
	return isHeader(spec, l.fields)
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

// dataLine parses one line of a delimited or MovieLens file.
func (l *loader) dataLine(s *lineSpec, line []byte) *ParseError {
	l.fields = s.split(l.fields[:0], line, len(s.cols)+1)
	fs := l.fields
	switch {
	case s.fromHeader && len(fs) > len(s.cols):
		return &ParseError{Err: fmt.Errorf("more fields than the header's %d: %w", len(s.cols), ErrSyntax)}
	case s.fromHeader && len(fs) < len(s.cols):
		return &ParseError{Err: fmt.Errorf("%d fields, the header has %d: %w", len(fs), len(s.cols), ErrSyntax)}
	case len(fs) < len(s.cols) || (s.exact && len(fs) != len(s.cols)):
		return &ParseError{Err: fmt.Errorf("%d fields, want %d: %w", len(fs), len(s.cols), ErrSyntax)}
	}
	v, pe := l.rating(trimField(fs[s.rating]))
	if pe != nil {
		return pe
	}
	if s.time >= 0 {
		if t := trimField(fs[s.time]); !isNumber(t) && !isISOTime(t) {
			return &ParseError{Field: "timestamp", Err: fmt.Errorf("value %q is neither a number (Unix time) nor an ISO 8601 date or time "+
				"(2006-01-02, 2006-01-02T15:04:05Z, 2006-01-02 15:04:05): %w", t, ErrSyntax)}
		}
	}
	user := l.user
	if s.user >= 0 {
		user = trimField(fs[s.user])
	}
	u, i, pe := l.ids(user, trimField(fs[s.item]))
	if pe != nil {
		return pe
	}
	l.b.add(u, i, v)
	return nil
}

// isoLayouts are the ISO 8601 forms a timestamp field may take besides a
// number: a date, and a date and time with or without a zone.
var isoLayouts = []string{"2006-01-02", time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00"}

// isISOTime reports whether b is a date or time in one of isoLayouts. The
// timestamp is checked, not kept: no method reads it.
func isISOTime(b []byte) bool {
	if len(b) < 10 || len(b) > 40 || b[4] != '-' {
		return false
	}
	for _, layout := range isoLayouts {
		if _, err := time.Parse(layout, string(b)); err == nil {
			return true
		}
	}
	return false
}

// rating parses and checks a rating field.
func (l *loader) rating(b []byte) (float32, *ParseError) {
	v, ok, huge := parseFloat32(b)
	switch {
	case !ok:
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q is not a decimal number: %w", b, ErrSyntax)}
	case huge && l.check:
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q outside scale %v: %w", b, l.scale, ErrRange)}
	case huge:
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q outside any scale: beyond ±3.4e38, the range of a rating: %w", b, ErrRange)}
	case !finite(v):
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q is not finite: %w", b, ErrRange)}
	case l.check && !l.scale.Contains(v):
		return 0, &ParseError{Field: "rating", Err: fmt.Errorf("value %q outside scale %v: %w", b, l.scale, ErrRange)}
	}
	return v, nil
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
	if l.catalog {
		if i = l.b.items.find(item); i < 0 {
			return 0, 0, &ParseError{Field: "item", Err: fmt.Errorf("ID %q is not among the %d items of %s: %w", item, len(l.b.items.ids), l.catalogName, ErrRange)}
		}
	}
	if u, pe = l.index(&l.b.users, user, "user"); pe != nil {
		return 0, 0, pe
	}
	if l.catalog {
		return u, i, nil
	}
	i, pe = l.index(&l.b.items, item, "item")
	return u, i, pe
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
