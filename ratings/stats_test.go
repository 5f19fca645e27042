package ratings

import (
	"math"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	// 4 users (user 3 without ratings), 3 items; counts per user 3, 1, 2
	// and per item 2, 2, 2.
	ts := []triple{{0, 0, 5}, {0, 1, 4}, {0, 2, 4}, {1, 0, 1}, {2, 1, 2}, {2, 2, 5}}
	d := fromTriples(t, 4, 3, ts)
	s := Describe(d)
	var sum, sq float64
	for _, x := range ts {
		sum += float64(x.v)
	}
	mean := sum / float64(len(ts))
	for _, x := range ts {
		sq += (float64(x.v) - mean) * (float64(x.v) - mean)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"users", float64(s.Users), 4},
		{"active users", float64(s.ActiveUsers), 3},
		{"items", float64(s.Items), 3},
		{"active items", float64(s.ActiveItems), 3},
		{"ratings", float64(s.Ratings), float64(len(ts))},
		{"density", s.Density, float64(len(ts)) / 12},
		{"mean", s.Mean, mean},
		{"std", s.Std, math.Sqrt(sq / float64(len(ts)))},
		{"per user min", float64(s.PerUser.Min), 1},
		{"per user median", float64(s.PerUser.Median), 2},
		{"per user max", float64(s.PerUser.Max), 3},
		{"per user mean", s.PerUser.Mean, 2},
		{"per item min", float64(s.PerItem.Min), 2},
		{"per item max", float64(s.PerItem.Max), 2},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
	if len(s.Hist) != 5 {
		t.Fatalf("%d histogram bins, want 5 (one per star)", len(s.Hist))
	}
	total := 0
	for j, b := range s.Hist {
		want := 0
		for _, x := range ts {
			if x.v == float32(j+1) {
				want++
			}
		}
		if b.Lo != float32(j+1) || b.Count != want {
			t.Errorf("bin %d = %+v, want value %d count %d", j, b, j+1, want)
		}
		total += b.Count
	}
	if total != len(ts) {
		t.Errorf("histogram counts %d ratings, want %d", total, len(ts))
	}
	out := s.String()
	for _, want := range []string{"dataset   hand", "users     4 (3 with ratings)", "ratings   6", "per user", "per item"} {
		if !strings.Contains(out, want) {
			t.Errorf("String() lacks %q:\n%s", want, out)
		}
	}
}

func TestDescribeContinuousAndEmpty(t *testing.T) {
	d, err := Synthetic(SyntheticConfig{Users: 40, Items: 30, Rank: 2, PerUser: 5, Noise: 1, Scale: Scale{Min: 0, Max: 1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := Describe(d)
	if len(s.Hist) != 10 {
		t.Fatalf("%d bins for a continuous scale, want 10", len(s.Hist))
	}
	total := 0
	for _, b := range s.Hist {
		total += b.Count
	}
	if total != d.Len() {
		t.Errorf("histogram counts %d ratings, want %d", total, d.Len())
	}
	e := Describe(fromTriples(t, 2, 2, nil))
	if e.Ratings != 0 || e.ActiveUsers != 0 || e.PerUser != (CountSummary{}) || math.IsNaN(e.Mean) {
		t.Errorf("empty dataset: %+v", e)
	}
	_ = e.String() // must not panic
}
