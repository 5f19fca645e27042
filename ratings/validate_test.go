package ratings

import (
	"strings"
	"testing"
)

// TestValidate checks that Validate accepts a well-formed dataset and
// names what is wrong with a malformed one, a repeated (user, item) pair
// included: every sensitivity of the private methods assumes a user
// rates an item at most once.
func TestValidate(t *testing.T) {
	base := func() *Dataset {
		return &Dataset{
			Name: "d", Scale: Scale{Min: 1, Max: 5, Step: 1},
			Users: []int32{0, 0, 1}, Items: []int32{0, 1, 0}, Values: []float32{1, 2, 3},
			UserIDs: []string{"u0", "u1"}, ItemIDs: []string{"i0", "i1"},
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(d *Dataset)
		wants []string // substrings of the error; nil: valid
	}{
		{"valid", func(*Dataset) {}, nil},
		{"lengths", func(d *Dataset) { d.Values = d.Values[:2] }, []string{"lengths"}},
		{"user range", func(d *Dataset) { d.Users[2] = 2 }, []string{"rating 2", "user index 2"}},
		{"off scale", func(d *Dataset) { d.Values[1] = 6 }, []string{"rating 1", "value 6"}},
		{"repeated pair", func(d *Dataset) {
			d.Users = append(d.Users, 0)
			d.Items = append(d.Items, 1)
			d.Values = append(d.Values, 4)
		}, []string{"ratings 1 and 3", `user "u0"`, `item "i1"`}},
		{"repeated pair, same value", func(d *Dataset) {
			d.Users = append([]int32{1}, d.Users...)
			d.Items = append([]int32{0}, d.Items...)
			d.Values = append([]float32{3}, d.Values...)
		}, []string{"ratings 0 and 3", `user "u1"`, `item "i0"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := base()
			tc.edit(d)
			err := d.Validate()
			if tc.wants == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
