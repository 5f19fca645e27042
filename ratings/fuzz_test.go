package ratings

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// addFixtureSeeds adds the fixture files to the seed corpus of f, each
// followed by the extra seed arguments.
func addFixtureSeeds(f *testing.F, files []string, extra ...any) {
	f.Helper()
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]any{data}, extra...)...)
	}
}

// sentinels are the errors every loader error must wrap.
var sentinels = []error{ErrSyntax, ErrRange, ErrDuplicate, ErrEmpty, ErrFormat}

// checkRead reads data with opt and checks the properties every read must
// have: an error wraps a sentinel and names the input; a dataset is valid,
// non-empty, free of duplicate pairs and empty IDs, accounts for every data
// line, and survives a round trip through TSV.
func checkRead(t *testing.T, data []byte, opt LoadOptions) {
	const name = "fuzz-input"
	d, rep, err := Read(bytes.NewReader(data), name, opt)
	if err != nil {
		if d != nil || rep != nil {
			t.Fatalf("dataset or report returned with error %v", err)
		}
		ok := false
		for _, s := range sentinels {
			ok = ok || errors.Is(err, s)
		}
		if !ok {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		var pe *ParseError
		if errors.As(err, &pe) && pe.File != name {
			t.Fatalf("ParseError names %q, want %q: %v", pe.File, name, err)
		}
		return
	}
	if d.Len() == 0 {
		t.Fatal("success without ratings")
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for k, v := range d.Values {
		if !d.Scale.Contains(v) || !finite(v) {
			t.Fatalf("rating %d = %g is off the scale %v", k, v, d.Scale)
		}
	}
	if opt.Scale != nil && d.Scale != *opt.Scale {
		t.Fatalf("Scale = %v, want the given %v", d.Scale, *opt.Scale)
	}
	if d.Len()+rep.Skipped != rep.Lines {
		t.Fatalf("Len %d + Skipped %d != Lines %d", d.Len(), rep.Skipped, rep.Lines)
	}
	if !opt.SkipBad && rep.Skipped != 0 {
		t.Fatalf("Skipped = %d without SkipBad", rep.Skipped)
	}
	if len(rep.Examples) != min(rep.Skipped, maxExamples) {
		t.Fatalf("%d examples for %d skipped lines", len(rep.Examples), rep.Skipped)
	}
	for _, ids := range [][]string{d.UserIDs, d.ItemIDs} {
		for _, id := range ids {
			if id == "" {
				t.Fatal("empty ID")
			}
		}
	}
	if dups := findDuplicates(d.Users, d.Items, d.NumUsers(), d.NumItems()); len(dups) > 0 {
		t.Fatalf("duplicate pairs kept: %v", dups)
	}
	pu, pi := d.Counts()
	for _, c := range append(pu, pi...) {
		if c == 0 {
			t.Fatal("an ID without ratings") // Read builds a fresh index space
		}
	}
	roundTrip(t, d)
}

// tsvSafe reports whether an ID is written and read back unchanged by a
// tab-separated file: no tab or line break, no surrounding blanks or
// quotes, no byte order mark, nothing that reads as a header.
func tsvSafe(id string) bool {
	if strings.ContainsAny(id, "\t\n\r") || strings.HasPrefix(id, "\ufeff") {
		return false
	}
	if t := string(trimField([]byte(id))); t != id {
		return false
	}
	return true
}

// writeTSV writes d as "user TAB item TAB rating" lines in original IDs.
func writeTSV(d *Dataset) []byte {
	var b []byte
	for k, v := range d.Values {
		b = append(b, d.UserIDs[d.Users[k]]...)
		b = append(b, '\t')
		b = append(b, d.ItemIDs[d.Items[k]]...)
		b = append(b, '\t')
		b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
		b = append(b, '\n')
	}
	return b
}

// roundTrip writes d as TSV, reads it back on the same scale and checks
// that nothing changed, when every ID is TSV-safe.
func roundTrip(t *testing.T, d *Dataset) {
	for _, ids := range [][]string{d.UserIDs, d.ItemIDs} {
		for _, id := range ids {
			if !tsvSafe(id) {
				return
			}
		}
	}
	scale := d.Scale
	opt := LoadOptions{Format: FormatDelimited, Delimiter: "\t", Header: HeaderNo, Scale: &scale}
	back, _, err := Read(bytes.NewReader(writeTSV(d)), d.Name, opt)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, writeTSV(d))
	}
	back.ItemTitles = d.ItemTitles
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip changed the dataset:\n got %+v\nwant %+v", back, d)
	}
}

