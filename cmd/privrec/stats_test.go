package main

import (
	"encoding/json"
	"maps"
	"math"
	"testing"
)

// TestFiniteStats: evaluate --json keeps a method's finite stats and
// drops NaN and infinities, which JSON cannot hold.
func TestFiniteStats(t *testing.T) {
	for _, c := range []struct {
		in   map[string]float64
		want map[string]float64
	}{
		{nil, nil},
		{map[string]float64{"eps_total_paper": 102, "eps_total": math.Inf(1), "x": math.NaN()}, map[string]float64{"eps_total_paper": 102}},
		{map[string]float64{"x": math.Inf(-1)}, nil},
	} {
		got := finiteStats(c.in)
		if !maps.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("finiteStats(%v) = %v, want %v", c.in, got, c.want)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("finiteStats(%v) does not marshal: %v", c.in, err)
		}
	}
}
