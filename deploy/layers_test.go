package deploy

import (
	"go/build"
	"strings"
	"testing"
)

// TestThinTransport: deploy reaches no method package, not even through
// another import, nor the mechanisms of package dp: what a method is
// comes through protocol.Method and the protocol interfaces its server
// implements.
func TestThinTransport(t *testing.T) {
	const mod = "github.com/privrec/privrec/"
	forbidden := []string{"method", "dp", "baseline", "mf", "pmf", "bmf", "fm", "topn", "hdpmf", "ldpop", "sdcf", "dpals", "dpease"}
	seen := map[string]string{} // package → the package that imports it
	var walk func(path string)
	walk = func(path string) {
		p, err := build.Import(path, ".", 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range p.Imports {
			rel, ok := strings.CutPrefix(imp, mod)
			if !ok || seen[rel] != "" {
				continue
			}
			seen[rel] = path
			walk(imp)
		}
	}
	walk(mod + "deploy")
	for _, f := range forbidden {
		if by, ok := seen[f]; ok {
			t.Errorf("deploy reaches %s (imported by %s)", f, by)
		}
	}
	if seen["protocol"] == "" {
		t.Errorf("the walk found %d packages, not protocol: it sees nothing", len(seen))
	}
}
