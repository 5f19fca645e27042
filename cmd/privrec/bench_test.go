package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchJSON(t *testing.T) {
	out, errOut, err := run(t, "bench", "--data", "ml-latest-small", "--method", "mf", "--dim", "8", "--epochs", "3", "--json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Epochs != 3 || rep.Ratings != 100836 || !(rep.SecondsPerEpoch > 0) || !(rep.UpdatesPerSecond > 0) ||
		rep.TrainSeconds < rep.SecondsPerEpoch {
		t.Fatalf("report %+v", rep)
	}
	if _, _, err := run(t, "bench", "--method", "mf", "--dim", "x"); err == nil {
		t.Fatal("a bad --dim was accepted")
	}
}

// TestRecommendFoldIn: a user's own ratings file, folded in against a
// saved model's item factors, gets recommendations that leave the rated
// items out; an item the model does not know is an error naming it.
func TestRecommendFoldIn(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "m.prm")
	if _, errOut, err := run(t, "train", "--data", "ml-latest-small", "--method", "mf", "--epochs", "2", "--out", mp); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	mine := filepath.Join(dir, "me.csv")
	if err := os.WriteFile(mine, []byte("userId,movieId,rating\nme,1,5\nme,260,4.5\nme,318,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, "recommend", "--model", mp, "--ratings", mine, "-n", "5", "--json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var recs []struct{ Item string }
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 5 {
		t.Fatalf("%v: %s", err, out)
	}
	for _, r := range recs {
		if r.Item == "1" || r.Item == "260" || r.Item == "318" {
			t.Fatalf("a rated item was recommended: %v", recs)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("userId,movieId,rating\nme,999999999,5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "recommend", "--model", mp, "--ratings", bad); err == nil || !strings.Contains(err.Error(), "999999999") {
		t.Fatalf("unknown item: %v", err)
	}
	// An unknown item among known ones: an error naming file, line and
	// item; under --skip-bad a skipped line, counted.
	some := filepath.Join(dir, "some.csv")
	if err := os.WriteFile(some, []byte("userId,movieId,rating\nme,1,5\nme,999999999,5\nme,318,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "recommend", "--model", mp, "--ratings", some)
	if err == nil || !strings.Contains(err.Error(), "some.csv:3") || !strings.Contains(err.Error(), `"999999999"`) || !strings.Contains(err.Error(), "--skip-bad") {
		t.Fatalf("unknown item: %v", err)
	}
	out, errOut, err = run(t, "recommend", "--model", mp, "--ratings", some, "--skip-bad", "-n", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "skipped 1 bad line(s) of 3") || !strings.HasPrefix(out, "rank  item") || strings.Count(out, "\n") != 4 {
		t.Errorf("--skip-bad: stdout\n%s\nstderr\n%s", out, errOut)
	}
}
