package main

import "testing"

// TestParsePart: --part I/N takes the I-th of N contiguous shares of the
// users, the shares covering every user once; malformed values are
// refused with the flag named.
func TestParsePart(t *testing.T) {
	cases := []struct {
		part   string
		n      int
		lo, hi int
		bad    bool
	}{
		{"", 10, 0, 10, false},
		{"1/3", 6040, 0, 2013, false},
		{"2/3", 6040, 2013, 4026, false},
		{"3/3", 6040, 4026, 6040, false},
		{"1/1", 5, 0, 5, false},
		{"0/3", 10, 0, 0, true},
		{"4/3", 10, 0, 0, true},
		{"1/0", 10, 0, 0, true},
		{"2", 10, 0, 0, true},
		{"a/b", 10, 0, 0, true},
		{"1/11", 10, 0, 0, true},
	}
	for _, c := range cases {
		lo, hi, err := parsePart(c.part, c.n)
		switch {
		case c.bad && err == nil:
			t.Errorf("--part %q of %d: [%d, %d), want an error", c.part, c.n, lo, hi)
		case !c.bad && err != nil:
			t.Errorf("--part %q of %d: %v", c.part, c.n, err)
		case !c.bad && (lo != c.lo || hi != c.hi):
			t.Errorf("--part %q of %d: [%d, %d), want [%d, %d)", c.part, c.n, lo, hi, c.lo, c.hi)
		}
	}
}
