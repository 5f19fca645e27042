package method_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
)

func TestBMFGibbsBeatsBaselines(t *testing.T) {
	train, test := realData(t)
	p := params{"dim": "10", "iters": "40"}
	m, res, err := fitText(context.Background(), "bmf-gibbs", train, p, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := eval.Rating(m, test).RMSE
	items := eval.Rating(mustFit(t, "itemavg", train, nil), test).RMSE
	sgd := eval.Rating(mustFit(t, "mf", train, nil), test).RMSE
	t.Logf("test RMSE: bmf-gibbs %.4f, mf %.4f, itemavg %.4f; stats %v", got, sgd, items, res.Stats)
	if !(got < items-0.05) || !(got < sgd+0.01) {
		t.Errorf("bmf-gibbs %.4f: want below itemavg %.4f − 0.05 and mf %.4f + 0.01", got, items, sgd)
	}
	if res.Stats["samples"] != 40 || res.Privacy.Unit != "none" {
		t.Errorf("result %+v: want 40 samples, no privacy", res)
	}
}

func TestBMFAndGlobalAvgParamErrors(t *testing.T) {
	train, _ := realData(t)
	tests := []struct {
		name   string
		method string
		p      params
	}{
		{"zero dim", "bmf-gibbs", params{"dim": "0"}},
		{"iters not an integer", "bmf-gibbs", params{"iters": "many"}},
		{"negative init", "bmf-gibbs", params{"init": "-0.1"}},
		{"burnin too long", "bmf-gibbs", params{"iters": "5", "burnin": "5"}},
		{"unknown parameter", "bmf-gibbs", params{"epochs": "5"}},
		{"zero epsilon", "dp-globalavg", params{"eps": "0"}},
		{"infinite epsilon", "dp-globalavg", params{"eps": "+Inf"}},
		{"NaN epsilon", "dp-globalavg", params{"eps": "NaN"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := fitText(context.Background(), tc.method, train, tc.p, 1, nil)
			if !errors.Is(err, method.ErrParam) {
				t.Errorf("error %v does not wrap ErrParam", err)
			}
		})
	}
}

// The DP global average's error around the exact mean shrinks as ε grows,
// and its claim reports the ε it spent.
func TestDPGlobalAvgNoiseShrinksWithEpsilon(t *testing.T) {
	train, _ := realData(t)
	exact := train.Mean()
	spread := func(eps string) float64 {
		var s float64
		const n = 200
		for seed := range uint64(n) {
			m, res, err := fitText(context.Background(), "dp-globalavg", train, params{"eps": eps}, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Privacy.EpsTotal <= 0 || res.Privacy.Unit != "rating value" {
				t.Fatalf("privacy %+v", res.Privacy)
			}
			v := float64(m.Predict(0, 0))
			if !train.Scale.Contains(float32(v)) && (v < float64(train.Scale.Min) || v > float64(train.Scale.Max)) {
				t.Fatalf("prediction %v off the scale", v)
			}
			s += (v - exact) * (v - exact)
		}
		return math.Sqrt(s / n)
	}
	e1, e2, e3 := spread("0.0001"), spread("0.01"), spread("1")
	t.Logf("RMS error of the mean: ε 1e-4 %.4g, ε 0.01 %.4g, ε 1 %.4g", e1, e2, e3)
	if !(e1 > e2 && e2 > e3) || e3 > 0.001 {
		t.Errorf("errors %.4g, %.4g, %.4g do not shrink with ε to below 0.001", e1, e2, e3)
	}
}
