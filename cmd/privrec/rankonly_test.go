package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRankingOnlyMethodsHaveNoRMSE checks that evaluate reports ranking
// metrics, and no rating error, for the ranking-only methods, and refuses
// --rank 0 for them with a message saying why.
func TestRankingOnlyMethodsHaveNoRMSE(t *testing.T) {
	for _, name := range []string{"bpr-sgld", "sd-bprmf"} {
		t.Run(name, func(t *testing.T) {
			args := []string{"evaluate", "--data", "ml-latest-small", "--min-user-ratings", "600", "--method", name, "--epochs", "2", "--seed", "1"}
			out, _, err := run(t, append(args, "--json")...)
			if err != nil {
				t.Fatal(err)
			}
			var rep map[string]any
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("output is not one JSON object: %v\n%s", err, out)
			}
			for _, k := range []string{"rmse", "mse", "mae"} {
				if _, ok := rep[k]; ok {
					t.Errorf("JSON has %q for a ranking-only method", k)
				}
				if _, ok := rep["summary"].(map[string]any)[k]; ok {
					t.Errorf("summary has %q", k)
				}
				if _, ok := rep["runs"].([]any)[0].(map[string]any)[k]; ok {
					t.Errorf("runs[0] has %q", k)
				}
			}
			for _, k := range []string{"auc", "coverage@10", "rare@20"} {
				if _, ok := rep["summary"].(map[string]any)[k]; !ok {
					t.Errorf("summary has no %s: %v", k, rep["summary"])
				}
			}
			if _, ok := rep["runs"].([]any)[0].(map[string]any)["rare"]; !ok {
				t.Errorf("runs[0] has no rare")
			}
			if note, _ := rep["note"].(string); !strings.Contains(note, "ranking-only") {
				t.Errorf("note = %q", note)
			}
			text, _, err := run(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text, "\nrmse") || !strings.Contains(text, "no RMSE") || !strings.Contains(text, "ndcg@10") || !strings.Contains(text, "rare@20") {
				t.Errorf("text report:\n%s", text)
			}
			_, _, err = run(t, append(args, "--rank", "0")...)
			if err == nil || !strings.Contains(err.Error(), "ranking-only") {
				t.Errorf("--rank 0: err = %v, want a refusal naming ranking-only", err)
			}
		})
	}
}
