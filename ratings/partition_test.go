package ratings

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestPartition(t *testing.T) {
	d := synth(t, 400, 300, 6, 21)
	tests := []struct {
		name   string
		byUser bool
		n      int
	}{
		{"users 1", true, 1},
		{"users 3", true, 3},
		{"users 10", true, 10},
		{"items 1", false, 1},
		{"items 4", false, 4},
		{"items 10", false, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			part, rows := PartitionItems, d.NumItems()
			if tc.byUser {
				part, rows = PartitionUsers, d.NumUsers()
			}
			parts, err := part(d, tc.n, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != tc.n {
				t.Fatalf("%d parts, want %d", len(parts), tc.n)
			}
			checkPartition(t, d, parts...)
			// Every user (item) is owned by exactly one vendor.
			owner := make([]int, rows)
			for j := range owner {
				owner[j] = -1
			}
			for v, p := range parts {
				checkOrder(t, d, p)
				row := p.Items
				if tc.byUser {
					row = p.Users
				}
				for _, x := range row {
					if owner[x] != -1 && owner[x] != v {
						t.Fatalf("row %d is held by vendors %d and %d", x, owner[x], v)
					}
					owner[x] = v
				}
			}
			// Assignment is uniform: count rows (with ratings) per vendor.
			// Each count is Binomial(active, 1/n); allow 6 sd.
			count := make([]int, tc.n)
			active := 0
			for _, v := range owner {
				if v >= 0 {
					count[v]++
					active++
				}
			}
			p := 1 / float64(tc.n)
			mean, sd := float64(active)*p, math.Sqrt(float64(active)*p*(1-p))
			for v, c := range count {
				if math.Abs(float64(c)-mean) > 6*sd+0.5 {
					t.Errorf("vendor %d holds %d of %d rows, want %.0f ± %.0f", v, c, active, mean, 6*sd)
				}
			}
		})
	}
}

func TestPartitionErrors(t *testing.T) {
	d := fromTriples(t, 3, 2, []triple{{0, 0, 1}, {1, 1, 2}, {2, 0, 3}})
	for _, n := range []int{-1, 0, 4} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			if _, err := PartitionUsers(d, n, 1); !errors.Is(err, ErrBadParameter) {
				t.Errorf("PartitionUsers(n=%d) error = %v, want ErrBadParameter", n, err)
			}
		})
	}
	for _, n := range []int{-1, 0, 3} {
		t.Run("items "+strconv.Itoa(n), func(t *testing.T) {
			if _, err := PartitionItems(d, n, 1); !errors.Is(err, ErrBadParameter) {
				t.Errorf("PartitionItems(n=%d) error = %v, want ErrBadParameter", n, err)
			}
		})
	}
}
