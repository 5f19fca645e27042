package ratings

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// idRating is one rating in original IDs.
type idRating struct {
	user, item string
	value      float32
}

// idTriples returns the ratings of d in original IDs, in dataset order.
func idTriples(d *Dataset) []idRating {
	out := make([]idRating, d.Len())
	for k := range d.Values {
		out[k] = idRating{d.UserIDs[d.Users[k]], d.ItemIDs[d.Items[k]], d.Values[k]}
	}
	return out
}

// titlesByID returns the item titles of d keyed by item ID, or nil.
func titlesByID(d *Dataset) map[string]string {
	if d.ItemTitles == nil {
		return nil
	}
	m := make(map[string]string, len(d.ItemIDs))
	for i, id := range d.ItemIDs {
		m[id] = d.ItemTitles[i]
	}
	return m
}

// checkLoaded checks the invariants every successful load keeps: a valid
// dataset, and every data line either a rating or counted as skipped.
func checkLoaded(t *testing.T, d *Dataset, rep *LoadReport) {
	t.Helper()
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if d.Len()+rep.Skipped != rep.Lines {
		t.Errorf("Len %d + Skipped %d != Lines %d: ratings lost", d.Len(), rep.Skipped, rep.Lines)
	}
	if len(rep.Examples) > min(rep.Skipped, maxExamples) {
		t.Errorf("%d examples for %d skipped lines", len(rep.Examples), rep.Skipped)
	}
}

