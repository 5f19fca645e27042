package ratings

import (
	"fmt"
	"math"
	"sort"
)

// finish removes or reports duplicates, settles the scale and returns the
// dataset.
func (l *loader) finish() (*Dataset, error) {
	b := l.b
	dups := findDuplicates(b.us, b.is, len(b.users.ids), len(b.items.ids))
	if len(dups) > 0 {
		if !l.opt.SkipBad {
			return nil, l.dupError(dups[0])
		}
		for _, d := range dups[:min(len(dups), maxExamples)] {
			l.examples = append(l.examples, example{file: l.fileOf(d.later), err: l.dupError(d)})
		}
		l.rep.Skipped += len(dups)
		// Drop the repetitions. Their users and items occur earlier, so
		// the index space does not change.
		w, next := 0, 0
		for k := range b.vs {
			if next < len(dups) && int(dups[next].later) == k {
				next++
				continue
			}
			b.us[w], b.is[w], b.vs[w], l.lines[w] = b.us[k], b.is[k], b.vs[k], l.lines[k]
			w++
		}
		b.us, b.is, b.vs, l.lines = b.us[:w], b.is[:w], b.vs[:w], l.lines[:w]
	}
	sort.SliceStable(l.examples, func(a, c int) bool {
		ea, ec := l.examples[a], l.examples[c]
		if ea.file != ec.file {
			return ea.file < ec.file
		}
		return ea.err.Line < ec.err.Line
	})
	for _, e := range l.examples[:min(len(l.examples), maxExamples)] {
		l.rep.Examples = append(l.rep.Examples, e.err)
	}
	if len(b.vs) == 0 {
		return nil, &ParseError{File: l.rep.Path, Err: ErrEmpty}
	}
	switch {
	case l.opt.Scale != nil:
		b.scale = *l.opt.Scale
	case l.check:
		b.scale = l.scale
		if l.rep.Format == FormatML1M && allOn(b.vs, Stars5) {
			b.scale = Stars5
		}
	default:
		s, err := inferScale(b.vs)
		if err != nil {
			return nil, &ParseError{File: l.rep.Path, Field: "rating", Err: err}
		}
		b.scale = s
	}
	return b.Dataset(), nil
}

// allOn reports whether every value is on the scale.
func allOn(vs []float32, s Scale) bool {
	for _, v := range vs {
		if !s.Contains(v) {
			return false
		}
	}
	return true
}

// inferScale returns the scale of a set of finite ratings: min, max and step
// 1 if they are all integers, 0.5 if all are halves, else 0.
func inferScale(vs []float32) (Scale, error) {
	lo, hi := vs[0], vs[0]
	ints, halves := true, true
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
		if ints && v != float32(math.Trunc(float64(v))) {
			ints = false
		}
		if halves && 2*v != float32(math.Trunc(float64(2*v))) {
			halves = false
		}
	}
	if !finite(hi - lo) {
		return Scale{}, fmt.Errorf("ratings span %g..%g, too wide: %w", lo, hi, ErrRange)
	}
	s := Scale{Min: lo, Max: hi, Inferred: true}
	switch {
	case ints:
		s.Step = 1
	case halves:
		s.Step = 0.5
	}
	if s.Step > 0 && !allOn(vs, s) { // float rounding far from zero
		s.Step = 0
	}
	return s, nil
}
