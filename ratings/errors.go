package ratings

import (
	"errors"
	"strconv"
)

// Sentinel errors returned (wrapped) by the loaders and the Builder; test
// for them with errors.Is.
var (
	// ErrSyntax reports a malformed line or field: a bad number, an empty
	// ID, a wrong number of fields.
	ErrSyntax = errors.New("syntax error")
	// ErrRange reports a rating outside the scale (or not finite), or an ID
	// outside a fixed index space.
	ErrRange = errors.New("value out of range")
	// ErrDuplicate reports a second rating of the same (user, item) pair.
	ErrDuplicate = errors.New("duplicate rating")
	// ErrEmpty reports input without any rating: an empty file, a file with
	// only a header, or a file whose every line was skipped.
	ErrEmpty = errors.New("no ratings")
	// ErrFormat reports an unknown or undetectable format, a folder without
	// a recognizable rating file, or inconsistent load options.
	ErrFormat = errors.New("unrecognized format")
)

// ParseError is a malformed-input error, like encoding/csv.ParseError. Line
// is 1-based and counts every physical line of File (0 when the error is
// about the whole file); Field names the column ("user", "item", "rating",
// "timestamp", "title"), or is empty when the error is about the line.
type ParseError struct {
	File  string
	Line  int
	Field string
	Err   error
}

// Error formats the error as "ratings: FILE:LINE: field FIELD: ERR", leaving
// out the parts that are not set.
func (e *ParseError) Error() string {
	s := "ratings: "
	if e.File != "" {
		s += e.File
		if e.Line > 0 {
			s += ":" + strconv.Itoa(e.Line)
		}
		s += ": "
	} else if e.Line > 0 {
		s += "line " + strconv.Itoa(e.Line) + ": "
	}
	if e.Field != "" {
		s += "field " + e.Field + ": "
	}
	if e.Err == nil {
		return s + "error"
	}
	return s + e.Err.Error()
}

// Unwrap returns the underlying error, which wraps one of the sentinels.
func (e *ParseError) Unwrap() error { return e.Err }