func TestLoadFixtures(t *testing.T) {
	cuckoo := "One Flew Over the Cuckoo\u2019s Nest (1975)"
	tests := []struct {
		name   string
		path   string
		opt    LoadOptions
		format Format
		report string // LoadReport.Path, relative to testdata
		dsName string
		scale  Scale
		users  []string
		items  []string
		rats   []idRating
		titles map[string]string // nil: no titles
	}{
		{
			name: "ml100k file", path: "ml100k/u.data", format: FormatML100K, report: "ml100k/u.data",
			dsName: "ml100k", scale: Stars5,
			users: []string{"1", "2", "3"}, items: []string{"10", "20", "30"},
			rats:   []idRating{{"1", "10", 3}, {"2", "10", 4}, {"1", "20", 5}, {"3", "30", 1}, {"2", "20", 2}, {"3", "10", 5}},
			titles: map[string]string{"10": "Café Society (1995)", "20": "GoldenEye (1995)", "30": "Señor Spielbergo (1999)"},
		},
		{
			name: "ml100k folder", path: "ml100k", format: FormatML100K, report: "ml100k/u.data",
			dsName: "ml100k", scale: Stars5,
			users: []string{"1", "2", "3"}, items: []string{"10", "20", "30"},
			rats:   []idRating{{"1", "10", 3}, {"2", "10", 4}, {"1", "20", 5}, {"3", "30", 1}, {"2", "20", 2}, {"3", "10", 5}},
			titles: map[string]string{"10": "Café Society (1995)", "20": "GoldenEye (1995)", "30": "Señor Spielbergo (1999)"},
		},
		{
			name: "ml100k no titles", path: "ml100k", opt: LoadOptions{NoTitles: true, Name: "x"},
			format: FormatML100K, report: "ml100k/u.data", dsName: "x", scale: Stars5,
			users: []string{"1", "2", "3"}, items: []string{"10", "20", "30"},
			rats: []idRating{{"1", "10", 3}, {"2", "10", 4}, {"1", "20", 5}, {"3", "30", 1}, {"2", "20", 2}, {"3", "10", 5}},
		},
		{
			name: "ml100k gzip folder", path: "gz", format: FormatML100K, report: "gz/u.data.gz",
			dsName: "gz", scale: Stars5,
			users: []string{"1", "2", "3"}, items: []string{"10", "20", "30"},
			rats:   []idRating{{"1", "10", 3}, {"2", "10", 4}, {"1", "20", 5}, {"3", "30", 1}, {"2", "20", 2}, {"3", "10", 5}},
			titles: map[string]string{"10": "Café Society (1995)", "20": "GoldenEye (1995)", "30": "Señor Spielbergo (1999)"},
		},
		{
			name: "ml100k as delimited", path: "ml100k/u.data", opt: LoadOptions{Format: FormatDelimited},
			format: FormatDelimited, report: "ml100k/u.data", dsName: "ml100k", scale: Scale{Min: 1, Max: 5, Step: 1, Inferred: true},
			users: []string{"1", "2", "3"}, items: []string{"10", "20", "30"},
			rats: []idRating{{"1", "10", 3}, {"2", "10", 4}, {"1", "20", 5}, {"3", "30", 1}, {"2", "20", 2}, {"3", "10", 5}},
		},
		{
			name: "ml1m half stars", path: "ml1m", format: FormatML1M, report: "ml1m/ratings.dat",
			dsName: "ml1m", scale: HalfStars5,
			users: []string{"1", "2"}, items: []string{"1193", "661", "3408"},
			rats:   []idRating{{"1", "1193", 5}, {"1", "661", 3}, {"2", "1193", 4}, {"2", "3408", 2.5}},
			titles: map[string]string{"1193": cuckoo, "661": "James and the Giant Peach (1996)", "3408": "Erin Brockovich (2000)"},
		},
		{
			name: "ml1m latin1 titles", path: "ml1m-latin1/ratings.dat", format: FormatML1M, report: "ml1m-latin1/ratings.dat",
			dsName: "ml1m-latin1", scale: Stars5,
			users: []string{"1", "2"}, items: []string{"73", "2"},
			rats:   []idRating{{"1", "73", 4}, {"2", "73", 5}, {"2", "2", 3}},
			titles: map[string]string{"73": "Misérables, Les (1995)", "2": "Jumanji (1995)"},
		},
		{
			name: "mlcsv", path: "mlcsv", format: FormatMLCSV, report: "mlcsv/ratings.csv",
			dsName: "mlcsv", scale: HalfStars5,
			users: []string{"1", "2"}, items: []string{"1", "3"},
			rats:   []idRating{{"1", "1", 4}, {"1", "3", 0.5}, {"2", "1", 3.5}},
			titles: map[string]string{"1": "Toy Story (1995)", "3": "American President, The (1995)"},
		},
		{
			name: "netflix training_set", path: "netflix", format: FormatNetflix, report: "netflix",
			dsName: "netflix", scale: Stars5,
			users: []string{"1488844", "822109", "2059652"}, items: []string{"1", "2"},
			rats:   []idRating{{"1488844", "1", 3}, {"822109", "1", 5}, {"2059652", "2", 4}, {"1488844", "2", 4}},
			titles: map[string]string{"1": "Dinosaur Planet", "2": "Isle of Man TT 2004 Review, Part 1"},
		},
		{
			name: "netflix training_set itself", path: "netflix/training_set", format: FormatNetflix, report: "netflix/training_set",
			dsName: "training_set", scale: Stars5,
			users: []string{"1488844", "822109", "2059652"}, items: []string{"1", "2"},
			rats:   []idRating{{"1488844", "1", 3}, {"822109", "1", 5}, {"2059652", "2", 4}, {"1488844", "2", 4}},
			titles: map[string]string{"1": "Dinosaur Planet", "2": "Isle of Man TT 2004 Review, Part 1"},
		},
		{
			name: "netflix one movie file", path: "netflix/training_set/mv_0000002.txt", format: FormatNetflix,
			report: "netflix/training_set/mv_0000002.txt", dsName: "mv_0000002", scale: Stars5,
			users: []string{"2059652", "1488844"}, items: []string{"2"},
			rats:   []idRating{{"2059652", "2", 4}, {"1488844", "2", 4}},
			titles: map[string]string{"2": "Isle of Man TT 2004 Review, Part 1"},
		},
		{
			name: "netflix combined CRLF", path: "netflix-combined", format: FormatNetflix,
			report: "netflix-combined/combined_data_1.txt", dsName: "netflix-combined", scale: Stars5,
			users: []string{"1488844", "822109", "2059652"}, items: []string{"1", "2", "30"},
			rats: []idRating{{"1488844", "1", 3}, {"822109", "1", 5}, {"2059652", "2", 4}, {"1488844", "2", 4}, {"822109", "30", 1}},
		},
		{
			name: "dense with item map", path: "dense", format: FormatDelimited, report: "dense/ratings_uir_dense.tsv",
			dsName: "dense", scale: Scale{Min: 3, Max: 5, Step: 1, Inferred: true},
			users: []string{"1", "2"}, items: []string{"1", "2", "3"},
			rats:   []idRating{{"1", "1", 5}, {"2", "2", 3}, {"1", "3", 4}},
			titles: map[string]string{"1": cuckoo, "2": "", "3": "Erin Brockovich (2000)"},
		},
		{
			name: "delimited item,user order", path: "delimited/item_user.tsv", opt: LoadOptions{Columns: "item,user,rating"},
			format: FormatDelimited, report: "delimited/item_user.tsv", dsName: "item_user", scale: Scale{Min: 3, Max: 5, Step: 1, Inferred: true},
			users: []string{"1", "2"}, items: []string{"10", "20"},
			rats: []idRating{{"1", "10", 4}, {"1", "20", 3}, {"2", "10", 5}},
		},
		{
			name: "delimited default order", path: "delimited/item_user.tsv",
			format: FormatDelimited, report: "delimited/item_user.tsv", dsName: "item_user", scale: Scale{Min: 3, Max: 5, Step: 1, Inferred: true},
			users: []string{"10", "20"}, items: []string{"1", "2"},
			rats: []idRating{{"10", "1", 4}, {"20", "1", 3}, {"10", "2", 5}},
		},
		{
			name: "delimited given scale", path: "delimited/item_user.tsv",
			opt:    LoadOptions{Columns: "item,user,rating", Delimiter: "\t", Header: HeaderNo, Scale: &Stars5},
			format: FormatDelimited, report: "delimited/item_user.tsv", dsName: "item_user", scale: Stars5,
			users: []string{"1", "2"}, items: []string{"10", "20"},
			rats: []idRating{{"1", "10", 4}, {"1", "20", 3}, {"2", "10", 5}},
		},
		{
			name: "semicolon header auto", path: "delimited/semicolon.csv",
			format: FormatDelimited, report: "delimited/semicolon.csv", dsName: "semicolon", scale: Scale{Min: 3, Max: 10, Step: 1, Inferred: true},
			users: []string{"u1", "u2"}, items: []string{"i1", "i2"},
			rats: []idRating{{"u1", "i1", 7}, {"u2", "i1", 3}, {"u1", "i2", 10}},
		},
		{
			name: "semicolon header yes, scale given", path: "delimited/semicolon.csv",
			opt:    LoadOptions{Delimiter: ";", Header: HeaderYes, Scale: &Scale{Min: 0, Max: 10, Step: 0.5}},
			format: FormatDelimited, report: "delimited/semicolon.csv", dsName: "semicolon", scale: Scale{Min: 0, Max: 10, Step: 0.5},
			users: []string{"u1", "u2"}, items: []string{"i1", "i2"},
			rats: []idRating{{"u1", "i1", 7}, {"u2", "i1", 3}, {"u1", "i2", 10}},
		},
		{
			name: "gzip under a .txt name", path: "gz/semicolon.txt",
			format: FormatDelimited, report: "gz/semicolon.txt", dsName: "semicolon", scale: Scale{Min: 3, Max: 10, Step: 1, Inferred: true},
			users: []string{"u1", "u2"}, items: []string{"i1", "i2"},
			rats: []idRating{{"u1", "i1", 7}, {"u2", "i1", 3}, {"u1", "i2", 10}},
		},
		{
			name: "comma file named .tsv", path: "ambiguous/b.tsv",
			format: FormatDelimited, report: "ambiguous/b.tsv", dsName: "b", scale: Scale{Min: 4, Max: 4, Step: 1, Inferred: true},
			users: []string{"1"}, items: []string{"2"},
			rats: []idRating{{"1", "2", 4}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Load(filepath.Join("testdata", tc.path), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, d, rep)
			if rep.Format != tc.format {
				t.Errorf("Format = %q, want %q", rep.Format, tc.format)
			}
			if want := filepath.Join("testdata", tc.report); rep.Path != want {
				t.Errorf("report Path = %q, want %q", rep.Path, want)
			}
			if rep.Skipped != 0 || len(rep.Examples) != 0 {
				t.Errorf("Skipped = %d, Examples = %v, want none", rep.Skipped, rep.Examples)
			}
			if d.Name != tc.dsName {
				t.Errorf("Name = %q, want %q", d.Name, tc.dsName)
			}
			if d.Scale != tc.scale {
				t.Errorf("Scale = %v, want %v", d.Scale, tc.scale)
			}
			if !reflect.DeepEqual(d.UserIDs, tc.users) {
				t.Errorf("UserIDs = %q, want %q", d.UserIDs, tc.users)
			}
			if !reflect.DeepEqual(d.ItemIDs, tc.items) {
				t.Errorf("ItemIDs = %q, want %q", d.ItemIDs, tc.items)
			}
			if got := idTriples(d); !reflect.DeepEqual(got, tc.rats) {
				t.Errorf("ratings = %v, want %v", got, tc.rats)
			}
			if got := titlesByID(d); !reflect.DeepEqual(got, tc.titles) {
				t.Errorf("titles = %q, want %q", got, tc.titles)
			}
		})
	}
}

