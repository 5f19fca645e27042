package method

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLimitsCoverLosses: every private method that does not beat the
// global mean at its defaults on some dataset of the defaults experiment
// says so in its Limits.
func TestLimitsCoverLosses(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "docs", "results", "defaults", "cells.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type cell struct {
		Kind, Dataset, Method string
		Metrics               struct{ RMSE float64 }
		Privacy               struct{ Unit string }
	}
	var cells []cell
	mean := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c cell
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Kind != "test" {
			continue
		}
		cells = append(cells, c)
		if c.Method == "mean" {
			mean[c.Dataset] = c.Metrics.RMSE
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		m, ok := mean[c.Dataset]
		if !ok || c.Privacy.Unit == "none" || c.Metrics.RMSE < m {
			continue
		}
		s, err := Lookup(c.Method)
		if err != nil {
			t.Errorf("%s: %v", c.Method, err)
			continue
		}
		if s.Limits == "" {
			t.Errorf("%s: RMSE %.4f on %s, the global mean's %.4f, and no Limits", c.Method, c.Metrics.RMSE, c.Dataset, m)
		}
	}
	if s, _ := Lookup("ldp-op"); s.Limits == "" {
		t.Error("ldp-op: no Limits for its loss on the 1..100 dataset of issue 29")
	}
}
