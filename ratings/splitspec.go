package ratings

import (
	"fmt"
	"strconv"
	"strings"
)

// Split kinds of a SplitSpec.
const (
	SplitRandom = "random" // Holdout with train fraction Frac
	SplitLeave  = "leave"  // LeaveKOut with K
	SplitLOO    = "loo"    // LeaveOneOut
	SplitKFold  = "kfold"  // KFold with K folds
)

// SplitSpec is a parsed split description such as "random:0.9" (Holdout,
// 90% train), "leave:10" (LeaveKOut, k = 10), "loo" (LeaveOneOut) or
// "kfold:5" (KFold, 5 folds). Frac is used by "random" only, K by "leave"
// and "kfold". "random:F:V" (the DPALS protocol is "random:0.8:0.1")
// also sets Val: a fraction V of the ratings is a validation part, held
// out of both the training and the test set, and the test set is the
// remaining 1 − F − V.
type SplitSpec struct {
	Kind string
	Frac float64
	Val  float64
	K    int
}

// ParseSplit parses a split description; see SplitSpec. Kinds are case
// insensitive and spaces around the parts are ignored. The error names the
// part that is wrong.
func ParseSplit(s string) (SplitSpec, error) {
	kind, arg, hasArg := strings.Cut(strings.TrimSpace(s), ":")
	kind = strings.ToLower(strings.TrimSpace(kind))
	arg = strings.TrimSpace(arg)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ratings: split %q: %w: %s", s, ErrBadParameter, fmt.Sprintf(format, args...))
	}
	switch kind {
	case SplitRandom:
		if !hasArg {
			return SplitSpec{}, bad(`missing train fraction, want "random:F" with F in (0,1)`)
		}
		fs, vs, hasVal := strings.Cut(arg, ":")
		f, err := strconv.ParseFloat(strings.TrimSpace(fs), 64)
		if err != nil {
			return SplitSpec{}, bad("train fraction %q is not a number", fs)
		}
		spec := SplitSpec{Kind: kind, Frac: f}
		if hasVal {
			v, err := strconv.ParseFloat(strings.TrimSpace(vs), 64)
			if err != nil || !(v > 0) {
				return SplitSpec{}, bad("validation fraction %q is not a positive number", vs)
			}
			spec.Val = v
		}
		if err := spec.check(); err != nil {
			return SplitSpec{}, bad("%v", err)
		}
		return spec, nil
	case SplitLeave, SplitKFold:
		if !hasArg {
			return SplitSpec{}, bad("missing count, want %q with an integer K", kind+":K")
		}
		k, err := strconv.Atoi(arg)
		if err != nil {
			return SplitSpec{}, bad("count %q is not an integer", arg)
		}
		spec := SplitSpec{Kind: kind, K: k}
		if err := spec.check(); err != nil {
			return SplitSpec{}, bad("%v", err)
		}
		return spec, nil
	case SplitLOO:
		if hasArg {
			return SplitSpec{}, bad("%q takes no argument, got %q", kind, arg)
		}
		return SplitSpec{Kind: kind}, nil
	case "":
		return SplitSpec{}, bad("empty kind, want random:F, leave:K, loo or kfold:K")
	default:
		return SplitSpec{}, bad("unknown kind %q, want random:F, leave:K, loo or kfold:K", kind)
	}
}

// check validates the parameter of a spec whose kind is known.
func (s SplitSpec) check() error {
	switch s.Kind {
	case SplitRandom:
		if !(s.Frac > 0 && s.Frac < 1) {
			return fmt.Errorf("train fraction %g not in (0,1)", s.Frac)
		}
		if !(s.Val >= 0 && s.Frac+s.Val < 1) {
			return fmt.Errorf("train fraction %g and validation fraction %g leave no test set", s.Frac, s.Val)
		}
	case SplitLeave:
		if s.K < 1 {
			return fmt.Errorf("k = %d, want k >= 1", s.K)
		}
	case SplitKFold:
		if s.K < 2 {
			return fmt.Errorf("k = %d folds, want k >= 2", s.K)
		}
	case SplitLOO:
	default:
		return fmt.Errorf("unknown kind %q", s.Kind)
	}
	return nil
}

// String returns the description ParseSplit reads back into s.
func (s SplitSpec) String() string {
	switch s.Kind {
	case SplitRandom:
		if s.Val > 0 {
			return s.Kind + ":" + strconv.FormatFloat(s.Frac, 'g', -1, 64) + ":" + strconv.FormatFloat(s.Val, 'g', -1, 64)
		}
		return s.Kind + ":" + strconv.FormatFloat(s.Frac, 'g', -1, 64)
	case SplitLeave, SplitKFold:
		return s.Kind + ":" + strconv.Itoa(s.K)
	}
	return s.Kind
}

// Apply splits d as s describes: one Split, or K splits for "kfold".
func (s SplitSpec) Apply(d *Dataset, seed uint64) ([]Split, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("ratings: split %q: %w: %v", s.String(), ErrBadParameter, err)
	}
	var (
		sp  Split
		err error
	)
	switch s.Kind {
	case SplitRandom:
		if s.Val > 0 {
			return holdoutVal(d, s.Frac, s.Val, seed)
		}
		sp, err = Holdout(d, s.Frac, seed)
	case SplitLeave:
		sp, err = LeaveKOut(d, s.K, seed)
	case SplitLOO:
		sp, err = LeaveOneOut(d, seed)
	case SplitKFold:
		return KFold(d, s.K, seed)
	}
	if err != nil {
		return nil, err
	}
	return []Split{sp}, nil
}

// holdoutVal is the "random:F:V" split: a random test set of the
// fraction 1 − F − V of the ratings, then a random validation part of V
// out of the rest, which is dropped; the training set is the remaining F.
func holdoutVal(d *Dataset, frac, val float64, seed uint64) ([]Split, error) {
	outer, err := Holdout(d, frac+val, seed)
	if err != nil {
		return nil, err
	}
	inner, err := Holdout(outer.Train, frac/(frac+val), seed^streamValidation)
	if err != nil {
		return nil, err
	}
	return []Split{{Train: inner.Train, Test: outer.Test}}, nil
}
