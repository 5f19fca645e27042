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
// is where the experiment's committed report is.
func TestResultsDirIsTheCommittedOne(t *testing.T) {
	for _, name := range experiment.Names() {
		if name == "smoke" { // a check of the runner, never committed
			continue
		}
		dir := resultsDir(name, false)
		if _, err := os.Stat(filepath.Join("..", "..", dir, "report.md")); err != nil {
			t.Errorf("%s: default output %s holds no report: %v", name, dir, err)
		}
	}
	if got, want := resultsDir("hdpmf-table3", true), filepath.Join("docs", "results", "hdpmf", "table3-quick"); got != want {
		t.Errorf("quick folder %s, want %s", got, want)
	}
}
