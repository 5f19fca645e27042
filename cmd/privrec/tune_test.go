package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// syntheticTSV writes a small planted low-rank dataset as user, item,
// rating lines and returns its path.
func syntheticTSV(t *testing.T, seed uint64) string {
	t.Helper()
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 200, Items: 100, Rank: 3, PerUser: 20, Noise: 0.3}, seed)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for k := range d.Len() {
		fmt.Fprintf(&b, "%s\t%s\t%g\n", d.UserIDs[d.Users[k]], d.ItemIDs[d.Items[k]], d.Values[k])
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("synthetic%d.tsv", seed))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tuned is the part of `privrec evaluate --json` a tuned run adds.
type tuned struct {
	Privacy model.Privacy `json:"privacy"`
	Tune    []struct {
		Private   bool    `json:"private"`
		Public    string  `json:"public"`
		Tried     int     `json:"tried"`
		Eps       float64 `json:"eps"`
		EpsSelect float64 `json:"eps_select"`
		EpsTrain  float64 `json:"eps_train"`
		EpsScore  float64 `json:"eps_score"`
		Trials    []any   `json:"trials"`
		Grid      []any   `json:"grid"`
	} `json:"tune"`
}

func TestEvaluateTune(t *testing.T) {
	data, public := syntheticTSV(t, 1), syntheticTSV(t, 2)
	common := []string{"evaluate", "--data", data, "--scale", "1,5,1", "--split", "random:0.9", "--epochs", "3", "--json"}
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, r tuned)
	}{
		{"mf not private", []string{"--method", "mf", "--tune"}, func(t *testing.T, r tuned) {
			tu := r.Tune[0]
			if tu.Private || tu.Eps != 0 || len(tu.Trials) != 15 || len(tu.Trials) != len(tu.Grid) {
				t.Errorf("private %v, eps %g, %d trials of %d: want every candidate of mf's 15 once, no cost",
					tu.Private, tu.Eps, len(tu.Trials), len(tu.Grid))
			}
			if !strings.Contains(r.Privacy.Note, "not private") {
				t.Errorf("note %q does not say the tuning is not private", r.Privacy.Note)
			}
		}},
		{"dp-pmf private", []string{"--method", "dp-pmf", "--eps", "2", "--tune"}, func(t *testing.T, r tuned) {
			tu := r.Tune[0]
			if !tu.Private || len(tu.Trials) != 0 {
				t.Errorf("private %v with %d trials listed: want private, only the best released", tu.Private, len(tu.Trials))
			}
			// dp-pmf trusts the recommender: 3(ε_c + ε_s) + ε_c, ε_s = ε_c/10.
			if want := 3*(2+0.2) + 2; math.Abs(r.Privacy.EpsTotal-want) > 1e-9 || math.Abs(tu.Eps-tu.EpsSelect) > 1e-12 {
				t.Errorf("eps_total %g (tuning %g), want %g", r.Privacy.EpsTotal, tu.Eps, want)
			}
			if !strings.Contains(r.Privacy.Note, "Liu–Talwar") {
				t.Errorf("note %q does not say how the tuning composes", r.Privacy.Note)
			}
		}},
		{"tune-on public", []string{"--method", "dp-pmf", "--eps", "2", "--tune", "--tune-on", public}, func(t *testing.T, r tuned) {
			tu := r.Tune[0]
			if tu.Private || tu.Eps != 0 || tu.Public != public {
				t.Errorf("private %v, eps %g, public %q: want no cost on %s", tu.Private, tu.Eps, tu.Public, public)
			}
			if r.Privacy.EpsTotal != 2 || !strings.Contains(r.Privacy.Note, "declared public") {
				t.Errorf("eps_total %g, note %q: want the training's 2 alone and the data declared public", r.Privacy.EpsTotal, r.Privacy.Note)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := run(t, append(common, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var r tuned
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Tune) != 1 {
				t.Fatalf("%d tuning reports, want 1", len(r.Tune))
			}
			tc.check(t, r)
		})
	}
}

func TestTuneErrors(t *testing.T) {
	data := syntheticTSV(t, 1)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"baseline", []string{"evaluate", "--method", "mean", "--tune"}, "nothing to tune"},
		{"ranking", []string{"evaluate", "--method", "bpr-sgld", "--tune"}, "nothing to tune"},
		{"option without --tune", []string{"evaluate", "--method", "mf", "--tune-eps", "0.5"}, "--tune-eps: only with --tune"},
		{"bad holdout", []string{"evaluate", "--method", "mf", "--tune", "--tune-holdout", "1"}, "--tune-holdout"},
		{"keep with public", []string{"evaluate", "--method", "mf", "--tune", "--tune-keep", "--tune-on", data}, "--tune-keep"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, append(tc.args, "--data", data, "--scale", "1,5,1")...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestTrainTuneKeep saves the selected candidate's own model: its file
// records the selection's cost alone, 3(ε_c + ε_s).
func TestTrainTuneKeep(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.prm")
	_, _, err := run(t, "train", "--data", syntheticTSV(t, 1), "--scale", "1,5,1", "--method", "dp-pmf", "--epochs", "3",
		"--tune", "--tune-keep", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * (1 + 0.1); math.Abs(m.Privacy.EpsTotal-want) > 1e-9 {
		t.Errorf("saved eps_total %g, want %g", m.Privacy.EpsTotal, want)
	}
}
