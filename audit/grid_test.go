package audit

import (
	"context"
	"testing"

	"github.com/privrec/privrec/ratings"
)

func TestOnGrid(t *testing.T) {
	half := ratings.Scale{Min: 0.5, Max: 5, Step: 0.5}
	stars := ratings.Scale{Min: 1, Max: 5, Step: 1}
	for _, c := range []struct {
		name string
		sc   ratings.Scale
		r    float64
		want bool
	}{
		{"on a half star", half, 3.5, true},
		{"within tolerance", half, 3.505, true},
		{"just outside tolerance", half, 3.52, false},
		{"between grid points", half, 3.25, false},
		{"on the minimum", half, 0.5, true},
		{"below the scale", half, 0, false},
		{"above the scale", half, 5.5, false},
		{"whole stars only", stars, 3.5, false},
		{"whole star", stars, 2.995, true},
		{"no step: no grid", ratings.Scale{Min: 1, Max: 5}, 3, false},
	} {
		if got := onGrid(c.sc, c.r, gridTol); got != c.want {
			t.Errorf("%s: onGrid(%g) = %v, want %v", c.name, c.r, got, c.want)
		}
	}
}

// TestGridControlsBroken runs the grid attack's controls on small
// synthetic data: SGLD MF at temperature 0 gives existence away entirely,
// and SDMF at temperature 0 (fakes present) still beats SDMF's existence
// bound through the grid; no finding row runs (method filter).
func TestGridControlsBroken(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 80, Items: 150, Rank: 3, PerUser: 25, MinPerUser: 10, Noise: 0.3}, 7)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Config{Data: d, Quick: true, Seed: 2, Attack: "grid", Method: "sgld-mf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d rows, want the 2 controls", len(rep.Results))
	}
	for _, r := range rep.Results {
		t.Log(r.line())
		if r.Role != Control || r.Status != Broken {
			t.Errorf("%s: %s, want a broken control", r.name(), r.Status)
		}
		if !(r.Lo > r.Bound) || r.N == 0 {
			t.Errorf("%s: interval [%.4g, %.4g] does not clear bound %.4g (n = %d)", r.name(), r.Lo, r.Hi, r.Bound, r.N)
		}
	}
	if r := rep.Results[0]; r.Method != "sgld-mf" || !(r.Value > 0.95) {
		t.Errorf("%s: accuracy %.4g, want > 0.95 (every rated item is sent, on the grid)", r.name(), r.Value)
	}
}
