package ratings

import (
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/privrec/privrec/rng"
)

func TestBuilderAdd(t *testing.T) {
	b := NewBuilder("hand", Stars5)
	steps := []struct {
		user, item string
		value      float32
		err        error
	}{
		{"alice", "x", 5, nil},
		{"7", "x", 4, nil},
		{"007", "x", 3, nil}, // not the same ID as "7"
		{"alice", "y", 1, nil},
		{"alice", "x", 2, ErrDuplicate},
		{"bob", "z", 6, ErrRange},
		{"bob", "z", 0, ErrRange},
		{"bob", "z", 2.5, ErrRange}, // off the step
		{"bob", "z", float32(nan()), ErrRange},
		{"bob", "z", 2, nil},
		{"7", "x", 1, ErrDuplicate},
		{"4194304", "9999999999", 3, nil}, // beyond the small-ID table
		{"4194304", "9999999999", 3, ErrDuplicate},
	}
	for _, s := range steps {
		err := b.Add(s.user, s.item, s.value)
		if !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
			t.Errorf("Add(%q, %q, %g) = %v, want %v", s.user, s.item, s.value, err, s.err)
		}
	}
	d := b.Dataset()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []idRating{{"alice", "x", 5}, {"7", "x", 4}, {"007", "x", 3}, {"alice", "y", 1}, {"bob", "z", 2}, {"4194304", "9999999999", 3}}
	if got := idTriples(d); !reflect.DeepEqual(got, want) {
		t.Errorf("ratings = %v, want %v", got, want)
	}
	// Rejected ratings add no IDs.
	if want := []string{"alice", "7", "007", "bob", "4194304"}; !reflect.DeepEqual(d.UserIDs, want) {
		t.Errorf("UserIDs = %q, want %q", d.UserIDs, want)
	}
	if d.Name != "hand" || d.Scale != Stars5 {
		t.Errorf("Name %q, Scale %v", d.Name, d.Scale)
	}
	// Later additions leave the returned dataset alone.
	n, nu := d.Len(), d.NumUsers()
	for k := 0; k < 100; k++ {
		if err := b.Add("u"+strconv.Itoa(k), "x", 3); err != nil {
			t.Fatal(err)
		}
	}
	if d.Len() != n || d.NumUsers() != nu || len(d.Users) != n || cap(d.Users) != n {
		t.Errorf("dataset changed after Add: Len %d → %d, users %d → %d", n, d.Len(), nu, d.NumUsers())
	}
	if got := idTriples(d); !reflect.DeepEqual(got, want) {
		t.Errorf("ratings after more Adds = %v, want %v", got, want)
	}
	if d2 := b.Dataset(); d2.Len() != n+100 {
		t.Errorf("second Dataset Len = %d, want %d", d2.Len(), n+100)
	}
}

func nan() float64 { z := 0.0; return z / z }

// TestIDMap checks that small canonical decimals and other IDs share one
// index space in order of first appearance.
func TestIDMap(t *testing.T) {
	var m idMap
	ids := []string{"5", "05", "x", "4194303", "4194304", "0", "", "5", "x", "0"}
	want := []int32{0, 1, 2, 3, 4, 5, 6, 0, 2, 5}
	for k, id := range ids {
		if got := m.index([]byte(id)); got != want[k] {
			t.Errorf("index(%q) = %d, want %d", id, got, want[k])
		}
	}
	for k, id := range ids {
		if got := m.find([]byte(id)); got != want[k] {
			t.Errorf("find(%q) = %d, want %d", id, got, want[k])
		}
	}
	for _, id := range []string{"6", "006", "y", "4194305", "99999999"} {
		if got := m.find([]byte(id)); got != -1 {
			t.Errorf("find(%q) = %d, want -1", id, got)
		}
	}
	if want := []string{"5", "05", "x", "4194303", "4194304", "0", ""}; !reflect.DeepEqual(m.ids, want) {
		t.Errorf("ids = %q, want %q", m.ids, want)
	}
}

// TestFindDuplicates compares findDuplicates with a map on random data.
func TestFindDuplicates(t *testing.T) {
	r := rng.New(7, 1)
	for trial := 0; trial < 200; trial++ {
		nu, ni := 1+r.IntN(20), 1+r.IntN(20)
		n := r.IntN(60)
		users, items := make([]int32, n), make([]int32, n)
		for k := range users {
			users[k], items[k] = int32(r.IntN(nu)), int32(r.IntN(ni))
		}
		var want []duplicate
		first := map[[2]int32]int32{}
		for k := range users {
			key := [2]int32{users[k], items[k]}
			if f, ok := first[key]; ok {
				want = append(want, duplicate{first: f, later: int32(k)})
				continue
			}
			first[key] = int32(k)
		}
		got := findDuplicates(users, items, nu, ni)
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("trial %d: findDuplicates = %v, want %v", trial, got, want)
		}
	}
}
