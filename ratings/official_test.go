package ratings

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// sortedIDRatings returns the ratings of d in original IDs, sorted.
func sortedIDRatings(d *Dataset) []idRating {
	rs := idTriples(d)
	sort.Slice(rs, func(a, b int) bool {
		if rs[a].user != rs[b].user {
			return rs[a].user < rs[b].user
		}
		if rs[a].item != rs[b].item {
			return rs[a].item < rs[b].item
		}
		return rs[a].value < rs[b].value
	})
	return rs
}

func TestOfficialSplit(t *testing.T) {
	full, _, err := Load("testdata/ml100k", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, fold := range []string{"1", "u1", " U1 "} {
		t.Run(fold, func(t *testing.T) {
			train, test, err := OfficialSplit("testdata/ml100k", fold)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []*Dataset{train, test} {
				if err := d.Validate(); err != nil {
					t.Fatal(err)
				}
				if d.Scale != Stars5 {
					t.Errorf("%s: Scale = %v, want %v", d.Name, d.Scale, Stars5)
				}
				// One index space: the full dataset's IDs and titles.
				if !reflect.DeepEqual(d.UserIDs, full.UserIDs) || !reflect.DeepEqual(d.ItemIDs, full.ItemIDs) {
					t.Errorf("%s: IDs %q %q, want the full dataset's %q %q", d.Name, d.UserIDs, d.ItemIDs, full.UserIDs, full.ItemIDs)
				}
				if !reflect.DeepEqual(d.ItemTitles, full.ItemTitles) {
					t.Errorf("%s: titles %q, want %q", d.Name, d.ItemTitles, full.ItemTitles)
				}
			}
			if train.Name != "ml100k/u1.base" || test.Name != "ml100k/u1.test" {
				t.Errorf("names %q, %q", train.Name, test.Name)
			}
			wantTrain := []idRating{{"1", "10", 3}, {"2", "10", 4}, {"1", "20", 5}, {"3", "30", 1}}
			wantTest := []idRating{{"2", "20", 2}, {"3", "10", 5}}
			if got := idTriples(train); !reflect.DeepEqual(got, wantTrain) {
				t.Errorf("train = %v, want %v", got, wantTrain)
			}
			if got := idTriples(test); !reflect.DeepEqual(got, wantTest) {
				t.Errorf("test = %v, want %v", got, wantTest)
			}
			// Train and test partition u.data.
			union := &Dataset{UserIDs: full.UserIDs, ItemIDs: full.ItemIDs,
				Users:  append(append([]int32(nil), train.Users...), test.Users...),
				Items:  append(append([]int32(nil), train.Items...), test.Items...),
				Values: append(append([]float32(nil), train.Values...), test.Values...)}
			if got, want := sortedIDRatings(union), sortedIDRatings(full); !reflect.DeepEqual(got, want) {
				t.Errorf("train ∪ test = %v, want u.data %v", got, want)
			}
			// The same (user, item) index pair means the same IDs in all three.
			for k := range test.Values {
				u, i := test.Users[k], test.Items[k]
				if full.UserIDs[u] != test.UserIDs[u] || full.ItemIDs[i] != test.ItemIDs[i] {
					t.Errorf("test rating %d: indices (%d, %d) mean different IDs", k, u, i)
				}
			}
		})
	}
}

// copyFixture copies testdata/ml100k's files into a temporary folder,
// leaving out the files in omit, and returns the folder.
func copyFixture(t *testing.T, omit ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"u.data", "u.item", "u1.base", "u1.test"} {
		if strings.Contains(strings.Join(omit, " "), name) {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata/ml100k", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), string(data))
	}
	return dir
}

func TestOfficialSplitErrors(t *testing.T) {
	noTest := copyFixture(t, "u1.test")
	noData := copyFixture(t, "u.data")
	unknown := copyFixture(t)
	writeFile(t, filepath.Join(unknown, "u1.test"), "2\t20\t2\t886397596\n99\t10\t5\t884182806\n")
	unknownItem := copyFixture(t)
	writeFile(t, filepath.Join(unknownItem, "u1.test"), "2\t99\t2\t886397596\n")
	dup := copyFixture(t)
	writeFile(t, filepath.Join(dup, "u1.test"), "2\t20\t2\t886397596\n2\t20\t3\t886397597\n")

	tests := []struct {
		name  string
		dir   string
		fold  string
		err   error
		text  string
		file  string // ParseError.File, if any
		line  int
		field string
	}{
		{"fold 2 absent", "testdata/ml100k", "2", ErrFormat, "u2.base", "", 0, ""},
		{"fold ua absent", "testdata/ml100k", "ua", ErrFormat, "ua.base", "", 0, ""},
		{"bad fold", "testdata/ml100k", "6", ErrFormat, `"6"`, "", 0, ""},
		{"empty fold", "testdata/ml100k", "", ErrFormat, "1..5", "", 0, ""},
		{"no test file", noTest, "1", ErrFormat, "u1.test", "", 0, ""},
		{"no u.data", noData, "1", ErrFormat, "u.data", "", 0, ""},
		{"unknown user", unknown, "1", ErrRange, `"99"`, filepath.Join(unknown, "u1.test"), 2, "user"},
		{"unknown item", unknownItem, "1", ErrRange, `"99"`, filepath.Join(unknownItem, "u1.test"), 1, "item"},
		{"duplicate in test", dup, "1", ErrDuplicate, "first at line 1", filepath.Join(dup, "u1.test"), 2, ""},
		{"missing folder", filepath.Join(t.TempDir(), "nope"), "1", ErrFormat, "nope", "", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			train, test, err := OfficialSplit(tc.dir, tc.fold)
			if err == nil {
				t.Fatalf("no error; train %d, test %d ratings", train.Len(), test.Len())
			}
			if train != nil || test != nil {
				t.Error("datasets returned with an error")
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v, want %v mentioning %s", err, tc.err, tc.text)
			}
			if tc.file == "" {
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != tc.file || pe.Line != tc.line || pe.Field != tc.field {
				t.Errorf("err = %#v, want ParseError at %s:%d field %q", err, tc.file, tc.line, tc.field)
			}
		})
	}
}
