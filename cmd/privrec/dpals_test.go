package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestEvaluateDPALSPrivacy checks the issue 23 contract: `privrec
// evaluate --method dp-als --eps E --delta D --json` reports a user-level
// claim whose total ε is E at δ D, with every release listed.
func TestEvaluateDPALSPrivacy(t *testing.T) {
	data := syntheticTSV(t, 3)
	for _, tc := range []struct {
		method     string
		eps, delta string
		releases   int
	}{
		{"dp-als", "1", "1e-6", 1 + 8*2 + 1}, // mean, eight bias rounds, the warm start
		{"dp-biases", "10", "1e-5", 1 + 8*2}, // mean, eight bias rounds
	} {
		t.Run(tc.method, func(t *testing.T) {
			out, _, err := run(t, "evaluate", "--data", data, "--scale", "1,5,1", "--split", "random:0.8",
				"--method", tc.method, "--eps", tc.eps, "--delta", tc.delta, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				RMSE    float64       `json:"rmse"`
				Privacy model.Privacy `json:"privacy"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v in %s", err, out)
			}
			p := r.Privacy
			var eps float64
			_ = json.Unmarshal([]byte(tc.eps), &eps)
			if p.Unit != "user" || p.Trusted != "nobody" || math.Abs(p.EpsTotal-eps) > 1e-6*eps || p.Delta != mustFloat(t, tc.delta) {
				t.Errorf("privacy %+v, want unit user, trusted nobody, ε %s, δ %s", p, tc.eps, tc.delta)
			}
			if len(p.Releases) != tc.releases {
				t.Errorf("%d releases, want %d: %+v", len(p.Releases), tc.releases, p.Releases)
			}
			var rho float64
			for _, x := range p.Releases {
				rho += x.Rho
			}
			if rho <= 0 || !strings.Contains(p.Note, "releases") {
				t.Errorf("releases' ρ %g, note %q", rho, p.Note)
			}
			if !(r.RMSE > 0 && r.RMSE < 2) {
				t.Errorf("rmse %g", r.RMSE)
			}
		})
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var x float64
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		t.Fatal(err)
	}
	return x
}
