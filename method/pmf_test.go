package method_test

import (
	"context"
	"errors"
	"testing"

	"github.com/privrec/privrec/method"
)

func TestPMFMethodsReportClaims(t *testing.T) {
	train, _ := realData(t)
	tests := []struct {
		name    string
		p       params
		wantEps float64
	}{
		{"dp-pmf", params{"epochs": "2", "eps": "0.5"}, 0.5},
		{"pdp-pmf", params{"epochs": "2", "threshold": "0.3"}, 0.6}, // 2·min(ε_k, t), Remark 7
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, res, err := fitText(context.Background(), tc.name, train, tc.p, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			pr := res.Privacy
			if pr.Unit != "rating value" || pr.Trusted != "the recommender" || pr.Delta != 0 ||
				pr.EpsRound != pr.EpsTotal || pr.EpsTotal < tc.wantEps-1e-9 || pr.EpsTotal > tc.wantEps+1e-9 {
				t.Errorf("privacy %+v, want ε %g", pr, tc.wantEps)
			}
		})
	}
}

func TestPMFMethodParamErrors(t *testing.T) {
	train, _ := realData(t)
	for _, tc := range []struct {
		name string
		p    params
	}{
		{"dp-pmf", params{"eps": "0"}},
		{"dp-pmf", params{"solver": "newton"}},
		{"pdp-pmf", params{"threshold": "median"}},
		{"pdp-pmf", params{"f-c": "0.9"}},
		{"pmf", params{"dim": "0"}},
	} {
		_, _, err := fitText(context.Background(), tc.name, train, tc.p, 1, nil)
		if !errors.Is(err, method.ErrParam) {
			t.Errorf("%s %v: error %v does not wrap ErrParam", tc.name, tc.p, err)
		}
	}
}
