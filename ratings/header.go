package ratings

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Header decisions of a lineSpec.
const (
	headerUndecided = iota // decide on the first non-blank line (isHeader)
	headerPresent          // the first non-blank line is a header
	headerAbsent           // the first non-blank line is data
)

// headerNames maps a header name, normalized by headerKey, to its column
// role. Names not listed are ignored columns.
var headerNames = map[string]int8{
	"user": colUser, "userid": colUser, "uid": colUser, "u": colUser,
	"customer": colUser, "customerid": colUser, "reviewer": colUser, "reviewerid": colUser,

	"item": colItem, "itemid": colItem, "iid": colItem, "i": colItem,
	"movie": colItem, "movieid": colItem, "product": colItem, "productid": colItem,
	"asin": colItem, "book": colItem, "bookid": colItem, "isbn": colItem,
	"track": colItem, "trackid": colItem, "song": colItem, "songid": colItem,

	"rating": colRating, "score": colRating, "stars": colRating, "star": colRating,
	"rate": colRating, "r": colRating, "bookrating": colRating,

	"timestamp": colTime, "time": colTime, "ts": colTime, "t": colTime,
	"unixtime": colTime, "unixtimestamp": colTime,
}

// HeaderNames returns the header names a delimited file's columns are read
// by, per role ("user", "item", "rating", "timestamp"), in lower case
// without separators: a header name matches one when lowered and stripped
// of '_', '-', '.' and blanks ("userId", "User-ID" and "user_id" all match
// "userid").
func HeaderNames() map[string][]string {
	out := map[string][]string{}
	for name, c := range headerNames {
		out[roleName(c)] = append(out[roleName(c)], name)
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// headerKey normalizes a header field: unquoted, lower case, without '_',
// '-', '.' and blanks.
func headerKey(b []byte) string {
	s := strings.ToLower(string(trimField(b)))
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', ' ', '\t':
			return -1
		}
		return r
	}, s)
}

// roleName names a column role as the columns option does.
func roleName(c int8) string {
	switch c {
	case colUser:
		return "user"
	case colItem:
		return "item"
	case colRating:
		return "rating"
	case colTime:
		return "timestamp"
	}
	return "-"
}

// columnsHint suggests the columns option (--columns) for a header whose
// fields have the given roles (colSkip for a name it does not know): the
// order with each missing role in an unknown field, when there are as many
// unknown fields as missing roles; else the general form.
func columnsHint(fields [][]byte, roles []int8, oneUser bool) string {
	var missing []int8
	for _, c := range []int8{colUser, colItem, colRating} {
		if (c != colUser || !oneUser) && !slices.Contains(roles, c) {
			missing = append(missing, c)
		}
	}
	var unknown []string
	cols := slices.Clone(roles)
	for k, c := range roles {
		if c == colSkip {
			unknown = append(unknown, fmt.Sprintf("%d %q", k+1, trimField(fields[k])))
			if len(unknown) <= len(missing) {
				cols[k] = missing[len(unknown)-1]
			}
		}
	}
	if len(unknown) != len(missing) {
		return "give every field's role by position with --columns (user, item, rating, timestamp or - to skip; e.g. --columns user,item,rating,-)"
	}
	var named []string
	for k, c := range cols {
		if roles[k] == colSkip {
			named = append(named, fmt.Sprintf("field %s as the %s", unknown[len(named)], roleName(c)))
		}
	}
	return fmt.Sprintf("read it by position with --columns %s (%s)", columnNames(cols), strings.Join(named, ", "))
}

// columnNames names a column order as the columns option does:
// "user,item,rating".
func columnNames(cols []int8) string {
	names := make([]string, len(cols))
	for k, c := range cols {
		names[k] = roleName(c)
	}
	return strings.Join(names, ",")
}

// firstHeadLine returns the first non-blank line of head, without its line
// end and (on line 1) byte order mark, and its 1-based line number. ok is
// false if head does not hold a whole non-blank line.
func firstHeadLine(head []byte, partial bool) (line []byte, n int, ok bool) {
	for len(head) > 0 {
		n++
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			if partial {
				return nil, 0, false
			}
			line, head = head, nil
		} else {
			line, head = head[:i], head[i+1:]
		}
		line = cleanLine(line, n)
		if !isBlank(line) {
			return line, n, true
		}
	}
	return nil, 0, false
}

// withHeader settles whether the input starts with a header and, if it
// does, how its columns are read. spec holds the delimiter and the columns
// of the options (explicit) or the format's defaults. Without explicit
// columns a header's names choose the columns: user, item and rating must
// be named (HeaderNames), other names are ignored columns, and every line
// must have as many fields as the header. With explicit columns they are
// used, but a header that places a named column elsewhere is an error, so
// a wrong order is not read silently. The first line is a header under
// HeaderYes and, under HeaderAuto, when isHeader says so.
func (l *loader) withHeader(in *input, spec lineSpec, explicit bool) (lineSpec, error) {
	if l.opt.Header == HeaderNo {
		spec.header = headerAbsent
		return spec, nil
	}
	line, n, ok := firstHeadLine(in.head, in.partial)
	if !ok {
		return spec, nil
	}
	fields := spec.split(nil, line, 0)
	if l.opt.Header == HeaderAuto && !isHeader(&spec, fields) {
		spec.header = headerAbsent
		return spec, nil
	}
	spec.header = headerPresent
	hdrErr := func(format string, args ...any) error {
		return &ParseError{File: in.name, Line: n, Err: fmt.Errorf("header %q: "+format+": %w", append(append([]any{line}, args...), ErrFormat)...)}
	}
	roles := make([]int8, len(fields))
	pos := map[int8]int{}
	for k, f := range fields {
		c := headerNames[headerKey(f)]
		roles[k] = c
		if c == colSkip {
			continue
		}
		if j, dup := pos[c]; dup {
			return spec, hdrErr("fields %d (%q) and %d (%q) both name the %s column", j+1, trimField(fields[j]), k+1, trimField(f), roleName(c))
		}
		pos[c] = k
	}
	if explicit {
		for _, c := range []int8{colUser, colItem, colRating, colTime} {
			hp, named := pos[c]
			cp := spec.position(c)
			if named && cp >= 0 && hp != cp {
				return spec, hdrErr("field %d %q is the %s column, but the columns %q put the %s in field %d; drop the columns (--columns) to read the file by its header",
					hp+1, trimField(fields[hp]), roleName(c), l.opt.Columns, roleName(c), cp+1)
			}
		}
		return spec, nil
	}
	for _, c := range []int8{colRating, colUser, colItem} {
		if _, named := pos[c]; !named && (c != colUser || l.opt.User == "") {
			return spec, hdrErr("names no %s column (want one of %s); rename it, or %s",
				roleName(c), strings.Join(HeaderNames()[roleName(c)], ", "), columnsHint(fields, roles, l.opt.User != ""))
		}
	}
	hs := newSpec(spec.delim, roles, true)
	hs.header, hs.fromHeader = headerPresent, true
	return hs, nil
}

// position returns the column of role c, or -1.
func (s *lineSpec) position(c int8) int {
	for k, r := range s.cols {
		if r == c {
			return k
		}
	}
	return -1
}
