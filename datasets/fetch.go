package datasets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FetchOptions configures Fetch. The zero value downloads from GroupLens
// into the default cache folder.
type FetchOptions struct {
	// CacheDir is the cache folder; "" means $PRIVREC_CACHE, or
	// os.UserCacheDir()/privrec when that is unset.
	CacheDir string
	// BaseURL replaces DefaultBaseURL (a mirror, or a test server). The
	// archive name (e.g. "ml-1m.zip") is appended to it.
	BaseURL string
	// SHA256 replaces the archive's expected SHA-256 from the registry
	// (hex, for a mirror with different archives, or tests).
	SHA256 string
	// Progress, if not nil, is called as bytes arrive with the bytes of the
	// archive held so far (a resumed download starts above 0) and its total
	// size, or -1 when the server does not tell.
	Progress func(done, total int64)
	// Warn receives warnings, such as trusting an archive on first use. nil
	// writes them to os.Stderr.
	Warn func(msg string)
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
	// MaxBytes caps the bytes of the archive and the bytes extracted from
	// it; 0 means 8 GiB.
	MaxBytes int64
	// KeepArchive keeps NAME.zip in the cache after extraction.
	KeepArchive bool
}

const (
	defaultMaxBytes = 8 << 30
	maxEntries      = 10000
	markerName      = ".privrec-complete"
)

// CacheDir returns the fetch cache folder: override if not "", else
// $PRIVREC_CACHE, else os.UserCacheDir()/privrec. It does not create it.
func CacheDir(override string) (string, error) {
	if override != "" {
		return override, nil
	}
	if d := os.Getenv("PRIVREC_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("datasets: no cache folder (set PRIVREC_CACHE): %w", err)
	}
	return filepath.Join(d, "privrec"), nil
}

// complete reports whether dir is a fully extracted cache folder.
func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, markerName))
	return err == nil
}

