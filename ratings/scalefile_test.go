package ratings

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestScaleFile: a scale.txt beside a rating file declares its scale
// (LoadOptions.Scale still wins); a malformed one is an error naming the
// file and line; FormatScaleFile writes what readScaleFile reads.
func TestScaleFile(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		opt  LoadOptions
		want Scale
		file bool   // the report names the scale file
		err  string // a substring of the error; "" for none
		line int    // the error's line
	}{
		{"declared", "ok", LoadOptions{}, Scale{Min: 0.5, Max: 5, Step: 0.5}, true, "", 0},
		{"option wins", "ok", LoadOptions{Scale: &Stars5}, Stars5, false, "", 0},
		{"malformed", "bad", LoadOptions{}, Scale{}, false, `"1;5": want min,max[,step]`, 2},
		{"no scale line", "empty", LoadOptions{}, Scale{}, false, "no scale line", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, rep, err := Load(filepath.Join("testdata", "scalefile", tc.dir, "train1.tsv"), tc.opt)
			if tc.err != "" {
				var pe *ParseError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrFormat) ||
					!errors.As(err, &pe) || filepath.Base(pe.File) != ScaleFileName || pe.Line != tc.line {
					t.Fatalf("err = %v, want an ErrFormat at %s:%d saying %q", err, ScaleFileName, tc.line, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Scale != tc.want {
				t.Errorf("scale %v, want %v", d.Scale, tc.want)
			}
			if (rep.ScaleFile != "") != tc.file {
				t.Errorf("report's scale file %q, want one: %v", rep.ScaleFile, tc.file)
			}
		})
	}
	for _, s := range []Scale{Stars5, HalfStars5, {Min: -10, Max: 10}, {Min: 1, Max: 100, Step: 0.25}} {
		got, err := parseScaleLine(strings.Split(FormatScaleFile(s, "a note"), "\n")[1])
		if err != nil || got != s {
			t.Errorf("FormatScaleFile(%v) reads back as %v, %v", s, got, err)
		}
	}
}
