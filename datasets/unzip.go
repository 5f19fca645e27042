package datasets

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// extract unpacks the zip archive at src into the existing folder dest,
// dropping the single top-level folder the GroupLens archives have
// ("ml-10M100K/ratings.dat" becomes dest/ratings.dat). Every name is
// checked before anything is written: absolute paths, ".." elements,
// backslashes, links and special files are rejected, as are archives with
// more than maxEntries entries or more than maxBytes uncompressed bytes
// (counted as written, not trusted from the headers).
func extract(src, dest string, maxBytes int64) error {
	r, err := zip.OpenReader(src)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // insecure names are rejected below
		return err
	}
	defer r.Close()
	if len(r.File) > maxEntries {
		return fmt.Errorf("%d entries, more than %d: %w", len(r.File), maxEntries, ErrUnsafeArchive)
	}
	files := make([]*zip.File, 0, len(r.File))
	var declared uint64
	for _, f := range r.File {
		name := f.Name
		if strings.HasPrefix(name, "__MACOSX/") {
			continue
		}
		if strings.Contains(name, `\`) || !filepath.IsLocal(strings.TrimSuffix(name, "/")) || hasDotDot(name) {
			return fmt.Errorf("entry %q: path escapes the target folder: %w", name, ErrUnsafeArchive)
		}
		if m := f.Mode(); !m.IsDir() && !m.IsRegular() {
			return fmt.Errorf("entry %q: not a regular file or folder (%v): %w", name, m.Type(), ErrUnsafeArchive)
		}
		declared += f.UncompressedSize64
		if declared > uint64(maxBytes) {
			return fmt.Errorf("more than %d uncompressed bytes: %w", maxBytes, ErrUnsafeArchive)
		}
		files = append(files, f)
	}
	prefix := commonTop(files)
	budget := maxBytes
	for _, f := range files {
		rel := strings.TrimSuffix(strings.TrimPrefix(f.Name, prefix), "/")
		if rel == "" {
			continue
		}
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return fmt.Errorf("entry %q: path escapes the target folder: %w", f.Name, ErrUnsafeArchive)
		}
		target := filepath.Join(dest, filepath.FromSlash(rel))
		if f.Mode().IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		n, err := extractFile(f, target, budget)
		if err != nil {
			return fmt.Errorf("entry %q: %w", f.Name, err)
		}
		budget -= n
	}
	return nil
}

// extractFile writes one entry to target, failing past budget bytes.
func extractFile(f *zip.File, target string, budget int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	w, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(rc, budget+1))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > budget {
		err = fmt.Errorf("more uncompressed bytes than the limit: %w", ErrUnsafeArchive)
	}
	return n, err
}

// commonTop returns "DIR/" when every entry lies in the one top-level folder
// DIR, else "".
func commonTop(files []*zip.File) string {
	top := ""
	for _, f := range files {
		first, rest, found := strings.Cut(f.Name, "/")
		if !found || (rest == "" && !f.Mode().IsDir()) {
			return "" // a file at the top level
		}
		if top == "" {
			top = first
		} else if first != top {
			return ""
		}
	}
	if top == "" {
		return ""
	}
	return top + "/"
}

// hasDotDot reports whether the slash-separated name has a ".." element.
func hasDotDot(name string) bool {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}
