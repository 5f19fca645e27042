package ratings

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// genreNames returns the names of an item's genres.
func genreNames(s *Side, it ItemSide) []string {
	var out []string
	for _, g := range it.Genres {
		out = append(out, s.Genres[g])
	}
	return out
}

func TestLoadSide(t *testing.T) {
	type item struct {
		id     string
		year   int
		genres []string
	}
	cases := []struct {
		dir      string
		items    []item
		users    map[string]UserSide
		absentIt []string // item IDs of the ratings without attributes
	}{
		{dir: "ml100k", items: []item{
			{"10", 1995, []string{"Action", "Comedy"}},
			{"20", 1987, []string{"Drama"}}, // year from the title: no release date
			{"30", 2001, nil},
		}, users: map[string]UserSide{
			"1": {"M", 24, "technician"}, "2": {"F", 53, "other"}, "3": {"M", 17, "student"},
		}},
		{dir: "ml1m", items: []item{
			{"661", 1996, []string{"Animation", "Children's", "Musical"}},
			{"1193", 1975, []string{"Drama"}},
			{"3408", 2000, []string{"Drama"}},
		}, users: map[string]UserSide{
			"1": {"F", 1, "10"}, "2": {"M", 56, "16"}, "3": {"M", 25, "15"},
		}},
		// the shared ML-1M copy: item IDs renumbered, item_map.tsv maps them
		// back to MovieIDs; item 2 is ambiguous (no MovieID), so it has none.
		{dir: "dense", items: []item{
			{"1", 1975, []string{"Drama"}},
			{"3", 2000, []string{"Drama"}},
		}, absentIt: []string{"2"}, users: map[string]UserSide{"1": {"F", 1, "10"}}},
		{dir: "mlcsv", items: []item{
			{"1", 1995, []string{"Adventure", "Animation", "Comedy"}},
			{"3", 1995, []string{"Comedy", "Romance"}},
			{"6", 1995, nil},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			d, _, err := Load(filepath.Join("testdata", "side", tc.dir), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Side == nil {
				t.Fatal("no side source")
			}
			s, err := d.Side.Features()
			if err != nil {
				t.Fatal(err)
			}
			if s.Items == nil {
				t.Fatal("no item side features")
			}
			for _, want := range tc.items {
				it, ok := s.Items[want.id]
				if !ok {
					t.Fatalf("item %s has no attributes", want.id)
				}
				if it.Year != want.year || !slices.Equal(genreNames(s, it), want.genres) {
					t.Errorf("item %s: year %d genres %v, want %d %v", want.id, it.Year, genreNames(s, it), want.year, want.genres)
				}
			}
			for _, id := range tc.absentIt {
				if _, ok := s.Items[id]; ok {
					t.Errorf("item %s has attributes, want none", id)
				}
			}
			if tc.users == nil && s.Users != nil {
				t.Errorf("user attributes from %s, want none", d.Side.UserFile)
			}
			for id, want := range tc.users {
				if got := s.Users[id]; got != want {
					t.Errorf("user %s: %+v, want %+v", id, got, want)
				}
			}
			// splits share the side features
			sp, _ := ParseSplit("random:0.5")
			spl, err := sp.Apply(d, 1)
			if err != nil {
				t.Fatal(err)
			}
			if spl[0].Train.Side != d.Side || spl[0].Test.Side != d.Side {
				t.Error("a split lost the side features")
			}
		})
	}
}

func TestLoadSideNone(t *testing.T) {
	d, _, err := Load(filepath.Join("testdata", "side", "ml1m"), LoadOptions{NoTitles: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Side != nil {
		t.Error("NoTitles loaded side features")
	}
	d, _, err = Load(filepath.Join("testdata", "dense", "ratings_uir_dense.tsv"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Side == nil || d.Side.UserFile != "" || d.Side.ItemMap == "" {
		t.Errorf("dense without users.dat: side %+v, want items through the item map only", d.Side)
	}
}

// TestLoadSideMalformed: Load does not read the side files; Features
// reports a malformed one as a *ParseError naming the file, its line and
// field.
func TestLoadSideMalformed(t *testing.T) {
	cases := []struct {
		dir, file, replace, with string
		line                     int
		field                    string
	}{
		{"ml100k", "u.item", "|0|0|0|0|0|0|0|0|1|", "|0|0|0|0|0|0|0|0|2|", 2, "genre"},
		{"ml100k", "u.item", "|0|1|0|0|0|1|", "|0|1|", 1, ""},
		{"ml100k", "u.item", "12-Mar-2001", "March 2001", 3, "release date"},
		{"ml100k", "u.user", "2|53|F|", "2|old|F|", 2, "age"},
		{"ml100k", "u.user", "3|17|M|", "3|17|X|", 3, "gender"},
		{"ml1m", "users.dat", "2::M::56::16::70072", "2::M::56", 2, ""},
		{"ml1m", "movies.dat", "1193::A Cuckoo Film (1975)::Drama", "1193::A Cuckoo Film (1975)", 2, ""},
		{"mlcsv", "movies.csv", "6,Heat Wave (1995),(no genres listed)", "6,Heat Wave (1995)", 4, "title"},
	}
	for _, tc := range cases {
		t.Run(tc.file+"/"+tc.with, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join("testdata", "side", tc.dir)
			ents, _ := os.ReadDir(src)
			for _, e := range ents {
				b, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() == tc.file {
					if !strings.Contains(string(b), tc.replace) {
						t.Fatalf("fixture %s lacks %q", e.Name(), tc.replace)
					}
					b = []byte(strings.Replace(string(b), tc.replace, tc.with, 1))
				}
				if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			d, _, err := Load(dir, LoadOptions{})
			if err != nil {
				t.Fatalf("Load read the side files: %v", err)
			}
			_, err = d.Side.Features()
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v, want a *ParseError wrapping ErrSyntax", err)
			}
			if filepath.Base(pe.File) != tc.file || pe.Line != tc.line || pe.Field != tc.field {
				t.Errorf("error at %s:%d field %q, want %s:%d field %q (%v)", pe.File, pe.Line, pe.Field, tc.file, tc.line, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %q does not name %s", err, tc.file)
			}
			if _, err2 := d.Side.Features(); err2 != err {
				t.Errorf("second Features: %v, want the same error", err2)
			}
		})
	}
}

func TestTitleYear(t *testing.T) {
	for title, want := range map[string]int{
		"Toy Story (1995)": 1995, "Toy Story (1995) ": 1995, "Untitled": 0, "(1995": 0, "Film (abcd)": 0,
		"Dr. Strangelove (1963)": 1963, "City of Lost Children, The (Cité des enfants perdus, La) (1995)": 1995,
	} {
		if got := titleYear(title); got != want {
			t.Errorf("titleYear(%q) = %d, want %d", title, got, want)
		}
	}
}
