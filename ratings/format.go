package ratings

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Format names a rating file format.
type Format string

// The rating file formats. FormatAuto detects the format from the first
// lines of the file.
const (
	FormatAuto      Format = ""          // detect from the file
	FormatML100K    Format = "ml100k"    // u.data: user TAB item TAB rating TAB timestamp
	FormatML1M      Format = "ml1m"      // UserID::MovieID::Rating::Timestamp (ML-1M and ML-10M)
	FormatMLCSV     Format = "mlcsv"     // userId,movieId,rating,timestamp with header (ML-20M/25M/latest)
	FormatNetflix   Format = "netflix"   // "MovieID:" line then "CustomerID,Rating,Date" lines
	FormatDelimited Format = "delimited" // any delimited file, see LoadOptions
)

// ParseFormat returns the format named s. It ignores case and dashes
// ("ML-1M" is FormatML1M) and accepts "auto" and "" for FormatAuto, "ml10m"
// for FormatML1M and "ml20m", "ml25m", "mllatest" for FormatMLCSV.
func ParseFormat(s string) (Format, error) {
	k := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "-", ""))
	switch k {
	case "", "auto":
		return FormatAuto, nil
	case "ml100k":
		return FormatML100K, nil
	case "ml1m", "ml10m":
		return FormatML1M, nil
	case "mlcsv", "ml20m", "ml25m", "mllatest", "mllatestsmall":
		return FormatMLCSV, nil
	case "netflix":
		return FormatNetflix, nil
	case "delimited", "tsv", "csv":
		return FormatDelimited, nil
	}
	return FormatAuto, fmt.Errorf("ratings: format %q: %w (want auto, ml100k, ml1m, mlcsv, netflix or delimited)", s, ErrFormat)
}

// HeaderMode says whether a delimited file starts with a header line.
type HeaderMode int

// Header modes.
const (
	// HeaderAuto treats the first line as a header when none of its
	// columns (up to the last named one) is a number, so its rating column
	// is not a number either. A first line like "1,10,x" is a malformed
	// rating, not a header.
	HeaderAuto HeaderMode = iota
	// HeaderYes always skips the first line.
	HeaderYes
	// HeaderNo never skips the first line.
	HeaderNo
)

// Column roles in a line spec.
const (
	colSkip = iota
	colUser
	colItem
	colRating
	colTime
)

// lineSpec describes how to cut a line into fields.
type lineSpec struct {
	delim  string // field delimiter; " " means runs of blanks
	cols   []int8 // role of each column
	exact  bool   // the line must have exactly len(cols) fields
	user   int    // column positions; -1 if absent (LoadOptions.User)
	item   int
	rating int
	time   int // -1 if absent

	header     int8 // headerUndecided, headerPresent or headerAbsent
	fromHeader bool // cols were read off the header
}

// specFor returns the line spec of a fixed format.
func specFor(f Format) lineSpec {
	cols := []int8{colUser, colItem, colRating, colTime}
	switch f {
	case FormatML100K:
		return newSpec("\t", cols, true)
	case FormatML1M:
		return newSpec("::", cols, true)
	case FormatMLCSV:
		return newSpec(",", cols, true)
	}
	panic("ratings: no line spec for format " + string(f))
}

func newSpec(delim string, cols []int8, exact bool) lineSpec {
	s := lineSpec{delim: delim, cols: cols, exact: exact, user: -1, time: -1}
	for i, c := range cols {
		switch c {
		case colUser:
			s.user = i
		case colItem:
			s.item = i
		case colRating:
			s.rating = i
		case colTime:
			s.time = i
		}
	}
	return s
}

// parseColumns parses a column order like "user,item,rating,-,timestamp".
// oneUser allows an order without a user column (LoadOptions.User).
func parseColumns(s string, oneUser bool) ([]int8, error) {
	if strings.TrimSpace(s) == "" {
		return []int8{colUser, colItem, colRating}, nil
	}
	var cols []int8
	seen := map[int8]bool{}
	for _, name := range strings.Split(s, ",") {
		var c int8
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "user":
			c = colUser
		case "item":
			c = colItem
		case "rating":
			c = colRating
		case "timestamp":
			c = colTime
		case "-", "":
			c = colSkip
		default:
			return nil, fmt.Errorf("ratings: columns %q: unknown column %q (want user, item, rating, timestamp or -): %w", s, name, ErrFormat)
		}
		if c != colSkip && seen[c] {
			return nil, fmt.Errorf("ratings: columns %q: column %q given twice: %w", s, name, ErrFormat)
		}
		seen[c] = true
		cols = append(cols, c)
	}
	switch {
	case oneUser && (!seen[colItem] || !seen[colRating]):
		return nil, fmt.Errorf("ratings: columns %q: need item and rating: %w", s, ErrFormat)
	case !oneUser && (!seen[colUser] || !seen[colItem] || !seen[colRating]):
		return nil, fmt.Errorf("ratings: columns %q: need user, item and rating: %w", s, ErrFormat)
	}
	if len(cols) > 64 {
		return nil, fmt.Errorf("ratings: columns %q: too many columns: %w", s, ErrFormat)
	}
	return cols, nil
}

