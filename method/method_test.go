package method_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// realData returns a split of the embedded ml-latest-small data.
func realData(t *testing.T) (train, test *ratings.Dataset) {
	t.Helper()
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ratings.Holdout(d, 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s.Train, s.Test
}

func TestEveryMethodFitsAndPredictsOnScale(t *testing.T) {
	train, test := realData(t)
	mean := eval.Rating(mustFit(t, "mean", train, nil), test).RMSE
	for _, s := range method.All() {
		t.Run(s.Name, func(t *testing.T) {
			if method.RanksOnly(s.Name) {
				t.Skip("ranking method: scores, not ratings (tested by AUC in sdcf_test.go)")
			}
			p := method.Params{}
			if s.Has("threshold") {
				p["threshold"] = "min" // sampling keeps every rating when all ε are large
			}
			if s.Has("epochs") {
				p["epochs"] = "10"
			}
			// Every ε of the method's privacy specification at 1000: nearly
			// no noise, so the method must learn.
			// (eps-c, eps-m, eps-l are PDP-PMF's group budgets; HDPMF's
			// eps-uc and the like are weights in (0, 1] and stay.)
			for _, name := range []string{"eps", "eps-c", "eps-m", "eps-l"} {
				if s.Has(name) {
					p[name] = "1000"
				}
			}
			m, res, err := method.Fit(context.Background(), s.Name, train, p, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k := range test.Len() {
				v := m.Predict(test.Users[k], test.Items[k])
				if !train.Scale.Contains(v) && !(v >= train.Scale.Min && v <= train.Scale.Max) {
					t.Fatalf("prediction %v off the scale %v", v, train.Scale)
				}
			}
			if got := len(m.ScoreItems(0, nil)); s.Name != "mean" && got != train.NumItems() {
				t.Errorf("ScoreItems gave %d scores, want %d", got, train.NumItems())
			}
			if (res.Privacy.Unit == "none") != (s.Claim.Unit == "none") {
				t.Errorf("result privacy %+v disagrees with the claim %+v", res.Privacy, s.Claim)
			}
			if s.Claim.Unit != "none" && !(res.Privacy.EpsTotal > 0) {
				t.Errorf("private method reports ε total %v", res.Privacy.EpsTotal)
			}
			rmse := eval.Rating(m, test).RMSE
			if s.Name != "mean" && s.Name != "dp-globalavg" && !(rmse < mean) {
				t.Errorf("test RMSE %.4f does not beat the global mean's %.4f", rmse, mean)
			}
		})
	}
}

func mustFit(t *testing.T, name string, train *ratings.Dataset, p method.Params) method.Model {
	t.Helper()
	m, _, err := method.Fit(context.Background(), name, train, p, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParamErrors(t *testing.T) {
	train, _ := realData(t)
	tests := []struct {
		name   string
		method string
		p      method.Params
	}{
		{"unknown parameter", "mf", method.Params{"eps": "1"}},
		{"not a number", "mf", method.Params{"lr": "fast"}},
		{"not an integer", "mf", method.Params{"dim": "2.5"}},
		{"not a bool", "mf", method.Params{"biased": "maybe"}},
		{"invalid config", "mf", method.Params{"dim": "0"}},
		{"negative shrink", "itemavg", method.Params{"shrink": "-1"}},
		{"zero epsilon", "dp-itemavg", method.Params{"eps": "0"}},
		{"NaN epsilon", "dp-itemavg", method.Params{"eps": "NaN"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := method.Fit(context.Background(), tc.method, train, tc.p, 1, nil)
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
	if _, _, err := method.Fit(context.Background(), "nope", train, nil, 1, nil); err == nil {
		t.Error("unknown method: no error")
	}
	_, _, err := method.Fit(context.Background(), "mf", train, method.Params{"lr": "x"}, 1, nil)
	if !errors.Is(err, method.ErrParam) {
		t.Errorf("bad lr: %v does not wrap ErrParam", err)
	}
}

func TestDPItemAvgNoiseShrinksWithEpsilon(t *testing.T) {
	train, test := realData(t)
	rmse := func(eps string) float64 {
		var s float64
		for seed := range uint64(5) {
			m, _, err := method.Fit(context.Background(), "dp-itemavg", train, method.Params{"eps": eps}, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			s += eval.Rating(m, test).RMSE
		}
		return s / 5
	}
	lo, hi := rmse("0.05"), rmse("100")
	exact := eval.Rating(mustFit(t, "itemavg", train, nil), test).RMSE
	if !(lo > hi) || math.Abs(hi-exact) > 0.01 {
		t.Errorf("RMSE at ε 0.05 = %.4f, at ε 100 = %.4f, exact item means %.4f", lo, hi, exact)
	}
}
