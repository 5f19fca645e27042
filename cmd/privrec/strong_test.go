package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEvaluateStrongProtocol runs the strong-generalisation protocol for
// a method with a fold-in and refuses one without.
func TestEvaluateStrongProtocol(t *testing.T) {
	out, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--method", "pop", "--protocol", "strong:0.2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep strongReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Users == 0 || !(rep.Metrics["recall@20"] > 0) || !strings.Contains(rep.Protocol, "strong generalisation") {
		t.Errorf("report %+v", rep)
	}
	if _, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--method", "mean", "--protocol", "strong"); err == nil || !strings.Contains(err.Error(), "no fold-in") {
		t.Errorf("mean: err = %v", err)
	}
	if _, _, err := run(t, "evaluate", "--data", "ml-latest-small", "--method", "pop", "--protocol", "strong:2"); err == nil {
		t.Error("strong:2: no error")
	}
}