// TestLoadTitlesUTF8 checks that ISO-8859-1 bytes in title files become the
// right runes, and that UTF-8 title files are kept as they are.
func TestLoadTitlesUTF8(t *testing.T) {
	raw, err := os.ReadFile("testdata/ml1m-latin1/movies.dat")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("Mis\xe9rables")) {
		t.Fatal("fixture ml1m-latin1/movies.dat lost its ISO-8859-1 byte 0xE9")
	}
	for _, path := range []string{"ml100k", "gz", "ml1m", "ml1m-latin1", "mlcsv", "netflix", "dense"} {
		d, _, err := Load(filepath.Join("testdata", path), LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.ItemTitles == nil {
			t.Fatalf("%s: no titles", path)
		}
		for i, title := range d.ItemTitles {
			if !utf8Valid(title) || strings.ContainsRune(title, '\uFFFD') || strings.ContainsAny(title, "\u0080\u0099") {
				t.Errorf("%s: item %s: title %q is not clean UTF-8", path, d.ItemIDs[i], title)
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestFormatDetection checks detection from content alone: the files are
// read through Read under a neutral name, so no file name can help.
func TestFormatDetection(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Format
	}{
		{"ml100k", "1\t10\t3\t881250949\n2\t10\t4\t891717742\n", FormatML100K},
		{"ml100k CRLF", "1\t10\t3\t881250949\r\n2\t10\t4\t891717742\r\n", FormatML100K},
		{"ml1m", "1::1193::5::978300760\n", FormatML1M},
		{"ml10m half", "1::122::2.5::838985046\n", FormatML1M},
		{"mlcsv", "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n", FormatMLCSV},
		{"mlcsv BOM", "\xef\xbb\xbfuserId,movieId,rating,timestamp\n1,1,4.0,964982703\n", FormatDelimited},
		{"netflix", "1:\n1488844,3,2005-09-06\n", FormatNetflix},
		{"netflix CRLF", "1:\r\n1488844,3,2005-09-06\r\n", FormatNetflix},
		{"tsv 3 columns", "1\t10\t3\n", FormatDelimited},
		{"tsv 4 columns, non-numeric", "a\tb\t3\t881250949\n", FormatDelimited},
		{"csv", "1,10,3\n", FormatDelimited},
		{"leading blank lines", "\n\n1\t10\t3\t881250949\n", FormatML100K},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Read(strings.NewReader(tc.data), "input", LoadOptions{})
			if tc.name == "mlcsv BOM" {
				// The BOM hides the MovieLens header from detection; the
				// delimited reader still strips it and skips the header.
				if err != nil {
					t.Fatal(err)
				}
				if rep.Format != tc.want || d.Len() != 1 || d.UserIDs[0] != "1" {
					t.Errorf("format %q, %d ratings, users %q", rep.Format, d.Len(), d.UserIDs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, d, rep)
			if rep.Format != tc.want {
				t.Errorf("Format = %q, want %q", rep.Format, tc.want)
			}
			if d.Len() == 0 {
				t.Error("no ratings")
			}
		})
	}
}

// TestFormatOverride checks that LoadOptions.Format wins over detection,
// and that Delimiter or Columns select the delimited format.
func TestFormatOverride(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		opt     LoadOptions
		format  Format
		wantErr error
	}{
		{"u.data as ml100k", "ml100k/u.data", LoadOptions{Format: FormatML100K}, FormatML100K, nil},
		{"u.data as delimited", "ml100k/u.data", LoadOptions{Format: FormatDelimited}, FormatDelimited, nil},
		{"u.data with Delimiter", "ml100k/u.data", LoadOptions{Delimiter: "\t"}, FormatDelimited, nil},
		{"u.data with Columns", "ml100k/u.data", LoadOptions{Columns: "user,item,rating,timestamp"}, FormatDelimited, nil},
		{"u.data as ml1m", "ml100k/u.data", LoadOptions{Format: FormatML1M}, "", ErrSyntax},
		{"ratings.dat as mlcsv", "ml1m/ratings.dat", LoadOptions{Format: FormatMLCSV}, "", ErrSyntax},
		{"folder with forced format", "ml100k", LoadOptions{Format: FormatML1M}, "", ErrSyntax},
		{"netflix as delimited", "netflix/training_set/mv_0000001.txt", LoadOptions{Format: FormatDelimited}, "", ErrFormat},
		{"Delimiter with ml100k", "ml100k/u.data", LoadOptions{Format: FormatML100K, Delimiter: "\t"}, "", ErrFormat},
		{"unknown format", "ml100k/u.data", LoadOptions{Format: "parquet"}, "", ErrFormat},
		{"bad columns", "ml100k/u.data", LoadOptions{Columns: "user,item"}, "", ErrFormat},
		{"repeated column", "ml100k/u.data", LoadOptions{Columns: "user,item,rating,user"}, "", ErrFormat},
		{"bad scale", "ml100k/u.data", LoadOptions{Scale: &Scale{Min: 5, Max: 1, Step: 1}}, "", ErrFormat},
		{"bad header mode", "ml100k/u.data", LoadOptions{Header: 7}, "", ErrFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Load(filepath.Join("testdata", tc.path), tc.opt)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, d, rep)
			if rep.Format != tc.format {
				t.Errorf("Format = %q, want %q", rep.Format, tc.format)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in   string
		want Format
		ok   bool
	}{
		{"", FormatAuto, true}, {"auto", FormatAuto, true}, {"ML-100K", FormatML100K, true},
		{"ml-1m", FormatML1M, true}, {"ML10M", FormatML1M, true}, {"ml-25m", FormatMLCSV, true},
		{"ml-latest-small", FormatMLCSV, true}, {" Netflix ", FormatNetflix, true},
		{"tsv", FormatDelimited, true}, {"csv", FormatDelimited, true}, {"parquet", FormatAuto, false},
	}
	for _, tc := range tests {
		got, err := ParseFormat(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Errorf("ParseFormat(%q): %v does not wrap ErrFormat", tc.in, err)
		}
	}
}

func TestLoadFolders(t *testing.T) {
	_, _, err := Load("testdata/ambiguous", LoadOptions{})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "a.csv") || !strings.Contains(err.Error(), "b.tsv") {
		t.Errorf("ambiguous folder: err = %v, want ErrFormat naming a.csv and b.tsv", err)
	}
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "README"), []byte("nothing here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(empty, LoadOptions{}); !errors.Is(err, ErrFormat) {
		t.Errorf("folder without rating file: err = %v, want ErrFormat", err)
	}
	if _, _, err := Load(filepath.Join(empty, "missing.tsv"), LoadOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
	// A folder with one data file among metadata files picks that file.
	one := t.TempDir()
	writeFile(t, filepath.Join(one, "movies.csv"), "movieId,title,genres\n1,A,B\n")
	writeFile(t, filepath.Join(one, "scores.tsv"), "u\ti\t2\nv\ti\t4\n")
	d, rep, err := Load(one, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Path != filepath.Join(one, "scores.tsv") || d.Len() != 2 || d.Name != filepath.Base(one) {
		t.Errorf("single candidate: path %q, %d ratings, name %q", rep.Path, d.Len(), d.Name)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadGzip checks that Read undoes gzip and reads the same ratings.
func TestReadGzip(t *testing.T) {
	plain, err := os.ReadFile("testdata/ml100k/u.data")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(plain)
	zw.Close()
	d1, _, err := Read(bytes.NewReader(plain), "u.data", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d2, rep, err := Read(&buf, "u.data.gz", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Format != FormatML100K {
		t.Errorf("gzip Format = %q", rep.Format)
	}
	d1.Name, d2.Name = "", ""
	if !reflect.DeepEqual(d1, d2) {
		t.Errorf("gzip read differs:\n%+v\n%+v", d1, d2)
	}
	// A truncated gzip stream is an error, not a short dataset.
	var trunc bytes.Buffer
	zw = gzip.NewWriter(&trunc)
	for k := 0; k < 2000; k++ {
		fmt.Fprintf(zw, "%d\t%d\t%d\t0\n", k, k%7, 1+k%5)
	}
	zw.Close()
	_, _, err = Read(bytes.NewReader(trunc.Bytes()[:trunc.Len()/2]), "cut.gz", LoadOptions{})
	var pe *ParseError
	if !errors.Is(err, ErrFormat) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &pe) || pe.File != "cut.gz" {
		t.Errorf("truncated gzip: err = %v, want ErrFormat and io.ErrUnexpectedEOF naming cut.gz", err)
	}
	// A corrupt checksum too.
	bad := append([]byte(nil), trunc.Bytes()...)
	bad[len(bad)-6] ^= 0xff
	if _, _, err := Read(bytes.NewReader(bad), "crc.gz", LoadOptions{}); !errors.Is(err, ErrFormat) {
		t.Errorf("bad gzip checksum: err = %v, want ErrFormat", err)
	}
}

// TestLoadErrors checks each kind of bad input: the sentinel, the
// ParseError fields, and that the message names file and line.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		file  string
		opt   LoadOptions
		err   error
		line  int
		field string
		text  string // in the message
	}{
		{"rating_syntax.data", LoadOptions{}, ErrSyntax, 6, "rating", `"x"`},
		{"rating_syntax.data", LoadOptions{Format: FormatML100K}, ErrSyntax, 6, "rating", `"x"`},
		{"fields.data", LoadOptions{Format: FormatML100K}, ErrSyntax, 2, "", "3 fields, want 4"},
		{"range.dat", LoadOptions{}, ErrRange, 3, "rating", `"6"`},
		{"range.dat", LoadOptions{Scale: &Scale{Min: 1, Max: 10, Step: 1}}, nil, 0, "", ""},
		{"dup.data", LoadOptions{}, ErrDuplicate, 4, "", "first at line 2"},
		{"empty.csv", LoadOptions{}, ErrEmpty, 0, "", ""},
		{"empty.csv", LoadOptions{Format: FormatML1M}, ErrEmpty, 0, "", ""},
		{"header_only.csv", LoadOptions{}, ErrEmpty, 0, "", ""},
		{"orphan.txt", LoadOptions{Format: FormatNetflix}, ErrSyntax, 1, "item", "before any"},
		{"timestamp.dat", LoadOptions{}, ErrSyntax, 2, "timestamp", `"soon"`},
		{"nan.tsv", LoadOptions{}, ErrRange, 2, "rating", "not finite"},
		{"empty_id.csv", LoadOptions{}, ErrSyntax, 2, "user", "empty ID"},
		{"mixed.data", LoadOptions{Format: FormatML100K}, ErrRange, 3, "rating", `"9"`},
		{"mixed.data", LoadOptions{Format: FormatML100K, Scale: &Scale{Min: 1, Max: 10, Step: 1}}, ErrSyntax, 5, "rating", `"five"`},
	}
	for _, tc := range tests {
		name := tc.file
		if tc.opt != (LoadOptions{}) {
			name += "/opts"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "bad", tc.file)
			d, rep, err := Load(path, tc.opt)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				checkLoaded(t, d, rep)
				return
			}
			if err == nil {
				t.Fatalf("no error; loaded %d ratings", d.Len())
			}
			if d != nil || rep != nil {
				t.Error("dataset or report returned with an error")
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %T %v, want *ParseError", err, err)
			}
			if pe.File != path || pe.Line != tc.line || pe.Field != tc.field {
				t.Errorf("ParseError at %s:%d field %q, want %s:%d field %q", pe.File, pe.Line, pe.Field, path, tc.line, tc.field)
			}
			msg := err.Error()
			want := path
			if tc.line > 0 {
				want += ":" + strconv.Itoa(tc.line)
			}
			if !strings.Contains(msg, want) || !strings.Contains(msg, tc.text) {
				t.Errorf("message %q does not contain %q and %q", msg, want, tc.text)
			}
			if tc.field != "" && !strings.Contains(msg, "field "+tc.field) {
				t.Errorf("message %q does not name field %q", msg, tc.field)
			}
		})
	}
}

// TestReadErrorsNameInput checks that Read names its input in errors.
func TestReadErrorsNameInput(t *testing.T) {
	_, _, err := Read(strings.NewReader("1\t10\t3\t1\n1\t10\t4\t2\n"), "stdin", LoadOptions{})
	var pe *ParseError
	if !errors.Is(err, ErrDuplicate) || !errors.As(err, &pe) || pe.File != "stdin" || pe.Line != 2 {
		t.Errorf("err = %v, want ErrDuplicate at stdin:2", err)
	}
	_, _, err = Read(strings.NewReader(""), "stdin", LoadOptions{})
	if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "stdin") {
		t.Errorf("err = %v, want ErrEmpty naming stdin", err)
	}
	_, _, err = Read(strings.NewReader("a b c d e\n"), "stdin", LoadOptions{Columns: "user,item,rating", Delimiter: "|"})
	if !errors.Is(err, ErrSyntax) {
		t.Errorf("err = %v, want ErrSyntax for a line with too few fields", err)
	}
	_, _, err = Read(strings.NewReader("abc\n"), "stdin", LoadOptions{Format: FormatDelimited})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "stdin") {
		t.Errorf("err = %v, want ErrFormat naming stdin", err)
	}
}

