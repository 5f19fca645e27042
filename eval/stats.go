package eval

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Summary is the mean and sample standard deviation of N observations.
type Summary struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	N    int     `json:"n"`
}

// Summarize returns the mean and the sample standard deviation (divisor
// n−1) of xs. A single observation has Std 0 (no spread was observed; N = 1
// tells the reader there was no estimate); no observations give NaN for both.
func Summarize(xs []float64) Summary {
	switch len(xs) {
	case 0:
		return Summary{Mean: math.NaN(), Std: math.NaN()}
	case 1:
		return Summary{Mean: xs[0], N: 1}
	}
	m, v := stat.MeanVariance(xs, nil)
	return Summary{Mean: m, Std: math.Sqrt(v), N: len(xs)}
}

// String formats s as "0.8612 ± 0.0031 (n=5)", or "0.8612 (n=1)" for a
// single observation.
func (s Summary) String() string {
	if s.N == 1 {
		return fmt.Sprintf("%.4f (n=1)", s.Mean)
	}
	return fmt.Sprintf("%.4f ± %.4f (n=%d)", s.Mean, s.Std, s.N)
}

// TTest is the result of a paired t-test.
type TTest struct {
	// T is the t statistic, mean(a−b) / (sd(a−b)/√n).
	T float64
	// P is the two-sided p-value.
	P float64
	// DF is the degrees of freedom, n−1.
	DF int
	// MeanDiff is mean(a−b).
	MeanDiff float64
}

// PairedTTest runs a two-sided paired t-test of the hypothesis that the
// pairs (a[k], b[k]) have equal means. It fails with ErrLength if the slices
// differ in length and with ErrTooFew if there are fewer than two pairs. If
// all differences are equal the statistic is degenerate: T = 0, P = 1 when
// they are zero, T = ±Inf, P = 0 otherwise.
func PairedTTest(a, b []float64) (TTest, error) {
	if len(a) != len(b) {
		return TTest{}, fmt.Errorf("%w: paired t-test of %d and %d observations", ErrLength, len(a), len(b))
	}
	n := len(a)
	if n < 2 {
		return TTest{}, fmt.Errorf("%w: paired t-test needs at least 2 pairs, have %d", ErrTooFew, n)
	}
	d := make([]float64, n)
	for k := range a {
		d[k] = a[k] - b[k]
	}
	m, v := stat.MeanVariance(d, nil)
	r := TTest{DF: n - 1, MeanDiff: m}
	se := math.Sqrt(v / float64(n))
	switch {
	case se == 0 && m == 0:
		r.T, r.P = 0, 1
	case se == 0:
		r.T, r.P = math.Copysign(math.Inf(1), m), 0
	default:
		r.T = m / se
		dist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}
		r.P = min(1, 2*dist.Survival(math.Abs(r.T)))
	}
	return r, nil
}

// Repeat calls run once per seed, in order and one at a time (each run is
// expected to use all cores itself), and collects the named metrics each run
// returns. It returns the per-metric summaries and the raw values, in seed
// order.
//
// Every run must return the same metric names. Repeat stops at the first
// failing run, at a run whose metric names differ from the first run's, or
// when ctx is done; it then returns the results of the runs completed so far
// together with an error naming the seed.
func Repeat(ctx context.Context, seeds []uint64, run func(ctx context.Context, seed uint64) (map[string]float64, error)) (map[string]Summary, map[string][]float64, error) {
	values := make(map[string][]float64)
	var err error
	for j, seed := range seeds {
		if e := ctx.Err(); e != nil {
			err = fmt.Errorf("eval: repeat stopped before run %d (seed %d): %w", j+1, seed, e)
			break
		}
		m, e := run(ctx, seed)
		if e != nil {
			err = fmt.Errorf("eval: run %d (seed %d): %w", j+1, seed, e)
			break
		}
		if j > 0 && !sameKeys(m, values) {
			err = fmt.Errorf("eval: run %d (seed %d) returned metrics %v, run 1 returned %v", j+1, seed, sortedKeys(m), sortedKeys(values))
			break
		}
		for name, x := range m {
			values[name] = append(values[name], x)
		}
	}
	sums := make(map[string]Summary, len(values))
	for name, xs := range values {
		sums[name] = Summarize(xs)
	}
	return sums, values, err
}

func sameKeys[A, B any](a map[string]A, b map[string]B) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
