package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the content and mode arrive, an existing file is
// replaced whole, and no temporary file is left behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memory.json")
	for _, c := range []struct {
		data string
		perm os.FileMode
	}{{"first", 0o600}, {"second, longer", 0o640}} {
		if err := WriteFile(p, []byte(c.data), c.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != c.data {
			t.Fatalf("read %q, %v; want %q", got, err, c.data)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != c.perm {
			t.Fatalf("mode %v, %v; want %v", fi.Mode().Perm(), err, c.perm)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("the folder holds %d entries (%v), want the one file", len(ents), err)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such"), []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFile into a missing folder succeeded")
	}
}
