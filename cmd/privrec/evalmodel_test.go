package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvaluatePublishedModel: evaluate --model scores a model file by
// folding in each user of the split's training part, as their device
// would: an mf model trained on all the data (its test ratings included)
// folds in to a test RMSE far below the global mean's, which a wrong
// match of the model's items to the data's would not; the text report
// names the model file; --model with --method is an error.
func TestEvaluatePublishedModel(t *testing.T) {
	data := syntheticTSV(t, 5)
	prm := filepath.Join(t.TempDir(), "m.prm")
	if _, _, err := run(t, "train", "--data", data, "--method", "mf", "--seed", "1", "--out", prm); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "evaluate", "--model", prm, "--data", data, "--split", "random:0.9", "--seed", "1", "--rank", "10", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Method string
		RMSE   float64
		Runs   []struct{ Recall float64 }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mid, _, err := run(t, "evaluate", "--method", "mean", "--data", data, "--split", "random:0.9", "--seed", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var base struct{ RMSE float64 }
	if err := json.Unmarshal([]byte(mid), &base); err != nil {
		t.Fatalf("%v\n%s", err, mid)
	}
	if rep.Method != "mf" || math.IsNaN(rep.RMSE) || !(rep.RMSE < 0.75*base.RMSE) || len(rep.Runs) != 1 || !(rep.Runs[0].Recall > 0) {
		t.Errorf("evaluate --model: method %q, RMSE %v (the mean's %v), runs %+v", rep.Method, rep.RMSE, base.RMSE, rep.Runs)
	}
	text, _, err := run(t, "evaluate", "--model", prm, "--data", data, "--split", "random:0.9", "--seed", "1")
	if err != nil || !strings.Contains(text, "published model "+prm) {
		t.Errorf("evaluate --model's report does not name the model file (%v):\n%s", err, text)
	}
	if _, _, err := run(t, "evaluate", "--model", prm, "--method", "mf", "--data", data); err == nil || !strings.Contains(err.Error(), "--method") {
		t.Errorf("evaluate --model --method = %v, want an error naming --method", err)
	}
}
