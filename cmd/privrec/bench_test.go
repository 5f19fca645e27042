package main

import (
	"encoding/json"
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
