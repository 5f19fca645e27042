// Package testdata locates the real MovieLens datasets for tests and
// benchmarks. Their licenses forbid copying most of them into the project,
// so they are read from $PRIVREC_DATA or, in a development checkout, from
// ../shared/datasets beside the module; tests skip with a clear message
// when they are absent.
package testdata

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the dataset folder, or "" if none is found.
func Root() string {
	if d := os.Getenv("PRIVREC_DATA"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(dir, "..", "shared", "datasets")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return cand
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Path returns the path of rel inside the dataset folder, or skips tb with a
// message naming what is missing and how to provide it.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	root := Root()
	if root == "" {
		tb.Skipf("dataset %s not available: set PRIVREC_DATA to the folder of MovieLens datasets", rel)
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("dataset %s not available at %s: set PRIVREC_DATA to the folder of MovieLens datasets", rel, p)
	}
	return p
}
