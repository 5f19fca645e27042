package datasets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// TestFoundListsWhatOpenResolves: Found lists every folder of
// $PRIVREC_DATA and every complete folder of the fetch cache that the
// registry does not know, once, and Open resolves each of its names.
func TestFoundListsWhatOpenResolves(t *testing.T) {
	data, cache := t.TempDir(), t.TempDir()
	t.Setenv("PRIVREC_DATA", data)
	t.Setenv("PRIVREC_CACHE", cache)
	mk := func(dir string, marker bool) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ratings.tsv"), []byte("u1\ti1\t4\nu2\ti1\t3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if marker {
			if err := os.WriteFile(filepath.Join(dir, markerName), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk(filepath.Join(data, "douban-monti"), false)
	mk(filepath.Join(data, "mine"), false)
	mk(filepath.Join(data, "ml-1m"), false) // a registry name: listed by Names
	mk(filepath.Join(data, ".git"), false)
	mk(filepath.Join(cache, "fetched"), true)
	mk(filepath.Join(cache, "half"), false) // an incomplete extraction
	mk(filepath.Join(cache, "mine"), true)  // $PRIVREC_DATA's wins
	var names []string
	for _, in := range Found() {
		names = append(names, in.Name)
		if in.Name == "mine" && in.Path != filepath.Join(data, "mine") {
			t.Errorf("mine at %s, want $PRIVREC_DATA's", in.Path)
		}
		if _, _, err := Open(in.Name, ratings.LoadOptions{}); err != nil {
			t.Errorf("Open(%q): %v", in.Name, err)
		}
	}
	if got, want := len(names), 3; got != want || names[0] != "douban-monti" || names[1] != "fetched" || names[2] != "mine" {
		t.Errorf("Found = %v, want douban-monti, fetched, mine", names)
	}
}
