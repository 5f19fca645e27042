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
	return write0(path, 0o644, write)
}

// WriteFile writes data to path atomically and durably: to a temporary
// file in path's folder, synced, given mode perm, renamed over path, and
// the folder synced, so that once WriteFile returns the new content
// survives a crash or a power cut (the rename included) and a crash
// before leaves the old content whole. The folder must exist.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	err := write0(path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir syncs the folder dir, so that the files created, renamed or
// removed in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// write0 is Write with the file's mode.
func write0(path string, perm os.FileMode, write func(f *os.File) error) error {
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
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
