package eval

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		xs   []float64
		want Summary
		str  string
	}{
		// Mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32; sample variance 32/7.
		{"eight", []float64{2, 4, 4, 4, 5, 5, 7, 9}, Summary{Mean: 5, Std: math.Sqrt(32.0 / 7), N: 8}, "5.0000 ± 2.1381 (n=8)"},
		// Mean 0.86; deviations ±0.01, 0 → variance 0.0002/2.
		{"three", []float64{0.85, 0.86, 0.87}, Summary{Mean: 0.86, Std: 0.01, N: 3}, "0.8600 ± 0.0100 (n=3)"},
		{"one", []float64{0.8612}, Summary{Mean: 0.8612, Std: 0, N: 1}, "0.8612 (n=1)"},
		{"none", nil, Summary{Mean: nan, Std: nan}, "NaN ± NaN (n=0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.xs)
			if got.N != tc.want.N || !near(got.Mean, tc.want.Mean, 1e-12) || !near(got.Std, tc.want.Std, 1e-12) {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String = %q, want %q", s, tc.str)
			}
		})
	}
}

// Student's sleep data (Cushny & Peebles 1905; R's datasets::sleep): extra
// hours of sleep of 10 patients under two drugs.
var (
	sleep1 = []float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0}
	sleep2 = []float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4}
)

func TestPairedTTest(t *testing.T) {
	// Differences sleep1 − sleep2: −1.2 −2.4 −1.3 −1.3 0 −1.0 −1.8 −0.8 −4.6 −1.4.
	// Sum −15.8, mean −1.58. Sum of squares 38.58; SS = 38.58 − 10·1.58² = 13.616;
	// variance 13.616/9 = 1.5128889; se = √(1.5128889/10) = 0.3889587;
	// t = −1.58/0.3889587 = −4.0621, df = 9.
	// R: t.test(sleep1, sleep2, paired = TRUE) prints t = -4.0621, df = 9,
	// p-value = 0.002833.
	got, err := PairedTTest(sleep1, sleep2)
	if err != nil {
		t.Fatal(err)
	}
	if got.DF != 9 || !near(got.MeanDiff, -1.58, 1e-12) || !near(got.T, -4.0621, 5e-5) || !near(got.P, 0.002833, 5e-7) {
		t.Errorf("PairedTTest = %+v, want T -4.0621 P 0.002833 DF 9 MeanDiff -1.58", got)
	}
	// Independent route to p: for Student's t with ν degrees of freedom,
	// P(|T| > t) = I_{ν/(ν+t²)}(ν/2, 1/2), the regularized incomplete beta.
	nu := float64(got.DF)
	if p := mathext.RegIncBeta(nu/2, 0.5, nu/(nu+got.T*got.T)); !near(got.P, p, 1e-10) {
		t.Errorf("P = %.12f, incomplete beta gives %.12f", got.P, p)
	}
	// Swapping the samples flips the sign of T only.
	rev, _ := PairedTTest(sleep2, sleep1)
	if !near(rev.T, -got.T, 1e-12) || !near(rev.P, got.P, 1e-12) {
		t.Errorf("reversed: %+v, want T %g P %g", rev, -got.T, got.P)
	}
}

func TestPairedTTestEdges(t *testing.T) {
	tests := []struct {
		name    string
		a, b    []float64
		wantErr error
		t, p    float64
	}{
		{"length", []float64{1, 2}, []float64{1}, ErrLength, 0, 0},
		{"one pair", []float64{1}, []float64{2}, ErrTooFew, 0, 0},
		{"identical", []float64{1, 2, 3}, []float64{1, 2, 3}, nil, 0, 1},
		{"constant shift", []float64{2, 3, 4}, []float64{1, 2, 3}, nil, math.Inf(1), 0},
		// d = 1, 3: mean 2, sd √2, se 1, t = 2, df 1; P = 1 − 2·atan(2)/π (Cauchy).
		{"cauchy", []float64{1, 3}, []float64{0, 0}, nil, 2, 1 - 2*math.Atan(2)/math.Pi},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PairedTTest(tc.a, tc.b)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !near(got.T, tc.t, 1e-12) && got.T != tc.t || !near(got.P, tc.p, 1e-12) {
				t.Errorf("PairedTTest = %+v, want T %g P %g", got, tc.t, tc.p)
			}
		})
	}
}

func TestRepeat(t *testing.T) {
	fake := func(ctx context.Context, seed uint64) (map[string]float64, error) {
		return map[string]float64{"rmse": float64(seed) / 10, "auc": 1 - float64(seed)/10}, nil
	}
	sums, vals, err := Repeat(context.Background(), []uint64{1, 2, 3}, fake)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vals["rmse"], []float64{0.1, 0.2, 0.3}) {
		t.Errorf("rmse values = %v, want [0.1 0.2 0.3] in seed order", vals["rmse"])
	}
	if s := sums["rmse"]; s.N != 3 || !near(s.Mean, 0.2, 1e-12) || !near(s.Std, 0.1, 1e-12) {
		t.Errorf("rmse = %+v, want 0.2 ± 0.1 (n=3)", s)
	}
	if s := sums["auc"]; !near(s.Mean, 0.8, 1e-12) || len(sums) != 2 {
		t.Errorf("summaries = %v, want rmse and auc with auc mean 0.8", sums)
	}

	boom := errors.New("boom")
	failing := func(ctx context.Context, seed uint64) (map[string]float64, error) {
		if seed == 2 {
			return nil, boom
		}
		return fake(ctx, seed)
	}
	sums, vals, err = Repeat(context.Background(), []uint64{1, 2, 3}, failing)
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	if len(vals["rmse"]) != 1 || sums["rmse"].N != 1 {
		t.Errorf("after failure: values %v, want the one completed run", vals)
	}

	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	cancelling := func(ctx context.Context, seed uint64) (map[string]float64, error) {
		runs++
		cancel()
		return fake(ctx, seed)
	}
	_, vals, err = Repeat(ctx, []uint64{1, 2, 3}, cancelling)
	if !errors.Is(err, context.Canceled) || runs != 1 || len(vals["rmse"]) != 1 {
		t.Errorf("cancel: err %v, %d runs, values %v; want Canceled after 1 run", err, runs, vals)
	}

	mismatched := func(ctx context.Context, seed uint64) (map[string]float64, error) {
		m, _ := fake(ctx, seed)
		if seed == 3 {
			delete(m, "auc")
		}
		return m, nil
	}
	if _, vals, err = Repeat(context.Background(), []uint64{1, 2, 3}, mismatched); err == nil || len(vals["auc"]) != 2 {
		t.Errorf("mismatched metrics: err %v, values %v; want an error after 2 runs", err, vals)
	}
}
