package eval

import (
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// constPredictor predicts the same rating everywhere.
type constPredictor float32

func (c constPredictor) Predict(u, i int32) float32 { return float32(c) }

// tableScorer holds one score row per user; it also serves as a Predictor.
type tableScorer [][]float32

func (t tableScorer) ScoreItems(u int32, dst []float32) []float32 {
	return append(dst[:0], t[u]...)
}

func (t tableScorer) Predict(u, i int32) float32 { return t[u][i] }

// dataset builds a Stars5 dataset over nu users and ni items from
// (user, item, value) triples.
func dataset(nu, ni int, triples ...[3]float32) *ratings.Dataset {
	d := &ratings.Dataset{Name: "test", Scale: ratings.Stars5,
		UserIDs: make([]string, nu), ItemIDs: make([]string, ni)}
	for _, t := range triples {
		d.Users = append(d.Users, int32(t[0]))
		d.Items = append(d.Items, int32(t[1]))
		d.Values = append(d.Values, t[2])
	}
	return d
}

func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= tol
}

func TestCompare(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name        string
		pred, truth []float32
		want        Errors
	}{
		// errors 0, −1, −2, 0: MSE = 5/4, MAE = 3/4.
		{"mixed", []float32{1, 2, 3, 4}, []float32{1, 3, 5, 4}, Errors{RMSE: math.Sqrt(1.25), MSE: 1.25, MAE: 0.75, N: 4}},
		{"one", []float32{2.5}, []float32{1}, Errors{RMSE: 1.5, MSE: 2.25, MAE: 1.5, N: 1}},
		{"perfect", []float32{3, 4}, []float32{3, 4}, Errors{N: 2}},
		{"empty", nil, nil, Errors{RMSE: nan, MSE: nan, MAE: nan}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compare(tc.pred, tc.truth)
			if err != nil {
				t.Fatal(err)
			}
			if got.N != tc.want.N || !near(got.RMSE, tc.want.RMSE, 1e-12) || !near(got.MSE, tc.want.MSE, 1e-12) || !near(got.MAE, tc.want.MAE, 1e-12) {
				t.Errorf("Compare = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := Compare([]float32{1}, []float32{1, 2}); !errors.Is(err, ErrLength) {
		t.Errorf("length mismatch: err = %v, want ErrLength", err)
	}
}

func TestRating(t *testing.T) {
	test := dataset(2, 3, [3]float32{0, 0, 1}, [3]float32{0, 1, 3}, [3]float32{1, 2, 5}, [3]float32{1, 0, 4})
	// Predicting 3: errors 2, 0, −2, −1 → MSE 9/4, MAE 5/4.
	got := Rating(constPredictor(3), test)
	if got.N != 4 || !near(got.MSE, 2.25, 1e-12) || !near(got.RMSE, 1.5, 1e-12) || !near(got.MAE, 1.25, 1e-12) {
		t.Errorf("Rating = %+v, want RMSE 1.5 MSE 2.25 MAE 1.25 N 4", got)
	}
	// The table predictor must be asked for the right (user, item).
	tab := tableScorer{{1, 3, 0}, {4, 0, 4.5}}
	got = Rating(tab, test) // errors 0, 0, −0.5, 0
	if !near(got.MSE, 0.25/4, 1e-12) || !near(got.MAE, 0.5/4, 1e-12) {
		t.Errorf("Rating(table) = %+v, want MSE 0.0625 MAE 0.125", got)
	}
	if got := Rating(constPredictor(3), dataset(1, 1)); got.N != 0 || !math.IsNaN(got.RMSE) {
		t.Errorf("Rating(empty) = %+v, want N 0 and NaN", got)
	}
}

func TestErrorCDF(t *testing.T) {
	test := dataset(2, 3, [3]float32{0, 0, 1}, [3]float32{0, 1, 3}, [3]float32{1, 2, 5}, [3]float32{1, 0, 4})
	// |errors| predicting 3: 2, 0, 2, 1.
	tests := []struct {
		name       string
		p          Predictor
		thresholds []float64
		want       []float64
	}{
		{"sorted", constPredictor(3), []float64{0, 0.5, 1, 1.99, 2, 10}, []float64{0.25, 0.25, 0.5, 0.5, 1, 1}},
		{"unsorted", constPredictor(3), []float64{2, -1, 1}, []float64{1, 0, 0.5}},
		{"nan", constPredictor(float32(math.NaN())), []float64{0, math.Inf(1)}, []float64{0, 0}},
		{"none", constPredictor(3), nil, []float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ErrorCDF(tc.p, test, tc.thresholds)
			if len(got) != len(tc.want) {
				t.Fatalf("ErrorCDF = %v, want %v", got, tc.want)
			}
			for j := range got {
				if got[j] != tc.want[j] {
					t.Errorf("ErrorCDF = %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
	if got := ErrorCDF(constPredictor(3), dataset(1, 1), []float64{1}); !math.IsNaN(got[0]) {
		t.Errorf("ErrorCDF(empty) = %v, want [NaN]", got)
	}
}
