package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/experiment"
)

// TestClientSeedHelp: leaving out client --seed means crypto randomness,
// so its help shows no default seed.
func TestClientSeedHelp(t *testing.T) {
	out, _, err := run(t, "client", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--seed uint") && (strings.Contains(line, "(default") || !strings.Contains(line, "crypto randomness")) {
			t.Errorf("client --seed help: %q", line)
		}
	}
}

// TestResultsDirIsTheCommittedOne: experiment run's default output folder
// is where the experiment's committed report is; an experiment whose only
// committed run is the quick one has it in the quick folder.
func TestResultsDirIsTheCommittedOne(t *testing.T) {
	for _, name := range experiment.Names() {
		if name == "smoke" { // a check of the runner, never committed
			continue
		}
		dir := resultsDir(name, false)
		if _, err := os.Stat(filepath.Join("..", "..", resultsDir(name, true), "report.md")); err == nil {
			if _, err := os.Stat(filepath.Join("..", "..", dir, "report.md")); err != nil {
				t.Logf("%s: only the quick run is committed (%s)", name, resultsDir(name, true))
				continue
			}
		}
		if _, err := os.Stat(filepath.Join("..", "..", dir, "report.md")); err != nil {
			t.Errorf("%s: default output %s holds no report: %v", name, dir, err)
		}
	}
	if got, want := resultsDir("hdpmf-table3", true), filepath.Join("docs", "results", "hdpmf", "table3-quick"); got != want {
		t.Errorf("quick folder %s, want %s", got, want)
	}
}

// TestDuplicateHintsAtColumns: a headerless file whose columns are not
// user,item,rating repeats "pairs"; the error points to a header and
// --columns.
func TestDuplicateHintsAtColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "irs.csv")
	if err := os.WriteFile(path, []byte("10,4,1\n10,4,2\n11,4,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "data", "info", "--data", path)
	if err == nil || !strings.Contains(err.Error(), "irs.csv:2") || !strings.Contains(err.Error(), "--columns") {
		t.Errorf("err = %v, want the line and a --columns hint", err)
	}
}
