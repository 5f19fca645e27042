package ratings

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSplit(t *testing.T) {
	tests := []struct {
		in   string
		want SplitSpec
		str  string
	}{
		{"random:0.9", SplitSpec{Kind: SplitRandom, Frac: 0.9}, "random:0.9"},
		{" Random : .8 ", SplitSpec{Kind: SplitRandom, Frac: 0.8}, "random:0.8"},
		{"random:0.8:0.1", SplitSpec{Kind: SplitRandom, Frac: 0.8, Val: 0.1}, "random:0.8:0.1"},
		{"leave:10", SplitSpec{Kind: SplitLeave, K: 10}, "leave:10"},
		{"loo", SplitSpec{Kind: SplitLOO}, "loo"},
		{"LOO", SplitSpec{Kind: SplitLOO}, "loo"},
		{"kfold:5", SplitSpec{Kind: SplitKFold, K: 5}, "kfold:5"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSplit(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("ParseSplit(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
			back, err := ParseSplit(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %q gave %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestParseSplitErrors(t *testing.T) {
	tests := []struct {
		in      string
		mention string // the error must name the bad part
	}{
		{"", "empty kind"},
		{"holdout:0.9", `"holdout"`},
		{"random", "missing train fraction"},
		{"random:abc", `"abc"`},
		{"random:1", "train fraction 1"},
		{"random:0", "train fraction 0"},
		{"random:-0.2", "-0.2"},
		{"random:NaN", "NaN"},
		{"random:0.8:0.2", "no test set"},
		{"random:0.8:x", `validation fraction "x"`},
		{"random:0.8:0", `validation fraction "0"`},
		{"leave", "missing count"},
		{"leave:x", `"x"`},
		{"leave:0", "k = 0"},
		{"leave:2.5", `"2.5"`},
		{"kfold:1", "k = 1"},
		{"kfold:", `""`},
		{"loo:3", `"3"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseSplit(tc.in)
			if !errors.Is(err, ErrBadParameter) {
				t.Fatalf("ParseSplit(%q) error = %v, want ErrBadParameter", tc.in, err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestSplitSpecApply(t *testing.T) {
	d := synth(t, 80, 60, 12, 31)
	tests := []struct {
		spec  string
		n     int
		split func() (Split, error)
	}{
		{"random:0.75", 1, func() (Split, error) { return Holdout(d, 0.75, 8) }},
		{"leave:3", 1, func() (Split, error) { return LeaveKOut(d, 3, 8) }},
		{"loo", 1, func() (Split, error) { return LeaveOneOut(d, 8) }},
		{"kfold:4", 4, func() (Split, error) {
			f, err := KFold(d, 4, 8)
			return f[2], err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			spec, err := ParseSplit(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := spec.Apply(d, 8)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("%d splits, want %d", len(got), tc.n)
			}
			want, err := tc.split()
			if err != nil {
				t.Fatal(err)
			}
			g := got[0]
			if tc.n > 1 {
				g = got[2]
			}
			if !sameData(g.Train, want.Train) || !sameData(g.Test, want.Test) {
				t.Error("Apply differs from calling the split directly")
			}
			for _, sp := range got {
				checkPartition(t, d, sp.Train, sp.Test)
			}
		})
	}
	for _, bad := range []SplitSpec{{}, {Kind: "random", Frac: 2}, {Kind: "kfold", K: 1}, {Kind: "nope"}} {
		if _, err := bad.Apply(d, 1); !errors.Is(err, ErrBadParameter) {
			t.Errorf("Apply(%+v) error = %v, want ErrBadParameter", bad, err)
		}
	}
}