var (
	seedsML100K    = []string{"ml100k/u.data", "ml100k/u1.base", "bad/rating_syntax.data", "bad/dup.data", "bad/mixed.data", "bad/fields.data"}
	seedsML1M      = []string{"ml1m/ratings.dat", "ml1m-latin1/ratings.dat", "bad/range.dat", "bad/timestamp.dat"}
	seedsMLCSV     = []string{"mlcsv/ratings.csv", "bad/header_only.csv", "bad/empty.csv"}
	seedsNetflix   = []string{"netflix/training_set/mv_0000001.txt", "netflix/training_set/mv_0000002.txt", "netflix-combined/combined_data_1.txt", "bad/orphan.txt"}
	seedsDelimited = []string{"delimited/item_user.tsv", "delimited/semicolon.csv", "dense/ratings_uir_dense.tsv", "ambiguous/a.csv", "bad/nan.tsv", "bad/empty_id.csv"}
)

// fuzzFormat fuzzes one fixed format, with and without SkipBad, in each
// header mode.
func fuzzFormat(f *testing.F, format Format, seeds []string) {
	addFixtureSeeds(f, seeds, false, uint8(HeaderAuto))
	addFixtureSeeds(f, seeds[:1], true, uint8(HeaderNo))
	f.Fuzz(func(t *testing.T, data []byte, skipBad bool, header uint8) {
		opt := LoadOptions{Format: format, SkipBad: skipBad, Header: HeaderMode(header % 3)}
		checkRead(t, data, opt)
		if format == FormatNetflix || opt.Header != HeaderNo || bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			return
		}
		// Without a header every non-blank line is a rating or an error.
		if _, rep, err := Read(bytes.NewReader(data), "fuzz-input", opt); err == nil && rep.Lines != nonBlankLines(data) {
			t.Fatalf("Lines = %d, want the %d non-blank lines", rep.Lines, nonBlankLines(data))
		}
	})
}

// nonBlankLines counts the lines of data that hold more than blanks (and
// a leading byte order mark).
func nonBlankLines(data []byte) int {
	n := 0
	for k, line := range bytes.Split(data, []byte("\n")) {
		line = trimLine(line)
		if k == 0 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if !isBlank(line) {
			n++
		}
	}
	return n
}

func FuzzML100K(f *testing.F)  { fuzzFormat(f, FormatML100K, seedsML100K) }
func FuzzML1M(f *testing.F)    { fuzzFormat(f, FormatML1M, seedsML1M) }
func FuzzMLCSV(f *testing.F)   { fuzzFormat(f, FormatMLCSV, seedsMLCSV) }
func FuzzNetflix(f *testing.F) { fuzzFormat(f, FormatNetflix, seedsNetflix) }

// FuzzDelimited fuzzes the delimited reader with its options: delimiter,
// column order, header mode, scale (used when hasScale) and SkipBad.
func FuzzDelimited(f *testing.F) {
	addFixtureSeeds(f, seedsDelimited, "", "", uint8(0), false, float32(0), float32(0), float32(0), false)
	addFixtureSeeds(f, []string{"delimited/item_user.tsv"}, "\t", "item,user,rating", uint8(HeaderNo), true, float32(1), float32(5), float32(1), false)
	addFixtureSeeds(f, []string{"delimited/semicolon.csv"}, ";", "user,item,rating", uint8(HeaderYes), true, float32(0), float32(10), float32(0.5), true)
	addFixtureSeeds(f, []string{"ml100k/u.data"}, " ", "user,item,rating,timestamp", uint8(HeaderAuto), false, float32(0), float32(0), float32(0), true)
	addFixtureSeeds(f, []string{"ml1m/ratings.dat"}, "::", "-,item,rating", uint8(HeaderAuto), false, float32(0), float32(0), float32(0), false)
	f.Fuzz(func(t *testing.T, data []byte, delim, columns string, header uint8, hasScale bool, lo, hi, step float32, skipBad bool) {
		opt := LoadOptions{
			Format:    FormatDelimited,
			Delimiter: delim,
			Columns:   columns,
			Header:    HeaderMode(header % 4), // 3 is invalid: must be an error
			SkipBad:   skipBad,
		}
		if hasScale {
			opt.Scale = &Scale{Min: lo, Max: hi, Step: step}
		}
		checkRead(t, data, opt)
	})
}

// FuzzRead fuzzes the detecting path: the format, delimiter and header are
// all guessed from the content.
func FuzzRead(f *testing.F) {
	var all []string
	for _, s := range [][]string{seedsML100K, seedsML1M, seedsMLCSV, seedsNetflix, seedsDelimited} {
		all = append(all, s...)
	}
	addFixtureSeeds(f, all, false)
	addFixtureSeeds(f, []string{"gz/u.data.gz", "gz/semicolon.txt"}, false)
	addFixtureSeeds(f, []string{"bad/mixed.data"}, true)
	f.Fuzz(func(t *testing.T, data []byte, skipBad bool) {
		checkRead(t, data, LoadOptions{SkipBad: skipBad})
	})
}
