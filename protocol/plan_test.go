package protocol

import (
	"testing"

	"github.com/privrec/privrec/ratings"
)

// TestPlanDigest: the digest is a fixed function of the plan (a golden
// value, so that the browser's copy and the command's agree across
// releases), does not depend on the configuration's map order, and
// changes with each part of the plan, including where one item ID ends
// and the next begins.
func TestPlanDigest(t *testing.T) {
	sc := ratings.Scale{Min: 1, Max: 5, Step: 1}
	base := func() (string, map[string]string, ratings.Scale, []string) {
		return "hdpmf", map[string]string{"epochs": "2", "eps": "1", "secagg": "masked"}, sc, []string{"a", "b", "c"}
	}
	m, c, s, it := base()
	d0 := PlanDigest(m, c, s, it)
	const golden = "a6c5af26481eedc2962fe5f045b0927f0306dcb804a92c66f0d14b82ef473abb"
	if len(d0) != 64 {
		t.Fatalf("digest %q, want 64 hex digits", d0)
	}
	if d0 != golden {
		t.Fatalf("digest %s, want %s: the encoding changed (a client's memory would forget its plans)", d0, golden)
	}
	// The same plan, its map built in another order.
	c2 := map[string]string{}
	for _, k := range []string{"secagg", "eps", "epochs"} {
		c2[k] = c[k]
	}
	if d := PlanDigest(m, c2, s, it); d != d0 {
		t.Fatalf("the same plan digests to %s and %s", d0, d)
	}
	for _, tc := range []struct {
		name  string
		spoil func(m *string, c map[string]string, s *ratings.Scale, it *[]string)
	}{
		{"method", func(m *string, _ map[string]string, _ *ratings.Scale, _ *[]string) { *m = "dpmf" }},
		{"config value", func(_ *string, c map[string]string, _ *ratings.Scale, _ *[]string) { c["epochs"] = "20" }},
		{"config key", func(_ *string, c map[string]string, _ *ratings.Scale, _ *[]string) { c["seed"] = "1" }},
		{"key/value border", func(_ *string, c map[string]string, _ *ratings.Scale, _ *[]string) {
			delete(c, "eps")
			c["ep"] = "s1"
		}},
		{"scale", func(_ *string, _ map[string]string, s *ratings.Scale, _ *[]string) { s.Step = 0.5 }},
		{"item order", func(_ *string, _ map[string]string, _ *ratings.Scale, it *[]string) { *it = []string{"b", "a", "c"} }},
		{"item border", func(_ *string, _ map[string]string, _ *ratings.Scale, it *[]string) { *it = []string{"ab", "c"} }},
		{"one more item", func(_ *string, _ map[string]string, _ *ratings.Scale, it *[]string) { *it = append(*it, "d") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c, s, it := base()
			tc.spoil(&m, c, &s, &it)
			if d := PlanDigest(m, c, s, it); d == d0 {
				t.Fatalf("another %s, the same digest %s", tc.name, d)
			}
		})
	}
}
