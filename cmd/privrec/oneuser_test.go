package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// TestOneUserRatings: a one-user file (client --ratings, recommend
// --ratings) is read by its header's names against a fixed catalog;
// unknown items fail naming the line, or are skipped and counted under
// --skip-bad; a file of two users is refused; a file without a user
// column (movieId,rating) is the one user's.
func TestOneUserRatings(t *testing.T) {
	catalog := []string{"1", "260", "1196", "2571"}
	scale := ratings.Scale{Min: 0.5, Max: 5, Step: 0.5}
	for _, tc := range []struct {
		file    string
		skipBad bool
		items   []int32
		values  []float32
		err     string // a substring of the error, "" for none
		stderr  string // a substring of the skip report
	}{
		{file: "reordered.csv", items: []int32{1, 2}, values: []float32{5, 4.5}},
		{file: "unknown.csv", err: "999999999"},
		{file: "unknown.csv", skipBad: true, items: []int32{1, 2}, values: []float32{5, 4.5}, stderr: "skipped 1 bad line"},
		{file: "two-users.csv", err: "ratings of 2 users"},
		// The natural one-person file: no user column.
		{file: "item-rating.csv", items: []int32{1, 2}, values: []float32{5, 4.5}},
		{file: "item-rating-noheader.csv", items: []int32{1, 2}, values: []float32{5, 4.5}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var errb bytes.Buffer
			a := &app{stdout: &bytes.Buffer{}, stderr: &errb}
			d, err := a.oneUserRatings(filepath.Join("testdata", "one-user", tc.file), catalog, "the catalog", scale, tc.skipBad)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.UserIDs[0] != "me" || len(d.Items) != len(tc.items) {
				t.Fatalf("user %q, %d ratings; want me, %d", d.UserIDs[0], len(d.Items), len(tc.items))
			}
			for k := range d.Items {
				if d.Items[k] != tc.items[k] || d.Values[k] != tc.values[k] {
					t.Errorf("rating %d: item %d value %v, want %d %v", k, d.Items[k], d.Values[k], tc.items[k], tc.values[k])
				}
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr %q, want %q", errb.String(), tc.stderr)
			}
		})
	}
}
