package datasets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// TestOpenSuggestsAName: a plain name that names no dataset gets "did you
// mean" the closest registry or data-folder name within a small edit
// distance, and no guess when none is close.
func TestOpenSuggestsAName(t *testing.T) {
	data := t.TempDir()
	t.Setenv("PRIVREC_DATA", data)
	t.Setenv("PRIVREC_CACHE", t.TempDir())
	if err := os.MkdirAll(filepath.Join(data, "douban-monti"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "douban-monti", "ratings.tsv"), []byte("u1\ti1\t4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, want string // want "" for no suggestion
	}{
		{"ml-latst-small", "ml-latest-small"},
		{"ML-1M", "ml-1m"}, // names are case-sensitive
		{"ml-1n", "ml-1m"},
		{"movielens-1m", ""},
		{"duoban-monti", "douban-monti"},
		{"ml10m", "ml-10m"},
		{"xyz", ""},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, _, err := Open(tc.spec, ratings.LoadOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			got := ""
			if _, after, ok := strings.Cut(err.Error(), "did you mean "); ok {
				got, _, _ = strings.Cut(after, "?")
			}
			if got != tc.want {
				t.Errorf("suggestion %q, want %q (error: %v)", got, tc.want, err)
			}
			if got != "" && !errors.Is(err, ErrUnknown) {
				t.Errorf("err %v, want ErrUnknown", err)
			}
		})
	}
}
