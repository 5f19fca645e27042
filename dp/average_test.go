package dp

import (
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

func TestDPAverage(t *testing.T) {
	xs := make([]float32, 5000)
	for i := range xs {
		xs[i] = float32(1 + i%5) // mean 3
	}
	r := rng.New(13)
	var sum float64
	const reps = 400
	for range reps {
		sum += DPAverage(r, xs, 1, 5, 1)
	}
	if m := sum / reps; math.Abs(m-3) > 0.01 {
		t.Errorf("mean of DP averages %v, want ≈ 3", m)
	}
	// Tiny data: the noisy count is often ≤ 1 and the midpoint comes back.
	mid := 0
	for range 1000 {
		if DPAverage(r, xs[:1], 1, 5, 0.5) == 3 {
			mid++
		}
	}
	if mid == 0 || mid == 1000 {
		t.Errorf("midpoint returned %d of 1000 times for one rating at ε = 0.5", mid)
	}
}

func TestDPItemAverages(t *testing.T) {
	d := &ratings.Dataset{
		Scale:   ratings.Stars5,
		UserIDs: make([]string, 200),
		ItemIDs: make([]string, 3),
	}
	for u := range int32(200) {
		d.Users = append(d.Users, u, u)
		d.Items = append(d.Items, 0, 1)
		d.Values = append(d.Values, 5, 2)
	}
	avg, err := DPItemAverages(rng.New(1), d, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(avg) != 3 {
		t.Fatalf("len %d", len(avg))
	}
	if math.Abs(avg[0]-5) > 0.2 || math.Abs(avg[1]-2) > 0.2 {
		t.Errorf("item averages %v, want ≈ 5, 2", avg[:2])
	}
	for j, a := range avg {
		if a < 1 || a > 5 {
			t.Errorf("item %d average %v outside the scale", j, a)
		}
	}
	if _, err := DPItemAverages(rng.New(1), d, 0, nil); !errors.Is(err, ErrParam) {
		t.Errorf("ε = 0: error %v", err)
	}
}
