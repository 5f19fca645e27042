package method_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
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
	if testing.Short() {
		t.Skip("-short: every method fitted on ml-latest-small (95 s); go test without -short runs it")
	}
	train, test := realData(t)
	mean := eval.Rating(mustFit(t, "mean", train, nil), test).RMSE
	for _, s := range method.All() {
		t.Run(s.Name, func(t *testing.T) {
			if s.Ranks {
				t.Skip("ranking method: scores, not ratings (tested by AUC in sdcf_test.go)")
			}
			p := params{}
			if s.Has("threshold") {
				p["threshold"] = "min" // sampling keeps every rating when all ε are large
			}
			if s.Has("epochs") {
				p["epochs"] = "20"
				switch s.Name {
				case "sdmf", "sdmf-alpha-inf", "sgld-mf", "isgld", "sd-fm", "ldp-op-basic":
					// A round costs ~1 s here (every client computes over
					// every item); 6 beat the mean by 0.1 or more.
					p["epochs"] = "6"
				}
			}
			// HDPMF's heterogeneous weights stretch a conservative
			// rating to a tenth; with every weight 1 it is DPMF.
			for _, name := range []string{"f-uc", "f-um", "f-ic", "f-im"} {
				if s.Has(name) {
					p[name] = "0"
				}
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
			m, res, err := fitText(context.Background(), s.Name, train, p, 1, nil)
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

func mustFit(t *testing.T, name string, train *ratings.Dataset, p params) *model.Model {
	t.Helper()
	m, _, err := fitText(context.Background(), name, train, p, 1, nil)
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
		p      params
	}{
		{"unknown parameter", "mf", params{"eps": "1"}},
		{"not a number", "mf", params{"lr": "fast"}},
		{"not an integer", "mf", params{"dim": "2.5"}},
		{"not a bool", "mf", params{"biased": "maybe"}},
		{"invalid config", "mf", params{"dim": "0"}},
		{"negative shrink", "itemavg", params{"shrink": "-1"}},
		{"zero epsilon", "dp-itemavg", params{"eps": "0"}},
		{"NaN epsilon", "dp-itemavg", params{"eps": "NaN"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := fitText(context.Background(), tc.method, train, tc.p, 1, nil)
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
	if _, _, err := fitText(context.Background(), "nope", train, nil, 1, nil); err == nil {
		t.Error("unknown method: no error")
	}
	_, _, err := fitText(context.Background(), "mf", train, params{"lr": "x"}, 1, nil)
	if !errors.Is(err, method.ErrParam) {
		t.Errorf("bad lr: %v does not wrap ErrParam", err)
	}
}

func TestDPItemAvgNoiseShrinksWithEpsilon(t *testing.T) {
	train, test := realData(t)
	rmse := func(eps string) float64 {
		var s float64
		for seed := range uint64(5) {
			m, _, err := fitText(context.Background(), "dp-itemavg", train, params{"eps": eps}, seed, nil)
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

// TestErrorsKeepTheirIdentity checks that a cancelled run of every
// iterative method returns an error that wraps context.Canceled, and that
// a diverging run wraps ErrDiverged, so that the experiment runner can
// tell an interruption and a diverged setting from a failure.
func TestErrorsKeepTheirIdentity(t *testing.T) {
	train, _ := realData(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, s := range method.All() {
		if !s.Has("epochs") && !s.Has("iters") {
			continue // one pass, nothing to interrupt
		}
		t.Run("cancel/"+s.Name, func(t *testing.T) {
			_, _, err := s.Fit(ctx, train, s.New(), 1, nil)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled run: error %v does not wrap context.Canceled", err)
			}
			if errors.Is(err, method.ErrParam) {
				t.Errorf("cancelled run: error %v claims a bad parameter", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		p    params
	}{
		{"mf", params{"lr": "1000", "epochs": "5"}},
		{"pmf", params{"lr": "1e12", "epochs": "5", "momentum": "0"}},
		{"pdp-pmf", params{"lr": "1e12", "epochs": "5", "momentum": "0"}},
	} {
		t.Run("diverge/"+tc.name, func(t *testing.T) {
			_, _, err := fitText(context.Background(), tc.name, train, tc.p, 1, nil)
			if !errors.Is(err, method.ErrDiverged) {
				t.Errorf("error %v does not wrap ErrDiverged", err)
			}
		})
	}
}

// TestConfigsRoundTripAsText checks, for every method, that each field is
// bound to a field of the typed config (Field.Go), that the defaults read
// back from their text form unchanged (what flags and experiment files
// rely on), and that the JSON form is one valid object.
func TestConfigsRoundTripAsText(t *testing.T) {
	for _, s := range method.All() {
		t.Run(s.Name, func(t *testing.T) {
			def := s.New()
			fs := s.Fields(def)
			seen := map[string]bool{}
			for _, f := range fs {
				if seen[f.Name] {
					t.Errorf("parameter %s twice", f.Name)
				}
				seen[f.Name] = true
				if f.Go == "" && f.Name != "rescale" {
					t.Errorf("parameter %s is bound to no config field", f.Name)
				}
				if f.Usage == "" {
					t.Errorf("parameter %s has no usage", f.Name)
				}
			}
			text := s.Text(def)
			back, err := s.Configure(text)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := method.String(s.Fields(back)), method.String(fs); got != want {
				t.Errorf("defaults changed through text:\n got %s\nwant %s", got, want)
			}
			var obj map[string]any
			if err := json.Unmarshal(method.JSON(fs), &obj); err != nil || len(obj) != len(fs) {
				t.Errorf("JSON %s: %v (%d keys for %d fields)", method.JSON(fs), err, len(obj), len(fs))
			}
		})
	}
}
