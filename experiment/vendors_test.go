package experiment

import (
	"testing"

	"github.com/privrec/privrec/ratings"
)

func TestVendorSplit(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 300, Items: 200, Rank: 3, PerUser: 30}, 1)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		byItem bool
	}{{"horizontal", false}, {"vertical", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ids := func(d *ratings.Dataset) []int32 {
				if tc.byItem {
					return d.Items
				}
				return d.Users
			}
			one := vendorSplit(sp, 1, 10, 7, tc.byItem)
			all := vendorSplit(sp, 10, 10, 7, tc.byItem)
			if all.Train.Len() != sp.Train.Len() {
				t.Errorf("10 of 10 vendors keep %d of %d training ratings", all.Train.Len(), sp.Train.Len())
			}
			if one.Test.Len() != all.Test.Len() {
				t.Errorf("test set depends on the vendors pooled: %d vs %d", one.Test.Len(), all.Test.Len())
			}
			// Vendor 0 alone holds about a tenth; its test rows are exactly
			// the rows it trains on (among those that have training data).
			if f := float64(one.Train.Len()) / float64(sp.Train.Len()); f < 0.04 || f > 0.2 {
				t.Errorf("vendor 0 holds %.3f of the training ratings, want about 0.1", f)
			}
			own := map[int32]bool{}
			for _, x := range ids(one.Train) {
				own[x] = true
			}
			for _, x := range ids(one.Test) {
				if !own[x] && ratingsOf(ids(sp.Train), x) > 0 {
					t.Fatalf("test row %d has training ratings but is not vendor 0's", x)
				}
			}
			// The other axis is not split.
			other := one.Train.Users
			if !tc.byItem {
				other = one.Train.Items
			}
			if n := len(distinct(other)); n < 50 {
				t.Errorf("only %d distinct rows on the unsplit axis", n)
			}
		})
	}
}

func ratingsOf(ids []int32, x int32) int {
	n := 0
	for _, y := range ids {
		if y == x {
			n++
		}
	}
	return n
}

func distinct(ids []int32) map[int32]bool {
	m := map[int32]bool{}
	for _, x := range ids {
		m[x] = true
	}
	return m
}
