// Package kstest is the one-sample Kolmogorov–Smirnov test that privrec's
// tests use to check a sampler, or a sum of noise shares, against the exact
// distribution it claims.
//
// A test draws n values, computes Distance to the claimed CDF and compares
// it with a critical value c(α)/√n (1.63 at α = 0.01, 1.95 at α = 0.001);
// to show that the test has power it also checks that a wrong CDF, a scale
// 15% or 30% off, is rejected.
package kstest

import (
	"math"
	"slices"
)

// Distance returns the Kolmogorov–Smirnov statistic of xs against cdf: the
// largest distance sup |F_n(x) − F(x)| between the empirical CDF of xs and
// cdf. xs is not modified.
func Distance(xs []float64, cdf func(float64) float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := float64(len(s))
	var d float64
	for i, x := range s {
		f := cdf(x)
		d = math.Max(d, math.Max(f-float64(i)/n, float64(i+1)/n-f))
	}
	return d
}

// LaplaceCDF returns the CDF of the Laplace distribution with mean 0 and
// scale b.
func LaplaceCDF(b float64) func(float64) float64 {
	return func(x float64) float64 {
		if x < 0 {
			return 0.5 * math.Exp(x/b)
		}
		return 1 - 0.5*math.Exp(-x/b)
	}
}