// split cuts line into fields, appending them to dst. It stops after max
// fields (max > 0), leaving the rest of the line in the last field, so
// callers can tell whether there were more.
func (s *lineSpec) split(dst [][]byte, line []byte, max int) [][]byte {
	switch {
	case s.delim == " ":
		for len(line) > 0 {
			i := 0
			for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
				i++
			}
			line = line[i:]
			if len(line) == 0 {
				break
			}
			if len(dst) == max-1 {
				return append(dst, line)
			}
			j := 0
			for j < len(line) && line[j] != ' ' && line[j] != '\t' {
				j++
			}
			dst = append(dst, line[:j])
			line = line[j:]
		}
		return dst
	case len(s.delim) == 1:
		c := s.delim[0]
		for {
			if len(dst) == max-1 {
				return append(dst, line)
			}
			if len(line) > 0 && line[0] == '"' {
				if j := quotedEnd(line, c); j >= 0 {
					dst = append(dst, line[:j])
					if j == len(line) {
						return dst
					}
					line = line[j+1:]
					continue
				}
			}
			i := bytes.IndexByte(line, c)
			if i < 0 {
				return append(dst, line)
			}
			dst = append(dst, line[:i])
			line = line[i+1:]
		}
	default:
		d := []byte(s.delim)
		for {
			if len(dst) == max-1 {
				return append(dst, line)
			}
			i := bytes.Index(line, d)
			if i < 0 {
				return append(dst, line)
			}
			dst = append(dst, line[:i])
			line = line[i+len(d):]
		}
	}
}

// quotedEnd returns the end of the double-quoted field at the start of
// line, which may hold the delimiter c and doubled quotes ("Toy Story,
// The"): the index of the delimiter after its closing quote, or len(line).
// It returns -1 when the quote is not closed right before a delimiter or
// the line's end; the field is then cut at the next delimiter as usual.
func quotedEnd(line []byte, c byte) int {
	for k := 1; k < len(line); k++ {
		if line[k] != '"' {
			continue
		}
		if k+1 < len(line) && line[k+1] == '"' {
			k++ // a doubled quote inside the field
			continue
		}
		if k+1 == len(line) || line[k+1] == c {
			return k + 1
		}
		return -1
	}
	return -1
}

// trimField removes surrounding blanks and one pair of surrounding double
// quotes.
func trimField(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	return b
}

// trimLine removes a trailing newline and carriage return.
func trimLine(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// isBlank reports whether b holds only white space.
func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

var pow10f32 = [...]float32{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// parseFloat32 parses a decimal number strictly: an optional sign, digits,
// optionally a point followed by digits, optionally an exponent ("4",
// "-0.25", "3.5e0"); "3.", ".5", "1_0" and hexadecimal are syntax errors.
// The words NaN and Inf(inity) parse, to values that are not finite. Plain
// decimals with at most 7 significant digits take an exact fast path: the
// mantissa and the power of ten are exact in float32, so one division rounds
// correctly; anything else goes to strconv.ParseFloat. ok is false for a
// syntax error; huge is true for a finite number beyond the float32 range
// ("1e308"), whose v is then ±Inf.
func parseFloat32(b []byte) (v float32, ok, huge bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		i = 1
	}
	var m uint32
	digits, frac := 0, 0
	sawDigit, dot := false, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			sawDigit = true
			if m != 0 || c != '0' {
				digits++
			}
			if digits > 7 {
				return parseFloatSlow(b)
			}
			m = m*10 + uint32(c-'0')
			if dot {
				frac++
				if frac >= len(pow10f32) {
					return parseFloatSlow(b)
				}
			}
		case c == '.' && !dot && sawDigit:
			dot = true
		default:
			return parseFloatSlow(b)
		}
	}
	if !sawDigit || (dot && frac == 0) {
		return 0, false, false
	}
	v = float32(m) / pow10f32[frac]
	if neg {
		v = -v
	}
	return v, true, false
}