// TestSkipBad checks that SkipBad keeps the good lines, counts the bad ones
// and reports the first few in file order.
func TestSkipBad(t *testing.T) {
	path := "testdata/bad/mixed.data"
	d, rep, err := Load(path, LoadOptions{Format: FormatML100K, SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, d, rep)
	want := []idRating{{"1", "10", 3}, {"2", "10", 4}, {"3", "30", 1}, {"4", "40", 2}}
	if got := idTriples(d); !reflect.DeepEqual(got, want) {
		t.Errorf("ratings = %v, want %v", got, want)
	}
	// Bad lines add no IDs: item 20 appears only on bad lines.
	if want := []string{"10", "30", "40"}; !reflect.DeepEqual(d.ItemIDs, want) {
		t.Errorf("ItemIDs = %q, want %q", d.ItemIDs, want)
	}
	if rep.Lines != 8 || rep.Skipped != 4 {
		t.Errorf("Lines = %d, Skipped = %d, want 8 and 4", rep.Lines, rep.Skipped)
	}
	wantLines := []int{3, 5, 7, 8}
	wantErrs := []error{ErrRange, ErrSyntax, ErrDuplicate, ErrSyntax}
	if len(rep.Examples) != len(wantLines) {
		t.Fatalf("Examples = %v, want %d", rep.Examples, len(wantLines))
	}
	for k, e := range rep.Examples {
		var pe *ParseError
		if !errors.As(e, &pe) || pe.File != path || pe.Line != wantLines[k] || !errors.Is(e, wantErrs[k]) {
			t.Errorf("example %d = %v, want %v at %s:%d", k, e, wantErrs[k], path, wantLines[k])
		}
	}

	// More bad lines than examples: all counted, the first five shown.
	var sb strings.Builder
	sb.WriteString("1\t1\t3\t0\n")
	for k := 0; k < 20; k++ {
		sb.WriteString("1\t1\t4\t0\n") // duplicates of line 1
		sb.WriteString("2\t2\t7\t0\n") // off the scale
	}
	d, rep, err = Read(strings.NewReader(sb.String()), "many", LoadOptions{SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, d, rep)
	if d.Len() != 1 || rep.Skipped != 40 || len(rep.Examples) != maxExamples {
		t.Errorf("Len %d, Skipped %d, %d examples; want 1, 40, %d", d.Len(), rep.Skipped, len(rep.Examples), maxExamples)
	}
	for k, e := range rep.Examples {
		var pe *ParseError
		if !errors.As(e, &pe) || pe.Line != k+2 {
			t.Errorf("example %d = %v, want line %d", k, e, k+2)
		}
	}

	// Every line bad: ErrEmpty, not an empty dataset.
	_, _, err = Read(strings.NewReader("1\t1\t9\t0\n"), "allbad", LoadOptions{SkipBad: true})
	if !errors.Is(err, ErrEmpty) {
		t.Errorf("all lines bad: err = %v, want ErrEmpty", err)
	}
}

// TestHeaderModes checks header handling of delimited files.
func TestHeaderModes(t *testing.T) {
	const withHeader = "user,item,rating\na,x,1\nb,x,2\n"
	const noHeader = "a,x,1\nb,x,2\n"
	tests := []struct {
		name   string
		data   string
		header HeaderMode
		n      int
		err    error
	}{
		{"auto with header", withHeader, HeaderAuto, 2, nil},
		{"auto without header", noHeader, HeaderAuto, 2, nil},
		{"yes with header", withHeader, HeaderYes, 2, nil},
		// A header must name the columns; "a,x,1" names none.
		{"yes without header", noHeader, HeaderYes, 0, ErrFormat},
		{"no with header", withHeader, HeaderNo, 0, ErrSyntax},
		{"no without header", noHeader, HeaderNo, 2, nil},
		{"auto, bad first rating", "7,x,bad\nb,x,2\n", HeaderAuto, 0, ErrSyntax},
		{"auto, u.data bad first rating", "1\t10\tx\t881250949\n2\t10\t4\t891717742\n", HeaderAuto, 0, ErrSyntax},
		{"auto, header with extra columns", "user,item,rating,timestamp,tags\na,x,1,5,t\nb,x,2,6,t\n", HeaderAuto, 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Read(strings.NewReader(tc.data), "h.csv", LoadOptions{Header: tc.header})
			if tc.err != nil {
				var pe *ParseError
				if !errors.Is(err, tc.err) || !errors.As(err, &pe) || pe.Line != 1 {
					t.Errorf("err = %v, want %v at line 1", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, d, rep)
			if d.Len() != tc.n || rep.Lines != tc.n {
				t.Errorf("Len = %d, Lines = %d, want %d", d.Len(), rep.Lines, tc.n)
			}
			if d.UserIDs[d.Users[d.Len()-1]] != "b" {
				t.Errorf("last user = %q, want b", d.UserIDs[d.Users[d.Len()-1]])
			}
		})
	}
}

// TestDelimitedOptions checks delimiters, column orders and scales of
// delimited input.
func TestDelimitedOptions(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		opt   LoadOptions
		rats  []idRating
		scale Scale
	}{
		{"pipe detected", "u1|i1|4\nu2|i1|2\n", LoadOptions{}, []idRating{{"u1", "i1", 4}, {"u2", "i1", 2}}, Scale{Min: 2, Max: 4, Step: 1, Inferred: true}},
		{"blank runs", "u1  i1\t 4\nu2 i1 2\n", LoadOptions{Delimiter: " "}, []idRating{{"u1", "i1", 4}, {"u2", "i1", 2}}, Scale{Min: 2, Max: 4, Step: 1, Inferred: true}},
		{"double colon given", "u1::i1::4\n", LoadOptions{Delimiter: "::"}, []idRating{{"u1", "i1", 4}}, Scale{Min: 4, Max: 4, Step: 1, Inferred: true}},
		{"skip and extra columns", "t,i1,u1,3.5,x,y\nt,i2,u1,1,x,y\n", LoadOptions{Columns: "-,item,user,rating"},
			[]idRating{{"u1", "i1", 3.5}, {"u1", "i2", 1}}, Scale{Min: 1, Max: 3.5, Step: 0.5, Inferred: true}},
		{"rating first with timestamp", "5\t1\t9\t100\n", LoadOptions{Columns: "rating,timestamp,item,user"},
			[]idRating{{"100", "9", 5}}, Scale{Min: 5, Max: 5, Step: 1, Inferred: true}},
		{"continuous inferred", "a,x,0.25\nb,x,0.7\n", LoadOptions{}, []idRating{{"a", "x", 0.25}, {"b", "x", 0.7}}, Scale{Min: 0.25, Max: 0.7, Step: 0, Inferred: true}},
		{"negative inferred", "a,x,-2\nb,x,3\n", LoadOptions{}, []idRating{{"a", "x", -2}, {"b", "x", 3}}, Scale{Min: -2, Max: 3, Step: 1, Inferred: true}},
		{"scale given", "a,x,3\n", LoadOptions{Scale: &Scale{Min: 0, Max: 10, Step: 0}}, []idRating{{"a", "x", 3}}, Scale{Min: 0, Max: 10, Step: 0}},
		{"quoted and padded", "\"a\" , \"x\" , 3\n", LoadOptions{}, []idRating{{"a", "x", 3}}, Scale{Min: 3, Max: 3, Step: 1, Inferred: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Read(strings.NewReader(tc.data), "in", tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, d, rep)
			if got := idTriples(d); !reflect.DeepEqual(got, tc.rats) {
				t.Errorf("ratings = %v, want %v", got, tc.rats)
			}
			if d.Scale != tc.scale {
				t.Errorf("Scale = %v, want %v", d.Scale, tc.scale)
			}
		})
	}
	// Off a given scale: ErrRange, naming the line.
	_, _, err := Read(strings.NewReader("a,x,3\nb,x,3.5\n"), "in", LoadOptions{Scale: &Stars5})
	var pe *ParseError
	if !errors.Is(err, ErrRange) || !errors.As(err, &pe) || pe.Line != 2 {
		t.Errorf("half star on Stars5: err = %v, want ErrRange at line 2", err)
	}
}

// TestBadTitles checks that a malformed title line is an error naming the
// title file, or a skipped line under SkipBad.
func TestBadTitles(t *testing.T) {
	dir := copyFixture(t)
	writeFile(t, filepath.Join(dir, "u.item"), "10|Café Society (1995)|x\nno separator here\n30|Señor Spielbergo (1999)|y\n")
	_, _, err := Load(dir, LoadOptions{})
	var pe *ParseError
	if !errors.Is(err, ErrSyntax) || !errors.As(err, &pe) || pe.File != filepath.Join(dir, "u.item") || pe.Line != 2 || pe.Field != "title" {
		t.Fatalf("err = %v, want ErrSyntax at u.item:2 field title", err)
	}
	d, rep, err := Load(dir, LoadOptions{SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, d, rep)
	if d.Len() != 6 || rep.Skipped != 1 || len(rep.Examples) != 1 || !errors.Is(rep.Examples[0], ErrSyntax) {
		t.Errorf("Len %d, Skipped %d, Examples %v; want 6 ratings and the title line skipped", d.Len(), rep.Skipped, rep.Examples)
	}
	want := map[string]string{"10": "Café Society (1995)", "20": "", "30": "Señor Spielbergo (1999)"}
	if got := titlesByID(d); !reflect.DeepEqual(got, want) {
		t.Errorf("titles = %q, want %q", got, want)
	}
	if _, _, err := Load(dir, LoadOptions{NoTitles: true}); err != nil {
		t.Errorf("NoTitles still reads the title file: %v", err)
	}
}
