package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
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

// TestFoldInDPALSMatchesDevices: a dp-als model trained in process holds
// each device's own bias and vector from the run's final solve; folding
// each user in again from the model's item side alone (what evaluate
// --model and recommend --ratings do with a published model) gives the
// same predictions, to float32 rounding.
func TestFoldInDPALSMatchesDevices(t *testing.T) {
	data := syntheticTSV(t, 7)
	prm := filepath.Join(t.TempDir(), "m.prm")
	if _, _, err := run(t, "train", "--data", data, "--method", "dp-als", "--eps", "4", "--seed", "1", "--scale", "1,5,1", "--out", prm); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(prm)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := ratings.Load(data, ratings.LoadOptions{Scale: &ratings.Stars5})
	if err != nil {
		t.Fatal(err)
	}
	rows := d.ByUser()
	worst := 0.0
	for u := range d.NumUsers() {
		idx, val := rows.Row(u)
		items := make([]int32, len(idx))
		for n, j := range idx {
			i, ok := m.ItemIndex(d.ItemIDs[j])
			if !ok {
				t.Fatalf("item %s not in the model", d.ItemIDs[j])
			}
			items[n] = i
		}
		mu, ok := m.UserIndex(d.UserIDs[u])
		if !ok {
			t.Fatalf("user %s not in the model", d.UserIDs[u])
		}
		f, err := m.FoldIn(d.UserIDs[u], items, val, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int32(m.NumItems) {
			worst = max(worst, math.Abs(float64(f.PredictRaw(0, i)-m.PredictRaw(mu, i))))
		}
	}
	if worst > 1e-4 {
		t.Errorf("fold-in and the devices' own solve differ by up to %.3g in a prediction", worst)
	}
}
