package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// TestRecommendStars: recommend --model RANKING --stars RATING keeps the
// ranking model's list and fills its rating column with what the rating
// model, with the same user folded in, predicts; a ranking model is
// refused as --stars, and --stars needs --model.
func TestRecommendStars(t *testing.T) {
	data := syntheticTSV(t, 5)
	d, _, err := ratings.Load(data, ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pop, mf := filepath.Join(dir, "pop.prm"), filepath.Join(dir, "mf.prm")
	for _, tc := range []struct {
		method, out string
		extra       []string
	}{{"pop", pop, nil}, {"mf", mf, []string{"--epochs", "5"}}} {
		if _, _, err := run(t, append([]string{"train", "--data", data, "--scale", "1,5,1", "--method", tc.method, "--out", tc.out}, tc.extra...)...); err != nil {
			t.Fatalf("train %s: %v", tc.method, err)
		}
	}
	mine := filepath.Join(dir, "mine.csv")
	var b strings.Builder
	b.WriteString("userId,movieId,rating\n")
	var items []int32
	var values []float32
	for k, j := range []int{2, 5, 11} {
		fmt.Fprintf(&b, "me,%s,%d\n", d.ItemIDs[j], 5-k)
		items, values = append(items, int32(j)), append(values, float32(5-k))
	}
	if err := os.WriteFile(mine, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	list := func(args ...string) []model.Recommendation {
		t.Helper()
		out, _, err := run(t, append([]string{"recommend", "--model", pop, "--ratings", mine, "-n", "5", "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var recs []model.Recommendation
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return recs
	}
	plain, starred := list(), list("--stars", mf)
	m, err := model.Load(mf)
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.FoldIn("me", items, values, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 5 || len(starred) != 5 {
		t.Fatalf("%d and %d recommendations, want 5", len(plain), len(starred))
	}
	for k, r := range starred {
		i, _ := f.ItemIndex(r.Item)
		want := f.Predict(0, i)
		if r.Item != plain[k].Item || plain[k].Rating != nil || r.Rating == nil || *r.Rating != want {
			t.Errorf("rank %d: %+v with --stars, %+v without; want the same item with mf's rating %v", k+1, r, plain[k], want)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a ranking model as stars", []string{"recommend", "--model", pop, "--ratings", mine, "--stars", pop}, "predicts no rating"},
		{"stars without a model", []string{"recommend", "--data", data, "--ratings", mine, "--stars", mf}, "give the ranking model as --model"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
