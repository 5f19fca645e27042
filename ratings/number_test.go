package ratings

import (
	"errors"
	"strings"
	"testing"
)

// TestStrictNumbers checks the grammar of rating fields.
func TestStrictNumbers(t *testing.T) {
	good := map[string]float32{"4": 4, "-0.25": -0.25, "+3": 3, "3.5e0": 3.5, "35E-1": 3.5, "0.12345678": 0.12345678, "007": 7}
	for in, want := range good {
		if v, ok, huge := parseFloat32([]byte(in)); !ok || huge || v != want {
			t.Errorf("parseFloat32(%q) = %v, %v, %v; want %v", in, v, ok, huge, want)
		}
	}
	for _, in := range []string{"", "3.", ".5", "-", "+.", "1e", "1e+", "0x10", "1_0", "3,5", "4 ", "--1", "e5", "1.2.3", "infinit"} {
		if v, ok, _ := parseFloat32([]byte(in)); ok {
			t.Errorf("parseFloat32(%q) = %v, accepted", in, v)
		}
	}
	for _, in := range []string{"1e308", "-1e39", "1e400"} {
		if _, ok, huge := parseFloat32([]byte(in)); !ok || !huge {
			t.Errorf("parseFloat32(%q): ok %v huge %v, want a huge number", in, ok, huge)
		}
	}
	for _, in := range []string{"NaN", "inf", "-Infinity"} {
		if v, ok, huge := parseFloat32([]byte(in)); !ok || huge || finite(v) {
			t.Errorf("parseFloat32(%q) = %v, %v, %v; want a value that is not finite", in, v, ok, huge)
		}
	}
}

// TestStrictRatingErrors checks what a loosely written or huge rating is
// called, with its line.
func TestStrictRatingErrors(t *testing.T) {
	tests := []struct {
		name, data string
		opt        LoadOptions
		err        error
		text       string
	}{
		{"trailing point", "a,x,4\na,y,3.\n", LoadOptions{}, ErrSyntax, `"3." is not a decimal number`},
		{"leading point", "a,x,4\na,y,.5\n", LoadOptions{}, ErrSyntax, `".5" is not a decimal number`},
		{"huge, inferred scale", "a,x,4\na,y,1e308\n", LoadOptions{}, ErrRange, `"1e308" outside any scale`},
		{"huge, given scale", "a,x,4\na,y,1e308\n", LoadOptions{Scale: &Stars5}, ErrRange, `"1e308" outside scale 1..5`},
		{"NaN", "a,x,4\na,y,NaN\n", LoadOptions{}, ErrRange, "not finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := Read(strings.NewReader(tc.data), "r.csv", tc.opt)
			if err == nil {
				t.Fatalf("no error; loaded %d ratings", d.Len())
			}
			var pe *ParseError
			if !errors.Is(err, tc.err) || !errors.As(err, &pe) || pe.Line != 2 || pe.Field != "rating" {
				t.Errorf("err = %v, want %v in field rating at line 2", err, tc.err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v, want it to say %q", err, tc.text)
			}
		})
	}
}
