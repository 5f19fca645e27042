package method_test

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
)

// TestSDCFRankingMethods evaluates the BPR methods by leave-one-out AUC,
// as SDCF does; TestEveryMethodFitsAndPredictsOnScale must skip them
// (Spec.Ranks), since their Predict is a score, not a rating.
func TestSDCFRankingMethods(t *testing.T) {
	d, _, err := datasets.Open("ml-latest-small", ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ratings.LeaveOneOut(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bpr-sgld", "sd-bprmf"} {
		t.Run(name, func(t *testing.T) {
			if s, _ := method.Lookup(name); !s.Ranks {
				t.Fatal("not marked Ranks")
			}
			p := params{"epochs": "15"}
			if name == "sd-bprmf" {
				p["eps-i"] = "4"
			}
			m, res, err := fitText(context.Background(), name, s.Train, p, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			auc := eval.Rank(m, s.Train, s.Test, 10, s.Train.Scale.Min).AUC
			if !(auc > 0.6) {
				t.Errorf("leave-one-out AUC %.4f", auc)
			}
			if name == "sd-bprmf" && !(res.Privacy.EpsTotal > 0 && res.Privacy.Unit == "rating existence") {
				t.Errorf("privacy %+v", res.Privacy)
			}
		})
	}
	if s, _ := method.Lookup("sdmf"); s.Ranks {
		t.Error("sdmf predicts ratings")
	}
}

// TestSDMFReportsEveryBudget checks the per-round and total ε of ε_g, ε_I
// and ε_P in the Result, the paper's composition of them beside, and no ε
// as the headline.
func TestSDMFReportsEveryBudget(t *testing.T) {
	train, _ := realData(t)
	_, res, err := fitText(context.Background(), "sdmf", train,
		params{"epochs": "4", "dim": "10", "eps-g": "0.5", "eps-i": "0.25"}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"eps_g_round": 0.5, "eps_g_total": 2, "eps_i_round": 0.25, "eps_i_total": 1, "eps_p_total": 0.5,
		"eps_round_paper": 0.75, "eps_total_paper": 2.5}
	for k, v := range want {
		if got := res.Stats[k]; math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %g, want %g", k, got, v)
		}
	}
	// The paper's figures are not a bound (issue 32): the headline is Inf.
	if p := res.Privacy; !math.IsInf(p.EpsRound, 1) || !math.IsInf(p.EpsTotal, 1) || p.Trusted != "nobody" {
		t.Errorf("privacy %+v, want ε Inf per round and in total, trusted nobody", p)
	}
}

func TestSDCFParamErrors(t *testing.T) {
	train, _ := realData(t)
	for _, tc := range []struct {
		method string
		p      params
	}{
		{"sdmf", params{"eps-g": "0"}},
		{"sdmf", params{"eps-i": "-1"}},
		{"sdmf-alpha-inf", params{"eps-g": "1"}},
		{"isgld", params{"eps": "0"}},
		{"sgld-mf", params{"dropout": "1"}},
		{"sdmf", params{"server-step": "0"}},
		{"sgld-mf", params{"lambda": "-1"}},
		{"sgld-mf", params{"server-pseudo": "-1"}},
		{"sgld-mf", params{"item-bias": "maybe"}},
	} {
		if _, _, err := fitText(context.Background(), tc.method, train, tc.p, 1, nil); err == nil {
			t.Errorf("%s %v: no error", tc.method, tc.p)
		}
	}
}

// TestSDMFStatsAndDropout checks the eq. (12) and participation figures in
// Result.Stats under dropout.
func TestSDMFStatsAndDropout(t *testing.T) {
	train, _ := realData(t)
	_, res, err := fitText(context.Background(), "sdmf", train,
		params{"epochs": "5", "dim": "10", "dropout": "0.4"}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	if z, got := st["z"], st["uploads_per_client_round"]; !(z > 0) || math.Abs(got-z) > 0.05*z || math.Abs(st["eq12_expected_uploads"]-z) > 1e-6*z {
		t.Errorf("uploads per client and round %g, eq. (12) %g, z %g", got, st["eq12_expected_uploads"], z)
	}
	if p := st["participation"]; math.Abs(p-0.6) > 0.03 {
		t.Errorf("participation %g with dropout 0.4", p)
	}
	if f, e := st["unrated_fraction"], st["expected_unrated_fraction"]; !(e > 0.8) || math.Abs(f-e) > 0.02 {
		t.Errorf("unrated fraction %g, expected %g", f, e)
	}
	// ε_I is charged only in rounds a user took part: fewer than all 5.
	if tot := st["eps_i_total"]; !(tot <= 5) || !(tot >= 3) {
		t.Errorf("ε_I total %g over 5 rounds at 60%% participation (most active user)", tot)
	}
}
