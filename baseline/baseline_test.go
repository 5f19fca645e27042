package baseline

import (
	"fmt"
	"testing"

	"github.com/privrec/privrec/ratings"
)

func tiny() *ratings.Dataset {
	return &ratings.Dataset{
		Scale:   ratings.Stars5,
		Users:   []int32{0, 0, 1, 1, 2},
		Items:   []int32{0, 1, 0, 1, 0},
		Values:  []float32{5, 1, 3, 1, 4},
		UserIDs: []string{"a", "b", "c"},
		ItemIDs: []string{"x", "y", "z"},
	}
}

func TestItemMean(t *testing.T) {
	d := tiny() // global mean 2.8
	tests := []struct {
		shrink float64
		item   int32
		want   float32
	}{
		{0, 0, 4},                   // (5+3+4)/3
		{0, 1, 1},                   // (1+1)/2
		{0, 2, 2.8},                 // no ratings: global mean
		{2, 1, (1 + 1 + 2*2.8) / 4}, // two pseudo-ratings at the mean
		{0, -1, 2.8},                // unknown item
		{0, 99, 2.8},                // unknown item
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("shrink%g/item%d", tc.shrink, tc.item), func(t *testing.T) {
			got := FitItemMean(d, tc.shrink).Predict(0, tc.item)
			if diff := got - tc.want; diff > 1e-5 || diff < -1e-5 {
				t.Errorf("Predict = %g, want %g", got, tc.want)
			}
		})
	}
}

func TestMean(t *testing.T) {
	if got := FitMean(tiny()).Predict(7, 7); got < 2.79999 || got > 2.80001 {
		t.Errorf("Predict = %g, want 2.8", got)
	}
}

func ExampleFitItemMean() {
	d := &ratings.Dataset{
		Scale:   ratings.Stars5,
		Users:   []int32{0, 1, 1},
		Items:   []int32{0, 0, 1},
		Values:  []float32{4, 5, 2},
		UserIDs: []string{"alice", "bob"},
		ItemIDs: []string{"film", "show"},
	}
	m := FitItemMean(d, 0)
	fmt.Println(m.Predict(0, 0), m.Predict(0, 1))
	// Output: 4.5 2
}