// parseFloatSlow parses what the fast path of parseFloat32 does not.
func parseFloatSlow(b []byte) (v float32, ok, huge bool) {
	if !strictDecimal(b) && !nonFiniteWord(b) {
		return 0, false, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange {
			// Beyond float64: finite as written, far outside any scale;
			// or an underflow to 0, which is a number.
			return float32(f), true, math.IsInf(f, 0)
		}
		return 0, false, false
	}
	if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
		return float32(f), true, true
	}
	return float32(f), true, false
}

// strictDecimal reports whether b is [+-]D+[.D+][(e|E)[+-]D+].
func strictDecimal(b []byte) bool {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// nonFiniteWord reports whether b is NaN, Inf or Infinity (any case, Inf
// signed), which parse to values that are not finite.
func nonFiniteWord(b []byte) bool {
	s := strings.ToLower(string(b))
	s = strings.TrimLeft(s, "+-")
	if len(b)-len(s) > 1 {
		return false
	}
	return s == "nan" || s == "inf" || s == "infinity"
}

// finite reports whether v is neither infinite nor NaN.
func finite(v float32) bool {
	return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
}

// isNumber reports whether b is a decimal number (as accepted by
// parseFloat32).
func isNumber(b []byte) bool {
	_, ok, _ := parseFloat32(b)
	return ok
}

// isDigits reports whether b is a non-empty run of ASCII digits.
func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// firstLines returns up to n non-blank lines at the start of data, without
// their line endings. The last line is dropped if data may continue beyond
// it (partial is true) and it has no newline.
func firstLines(data []byte, n int, partial bool) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < n {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			if partial {
				break
			}
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		line = trimLine(line)
		if !isBlank(line) {
			out = append(out, line)
		}
	}
	return out
}

// detectFormat guesses the format of a rating file from its first bytes.
func detectFormat(head []byte, partial bool) Format {
	lines := firstLines(head, 5, partial)
	if len(lines) == 0 {
		return FormatDelimited
	}
	first := lines[0]
	switch {
	case bytes.Contains(first, []byte("::")):
		return FormatML1M
	case bytes.HasPrefix(bytes.ToLower(bytes.TrimSpace(first)), []byte("userid,movieid")):
		return FormatMLCSV
	}
	if t := bytes.TrimSpace(first); len(t) > 1 && t[len(t)-1] == ':' && isDigits(t[:len(t)-1]) {
		return FormatNetflix
	}
	// u.data shape: 4 tab-separated numeric fields on every sampled line.
	ml100k := true
	for _, l := range lines {
		f := bytes.Split(l, []byte("\t"))
		if len(f) != 4 || !isDigits(f[0]) || !isDigits(f[1]) || !isNumber(f[2]) || !isDigits(f[3]) {
			ml100k = false
			break
		}
	}
	if ml100k {
		return FormatML100K
	}
	return FormatDelimited
}

// delimiters are the candidates of delimiter detection, in order of
// preference.
var delimiters = []string{"\t", ",", "::", "|", ";", " "}

// detectDelimiter picks the first candidate delimiter that cuts every
// sampled line into the same number of fields, at least need; failing that,
// the first that cuts most lines into as many fields as the first line.
func detectDelimiter(head []byte, partial bool, need int) (string, bool) {
	lines := firstLines(head, 10, partial)
	if len(lines) == 0 {
		return "", false
	}
	var fields [][]byte
	for _, d := range delimiters {
		s := lineSpec{delim: d}
		n := -1
		ok := true
		for _, l := range lines {
			fields = s.split(fields[:0], l, 0)
			if len(fields) < need || (n >= 0 && len(fields) != n) {
				ok = false
				break
			}
			n = len(fields)
		}
		if ok {
			return d, true
		}
	}
	// No candidate cuts every line evenly: take the first that cuts most
	// lines like the first (a header, say), so the odd lines are reported
	// by number when parsed rather than the whole file refused.
	for _, d := range delimiters {
		s := lineSpec{delim: d}
		n := len(s.split(fields[:0], lines[0], 0))
		if n < need || n < 2 {
			continue
		}
		same := 0
		for _, l := range lines {
			if len(s.split(fields[:0], l, 0)) == n {
				same++
			}
		}
		if 2*same > len(lines) {
			return d, true
		}
	}
	return "", false
}
