package ratings

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ScaleFileName is the file that declares the rating scale of the rating
// files beside it: Load reads it when LoadOptions.Scale is nil, so a split
// of a dataset whose scale is public (privrec data split writes it) keeps
// that scale, and private methods accept the split's files. Its lines
// starting with '#' are comments; the other non-blank line is
// "min,max[,step]", as --scale takes it.
const ScaleFileName = "scale.txt"

// FormatScaleFile returns the contents of a ScaleFileName declaring s, with
// note as a comment line (no newline in it).
func FormatScaleFile(s Scale, note string) string {
	f := func(x float32) string { return strconv.FormatFloat(float64(x), 'g', -1, 32) }
	return fmt.Sprintf("# %s\n%s,%s,%s\n", note, f(s.Min), f(s.Max), f(s.Step))
}

// readScaleFile reads the ScaleFileName of dir: its scale and path, or
// ok false when dir has none. A malformed file is an ErrFormat *ParseError
// naming its line.
func readScaleFile(dir string) (s Scale, path string, ok bool, err error) {
	path = filepath.Join(dir, ScaleFileName)
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Scale{}, "", false, nil
	}
	if err != nil {
		return Scale{}, "", false, fmt.Errorf("ratings: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseScaleLine(line)
		if err != nil {
			return Scale{}, "", false, &ParseError{File: path, Line: n, Field: "scale", Err: err}
		}
		return s, path, true, nil
	}
	if err := sc.Err(); err != nil {
		return Scale{}, "", false, &ParseError{File: path, Line: n + 1, Err: fmt.Errorf("read: %w: %w", err, ErrFormat)}
	}
	return Scale{}, "", false, &ParseError{File: path, Err: fmt.Errorf("no scale line (want min,max[,step]): %w", ErrFormat)}
}

// parseScaleLine parses "min,max[,step]".
func parseScaleLine(line string) (Scale, error) {
	parts := strings.Split(line, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return Scale{}, fmt.Errorf("%q: want min,max[,step]: %w", line, ErrFormat)
	}
	var v [3]float32
	for k, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil || !finite(float32(x)) {
			return Scale{}, fmt.Errorf("%q: %q is not a number: %w", line, p, ErrFormat)
		}
		v[k] = float32(x)
	}
	s := Scale{Min: v[0], Max: v[1], Step: v[2]}
	if !(s.Min < s.Max) || s.Step < 0 {
		return Scale{}, fmt.Errorf("%q: want min < max and step ≥ 0: %w", line, ErrFormat)
	}
	return s, nil
}