// Fetch makes the official GroupLens archive of the named dataset available
// in the cache and returns the folder it is extracted to, CacheDir/NAME.
//
// A folder already completely extracted is returned without network access.
// Otherwise the archive is downloaded to CacheDir/NAME.zip.part, continuing
// a partial file with an HTTP Range request (restarting when the server
// ignores the range or the file changed), verified against its SHA-256,
// and extracted into CacheDir/NAME. The marker file that makes the folder
// count as complete is written only after every file was extracted, so an
// interrupted extraction is redone by the next Fetch. Archives with paths
// escaping the folder, links, more than 10,000 entries or more than
// MaxBytes bytes are rejected.
//
// Archives whose SHA-256 is not pinned in the registry (ml-latest, which
// GroupLens regenerates) are trusted on first use: Fetch warns, records the
// hash in CacheDir/NAME.zip.sha256, and later downloads must match it
// (delete that file to accept a new version).
//
// On a checksum mismatch the download is deleted and no folder is left. If
// ctx is cancelled mid-download, the .part file is kept for resuming.
func Fetch(ctx context.Context, name string, opt FetchOptions) (dir string, err error) {
	e, ok := lookup(name)
	if !ok {
		hint := ""
		if s := suggest(name); s != "" {
			if _, ok := lookup(s); ok {
				hint = fmt.Sprintf("; did you mean %s?", s)
			}
		}
		return "", fmt.Errorf("datasets: fetch %q (known: %s)%s: %w", name, knownNames(), hint, ErrUnknown)
	}
	cache, err := CacheDir(opt.CacheDir)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(cache, name)
	if complete(dest) {
		return dest, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = defaultMaxBytes
	}
	warn := opt.Warn
	if warn == nil {
		warn = func(msg string) { fmt.Fprintln(os.Stderr, "privrec: warning:", msg) }
	}
	base := opt.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	url := strings.TrimSuffix(base, "/") + "/" + e.archive

	want := strings.ToLower(opt.SHA256)
	if want == "" {
		want = e.sha256
	}
	sumFile := filepath.Join(cache, name+".zip.sha256")
	tofu := false
	if want == "" {
		tofu = true
		if b, err := os.ReadFile(sumFile); err == nil {
			want = strings.TrimSpace(string(b))
		}
	}

	archive := filepath.Join(cache, e.archive)
	part := archive + ".part"
	if _, err := os.Stat(archive); err != nil {
		if err := download(ctx, opt, url, part); err != nil {
			return "", fmt.Errorf("datasets: fetch %s from %s: %w", name, url, err)
		}
		if err := os.Rename(part, archive); err != nil {
			return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
		}
		os.Remove(part + ".validator")
	}
	got, err := fileSHA256(archive)
	if err != nil {
		return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
	}
	switch {
	case want != "" && got != want:
		os.Remove(archive)
		hint := ""
		if tofu {
			hint = fmt.Sprintf(" (recorded on first download in %s; delete it to accept a new version)", sumFile)
		}
		return "", fmt.Errorf("datasets: fetch %s from %s: SHA-256 %s, want %s%s: %w", name, url, got, want, hint, ErrChecksum)
	case want == "":
		warn(fmt.Sprintf("%s: no published SHA-256 is pinned for %s; trusting this download on first use (SHA-256 %s, recorded in %s)", name, url, got, sumFile))
		if err := os.WriteFile(sumFile, []byte(got+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
		}
	}

	if err := os.RemoveAll(dest); err != nil { // an incomplete earlier extraction
		return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(cache, "."+name+".extract-")
	if err != nil {
		return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
	}
	defer os.RemoveAll(tmp) // no-op after the rename below
	if err := extract(archive, tmp, opt.MaxBytes); err != nil {
		if errors.Is(err, ErrUnsafeArchive) {
			os.Remove(archive)
		}
		return "", fmt.Errorf("datasets: fetch %s: extract %s: %w", name, archive, err)
	}
	marker := fmt.Sprintf("name: %s\nurl: %s\nsha256: %s\ntrust-on-first-use: %t\nextracted: %s\n",
		name, url, got, tofu && e.sha256 == "" && opt.SHA256 == "", time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(tmp, markerName), []byte(marker), 0o644); err != nil {
		return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return "", fmt.Errorf("datasets: fetch %s: %w", name, err)
	}
	if !opt.KeepArchive {
		os.Remove(archive)
	}
	return dest, nil
}

// download fetches url into part, continuing an existing partial file when
// the server honours Range.
func download(ctx context.Context, opt FetchOptions, url, part string) error {
	client := opt.Client
	if client == nil {
		client = http.DefaultClient
	}
	validatorFile := part + ".validator"
	for attempt := 0; ; attempt++ {
		var have int64
		if st, err := os.Stat(part); err == nil {
			have = st.Size()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
			if v, err := os.ReadFile(validatorFile); err == nil && len(v) > 0 {
				req.Header.Set("If-Range", string(v))
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		var f *os.File
		total := int64(-1)
		switch resp.StatusCode {
		case http.StatusPartialContent:
			start, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
			if !ok || start != have {
				resp.Body.Close()
				if attempt > 0 {
					return fmt.Errorf("bad Content-Range %q for a request from byte %d", resp.Header.Get("Content-Range"), have)
				}
				os.Remove(part)
				continue
			}
			total = size
			if total < 0 && resp.ContentLength >= 0 {
				total = have + resp.ContentLength
			}
			f, err = os.OpenFile(part, os.O_WRONLY|os.O_APPEND, 0o644)
		case http.StatusOK: // fresh download, or the server ignored Range
			have = 0
			total = resp.ContentLength
			v := resp.Header.Get("ETag")
			if v == "" || strings.HasPrefix(v, "W/") {
				v = resp.Header.Get("Last-Modified")
			}
			if v != "" {
				err = os.WriteFile(validatorFile, []byte(v), 0o644)
			} else {
				os.Remove(validatorFile)
			}
			if err == nil {
				f, err = os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			}
		case http.StatusRequestedRangeNotSatisfiable:
			resp.Body.Close()
			if attempt > 0 {
				return fmt.Errorf("server answered %s", resp.Status)
			}
			os.Remove(part) // partial file larger than the archive: start over
			continue
		default:
			resp.Body.Close()
			return fmt.Errorf("server answered %s", resp.Status)
		}
		if err != nil {
			resp.Body.Close()
			return err
		}
		if total > opt.MaxBytes {
			f.Close()
			resp.Body.Close()
			return fmt.Errorf("archive of %d bytes exceeds the limit of %d: %w", total, opt.MaxBytes, ErrUnsafeArchive)
		}
		err = copyProgress(f, resp.Body, have, total, opt)
		resp.Body.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("download interrupted (%s kept; fetch again to resume): %w", part, err)
		}
		if st, err := os.Stat(part); err == nil && total >= 0 && st.Size() != total {
			return fmt.Errorf("download ended at %d of %d bytes (%s kept; fetch again to resume)", st.Size(), total, part)
		}
		return nil
	}
}

// copyProgress copies r to w, reporting progress and enforcing MaxBytes.
func copyProgress(w io.Writer, r io.Reader, done, total int64, opt FetchOptions) error {
	if opt.Progress != nil {
		opt.Progress(done, total)
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if done+int64(n) > opt.MaxBytes {
				return fmt.Errorf("archive exceeds the limit of %d bytes: %w", opt.MaxBytes, ErrUnsafeArchive)
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			done += int64(n)
			if opt.Progress != nil {
				opt.Progress(done, total)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parseContentRange parses "bytes START-END/SIZE"; size is -1 for "*".
func parseContentRange(s string) (start, size int64, ok bool) {
	s, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, sz, found := strings.Cut(s, "/")
	if !found {
		return 0, 0, false
	}
	a, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	size = -1
	if sz != "*" {
		if size, err = strconv.ParseInt(sz, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return start, size, true
}

// fileSHA256 returns the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
