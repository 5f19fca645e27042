package ratings

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestHeaderLayouts checks that a delimited file with a header is read by
// the header's names, whatever their order, spelling and company. Every
// fixture holds the same three ratings.
func TestHeaderLayouts(t *testing.T) {
	want := []idRating{{"a", "x", 4}, {"a", "y", 2}, {"b", "x", 5}}
	tests := []struct {
		name, file string
		opt        LoadOptions
		format     Format
	}{
		{"reordered columns", "reordered.csv", LoadOptions{}, FormatDelimited},
		{"timestamp before rating", "timestamp.csv", LoadOptions{}, FormatDelimited},
		{"synonyms uid iid stars ts", "synonyms.tsv", LoadOptions{}, FormatDelimited},
		{"quoted Book-Crossing names", "bookcrossing.csv", LoadOptions{}, FormatDelimited},
		{"extra named fields", "extra_columns.csv", LoadOptions{}, FormatDelimited},
		{"MovieLens header reordered", "mlcsv_reordered.csv", LoadOptions{}, FormatMLCSV},
		{"header yes", "timestamp.csv", LoadOptions{Header: HeaderYes}, FormatDelimited},
		{"explicit delimited format", "reordered.csv", LoadOptions{Format: FormatDelimited}, FormatDelimited},
		// Explicit columns that agree with the header are used.
		{"columns agreeing", "timestamp.csv", LoadOptions{Columns: "user,item,timestamp,rating"}, FormatDelimited},
		{"columns agreeing, skipping", "timestamp.csv", LoadOptions{Columns: "user,item,-,rating"}, FormatDelimited},
		// ISO 8601 dates and times in the timestamp column are accepted.
		{"ISO dates", "iso_dates.csv", LoadOptions{}, FormatDelimited},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Load(filepath.Join("testdata", "header", tc.file), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, d, rep)
			if got := idTriples(d); !reflect.DeepEqual(got, want) {
				t.Errorf("ratings = %v, want %v", got, want)
			}
			if rep.Format != tc.format {
				t.Errorf("format = %q, want %q", rep.Format, tc.format)
			}
		})
	}
}

// TestQuotedFieldsWithDelimiter: a quoted field may hold the delimiter
// (a title with a comma) without adding a field.
func TestQuotedFieldsWithDelimiter(t *testing.T) {
	d, rep, err := Load(filepath.Join("testdata", "header", "quoted_title.csv"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, d, rep)
	want := []idRating{{"1", "10", 4}, {"1", "11", 3}, {"2", "10", 5}}
	if got := idTriples(d); !reflect.DeepEqual(got, want) {
		t.Errorf("ratings = %v, want %v", got, want)
	}
	s := lineSpec{delim: ","}
	for line, n := range map[string]int{`a,"b,c",d`: 3, `"a""b",c`: 2, `"a"x,b`: 2, `"open,b`: 2, `"a,b"`: 1, `x,"`: 2} {
		if got := len(s.split(nil, []byte(line), 0)); got != n {
			t.Errorf("split(%q): %d fields, want %d", line, got, n)
		}
	}
}

// TestHeaderErrors checks that a header naming no rating column, a row
// that does not fit the header and columns that contradict the header are
// errors naming file and line.
func TestHeaderErrors(t *testing.T) {
	tests := []struct {
		name, file string
		opt        LoadOptions
		err        error
		line       int
		text       string // in the message
	}{
		{"no rating column", "no_rating.csv", LoadOptions{}, ErrFormat, 1, "names no rating column"},
		{"row longer than header", "long_row.csv", LoadOptions{}, ErrSyntax, 3, "more fields than the header's 3"},
		{"row shorter than header", "short_row.csv", LoadOptions{}, ErrSyntax, 3, "3 fields, the header has 4"},
		{"column named twice", "dup_column.csv", LoadOptions{}, ErrFormat, 1, "both name the user column"},
		{"columns contradict header", "timestamp.csv", LoadOptions{Columns: "user,item,rating"}, ErrFormat, 1, `put the rating in field 3`},
		{"unknown name suggests columns", "unknown_rating_name.csv", LoadOptions{}, ErrFormat, 1,
			`--columns user,item,rating (field 3 "overall" as the rating)`},
		{"unknown name value", "no_rating.csv", LoadOptions{}, ErrFormat, 1, `--columns user,item,rating (field 3 "value" as the rating)`},
		{"more unknown names than missing roles", "unknown_extra.csv", LoadOptions{}, ErrFormat, 1, `give every field's role by position with --columns`},
		{"a date that is not ISO", "bad_date.csv", LoadOptions{}, ErrSyntax, 3, `field timestamp: value "03/01/2024" is neither a number (Unix time) nor an ISO 8601 date`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "header", tc.file)
			d, _, err := Load(path, tc.opt)
			if err == nil {
				t.Fatalf("no error; loaded %d ratings", d.Len())
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != path || pe.Line != tc.line {
				t.Errorf("err = %v, want a ParseError at %s:%d", err, path, tc.line)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v, want it to say %q", err, tc.text)
			}
		})
	}
}

// TestOneUserFile: with LoadOptions.User, a file of one user's ratings
// without a user column (a header like movieId,rating, or item,rating
// lines) is read as that user's; a file with a user column is read as
// usual; without User such a file is an error that says what is missing.
func TestOneUserFile(t *testing.T) {
	want := []idRating{{"me", "260", 5}, {"me", "1196", 4.5}}
	tests := []struct {
		name, file string
		opt        LoadOptions
		err        string // a substring of the error; "" for none
	}{
		{"header item,rating", "item_rating.csv", LoadOptions{User: "me"}, ""},
		{"no header, two fields", "noheader.tsv", LoadOptions{User: "me"}, ""},
		{"header with ISO dates", "iso_dates.csv", LoadOptions{User: "me"}, ""},
		{"header with a user column", "with_user.csv", LoadOptions{User: "someone else"}, ""},
		{"columns item,rating", "noheader.tsv", LoadOptions{User: "me", Columns: "item,rating"}, ""},
		{"no User: header", "item_rating.csv", LoadOptions{}, `have 2 fields (delimiter ","), want at least 3 (user,item,rating)`},
		{"no User: two fields", "noheader.tsv", LoadOptions{}, `have 2 fields (delimiter "\t"), want at least 3 (user,item,rating)`},
		{"no User: one field", "one_field.txt", LoadOptions{}, "cannot detect the delimiter"},
		{"no User: columns", "noheader.tsv", LoadOptions{Columns: "item,rating"}, "need user, item and rating"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := Load(filepath.Join("testdata", "oneuser", tc.file), tc.opt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrFormat) {
					t.Fatalf("err = %v, want an ErrFormat saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := idTriples(d); !reflect.DeepEqual(got, want) {
				t.Errorf("ratings = %v, want %v", got, want)
			}
		})
	}
}
