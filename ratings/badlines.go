package ratings

import (
	"fmt"
	"sort"
)

// example is a skipped-line error with its sort key.
type example struct {
	file int
	err  *ParseError
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
