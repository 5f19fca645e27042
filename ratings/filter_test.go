package ratings

import (
	"fmt"
	"slices"
	"testing"
)

// naiveCore is a slow reference for MinCounts: it recounts from scratch and
// drops whole rounds of ratings until nothing changes, and returns the kept
// positions of d.
func naiveCore(d *Dataset, minU, minI int) []int {
	idx := make([]int, d.Len())
	for k := range idx {
		idx[k] = k
	}
	for {
		cu := map[int32]int{}
		ci := map[int32]int{}
		for _, k := range idx {
			cu[d.Users[k]]++
			ci[d.Items[k]]++
		}
		var next []int
		for _, k := range idx {
			if cu[d.Users[k]] >= minU && ci[d.Items[k]] >= minI {
				next = append(next, k)
			}
		}
		if len(next) == len(idx) {
			return idx
		}
		idx = next
	}
}

// external lists the ratings of d as strings over the original IDs.
func external(d *Dataset) []string {
	out := make([]string, d.Len())
	for k := range out {
		title := ""
		if d.ItemTitles != nil {
			title = d.ItemTitles[d.Items[k]]
		}
		out[k] = fmt.Sprintf("%s|%s|%s|%g", d.UserIDs[d.Users[k]], d.ItemIDs[d.Items[k]], title, d.Values[k])
	}
	return out
}

func TestMinCounts(t *testing.T) {
	d := synth(t, 300, 400, 8, 11)
	tests := []struct{ minU, minI int }{
		{0, 0}, {1, 1}, {5, 0}, {0, 5}, {5, 5}, {10, 3}, {20, 20}, {1000, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d,%d", tc.minU, tc.minI), func(t *testing.T) {
			f := MinCounts(d, tc.minU, tc.minI)
			if err := f.Validate(); err != nil {
				t.Fatal(err)
			}
			// Stability: every user and item meets the minimum, and none is
			// left without ratings (dense re-indexing).
			perUser, perItem := f.Counts()
			for u, n := range perUser {
				if n < max(1, tc.minU) {
					t.Fatalf("user %s has %d ratings, want >= %d", f.UserIDs[u], n, max(1, tc.minU))
				}
			}
			for i, n := range perItem {
				if n < max(1, tc.minI) {
					t.Fatalf("item %s has %d ratings, want >= %d", f.ItemIDs[i], n, max(1, tc.minI))
				}
			}
			// Maximality and order: the same ratings, in the same order, as
			// the slow reference, mapped through the new IDs and titles.
			want := external(d.Subset(naiveCore(d, max(1, tc.minU), max(1, tc.minI))))
			if got := external(f); !slices.Equal(got, want) {
				t.Fatalf("MinCounts kept %d ratings, reference %d (or they differ)", len(got), len(want))
			}
			// IDs keep their relative order.
			if !isSubsequence(f.UserIDs, d.UserIDs) || !isSubsequence(f.ItemIDs, d.ItemIDs) {
				t.Error("re-indexing changed the order of user or item IDs")
			}
			if f.Scale != d.Scale || f.Name != d.Name {
				t.Error("MinCounts lost the scale or the name")
			}
		})
	}
}

func TestMinCountsCascade(t *testing.T) {
	// Items 0 and 2 have one rating each; dropping them (minI = 2) leaves
	// users 0 and 1 with one rating each, which drops them (minU = 2) and
	// with them item 1: only the block of users 2-3 and items 3-4 stays.
	d := fromTriples(t, 4, 5, []triple{
		{0, 0, 1}, {0, 1, 2},
		{1, 1, 3}, {1, 2, 4},
		{2, 3, 5}, {2, 4, 1},
		{3, 3, 2}, {3, 4, 3},
	})
	f := MinCounts(d, 2, 2)
	if got, want := f.UserIDs, []string{"u2", "u3"}; !slices.Equal(got, want) {
		t.Errorf("users %v, want %v", got, want)
	}
	if got, want := f.ItemIDs, []string{"i3", "i4"}; !slices.Equal(got, want) {
		t.Errorf("items %v, want %v", got, want)
	}
	if got, want := f.ItemTitles, []string{"title 3", "title 4"}; !slices.Equal(got, want) {
		t.Errorf("titles %v, want %v", got, want)
	}
	if f.Len() != 4 {
		t.Errorf("%d ratings, want 4", f.Len())
	}
}

func TestCompact(t *testing.T) {
	d := synth(t, 100, 200, 5, 12)
	sp, err := LeaveOneOut(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := Compact(sp.Test)
	perUser, perItem := sp.Test.Counts()
	active := func(n []int) int {
		a := 0
		for _, x := range n {
			if x > 0 {
				a++
			}
		}
		return a
	}
	if c.NumUsers() != active(perUser) || c.NumItems() != active(perItem) {
		t.Errorf("compact has %d users and %d items, want %d and %d", c.NumUsers(), c.NumItems(), active(perUser), active(perItem))
	}
	if c.NumUsers() == sp.Test.NumUsers() && c.NumItems() == sp.Test.NumItems() {
		t.Error("test data has no empty user or item; the test proves nothing")
	}
	if !slices.Equal(external(c), external(sp.Test)) {
		t.Error("Compact changed the ratings")
	}
	if e := Compact(fromTriples(t, 3, 3, nil)); e.Len() != 0 || e.NumUsers() != 0 || e.NumItems() != 0 {
		t.Errorf("compact of an empty dataset: %d ratings, %d users, %d items", e.Len(), e.NumUsers(), e.NumItems())
	}
}

func isSubsequence(sub, full []string) bool {
	j := 0
	for _, s := range full {
		if j < len(sub) && sub[j] == s {
			j++
		}
	}
	return j == len(sub)
}
