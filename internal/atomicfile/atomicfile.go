// Package atomicfile writes files whole or not at all: the content goes to
// a temporary file in the destination's folder, which is synced and then
// renamed over the destination, so no reader ever sees a half-written file
// and a failed write leaves nothing behind.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write creates path with the content that write puts into the file,
// atomically. The folder must exist. The file gets mode 0644.
func Write(path string, write func(f *os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
