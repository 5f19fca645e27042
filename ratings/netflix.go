package ratings

import (
	"bytes"
	"fmt"
)

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
