package eval

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/privrec/privrec/ratings"
)

// Sentinel errors; returned errors wrap them with details.
var (
	// ErrLength reports slices whose lengths differ.
	ErrLength = errors.New("eval: length mismatch")
	// ErrTooFew reports too few observations for a statistic.
	ErrTooFew = errors.New("eval: too few observations")
)

// Predictor predicts the rating of user u for item i (dense indices).
type Predictor interface {
	Predict(u, i int32) float32
}

// Errors holds the prediction errors over N (prediction, truth) pairs. With
// N = 0 the three errors are NaN.
type Errors struct {
	RMSE, MSE, MAE float64
	N              int
}

// String formats the errors as "RMSE 0.8612 MAE 0.6750 (n=100000)".
func (e Errors) String() string {
	return fmt.Sprintf("RMSE %.4f MAE %.4f (n=%d)", e.RMSE, e.MAE, e.N)
}

// errAcc accumulates squared and absolute errors in float64.
type errAcc struct {
	sq, abs float64
	n       int
}

func (a *errAcc) add(pred, truth float32) {
	d := float64(pred) - float64(truth)
	a.sq += d * d
	a.abs += math.Abs(d)
	a.n++
}

func (a *errAcc) errors() Errors {
	if a.n == 0 {
		nan := math.NaN()
		return Errors{RMSE: nan, MSE: nan, MAE: nan}
	}
	mse := a.sq / float64(a.n)
	return Errors{RMSE: math.Sqrt(mse), MSE: mse, MAE: a.abs / float64(a.n), N: a.n}
}

// Compare returns the errors of pred[k] against truth[k]. It fails with
// ErrLength if the slices differ in length.
func Compare(pred, truth []float32) (Errors, error) {
	if len(pred) != len(truth) {
		return Errors{}, fmt.Errorf("%w: %d predictions for %d true ratings", ErrLength, len(pred), len(truth))
	}
	var a errAcc
	for k := range pred {
		a.add(pred[k], truth[k])
	}
	return a.errors(), nil
}

// Rating returns the errors of p's predictions for every rating in test.
// Predictions are used as returned; a model that should clamp to the rating
// scale does so itself.
func Rating(p Predictor, test *ratings.Dataset) Errors {
	var a errAcc
	for k, v := range test.Values {
		a.add(p.Predict(test.Users[k], test.Items[k]), v)
	}
	return a.errors()
}

// ErrorCDF returns, for each threshold t, the fraction of test ratings whose
// absolute prediction error |p − r| is at most t (the error CDF of
// PDP-PMF, Fig. 3). Thresholds need not be sorted. A NaN prediction counts as
// an error above every threshold. With an empty test set every fraction is
// NaN.
func ErrorCDF(p Predictor, test *ratings.Dataset, thresholds []float64) []float64 {
	out := make([]float64, len(thresholds))
	n := test.Len()
	if n == 0 {
		for j := range out {
			out[j] = math.NaN()
		}
		return out
	}
	errs := make([]float64, n)
	for k, v := range test.Values {
		errs[k] = math.Abs(float64(p.Predict(test.Users[k], test.Items[k])) - float64(v))
	}
	slices.Sort(errs) // NaNs first
	valid := errs[sort.Search(n, func(k int) bool { return !math.IsNaN(errs[k]) }):]
	for j, t := range thresholds {
		c := sort.Search(len(valid), func(k int) bool { return valid[k] > t })
		out[j] = float64(c) / float64(n)
	}
	return out
}
