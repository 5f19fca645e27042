package datasets

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// zipEntry is one member of a test archive; link makes it a symlink.
type zipEntry struct {
	name, body string
	link       bool
}

func makeZip(t *testing.T, entries ...zipEntry) []byte {
	t.Helper()
	z, err := buildZip(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func buildZip(entries ...zipEntry) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.link {
			h.SetMode(fs.ModeSymlink | 0o777)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// testArchive is a small ml-100k look-alike with a big enough file that a
// download takes several reads. Each caller gets its own copy of the same
// archive, built once: compressing it is most of a test's time under -race.
func testArchive(t *testing.T) ([]byte, map[string]string) {
	t.Helper()
	a, err := builtTestArchive()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(a.zip), maps.Clone(a.files)
}

// archiveFixture is an archive and the files it holds, by path below its
// top folder.
type archiveFixture struct {
	zip   []byte
	files map[string]string
}

var builtTestArchive = sync.OnceValues(func() (archiveFixture, error) {
	var data strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&data, "%d\t%d\t%d\t%d\n", i%943+1, i*7%1682+1, i%5+1, 874965758+i*13)
	}
	files := map[string]string{"u.data": data.String(), "README": "MovieLens 100K test copy\n", "sub/u1.base": "1\t1\t5\t0\n"}
	z, err := buildZip(
		zipEntry{name: "ml-100k/"},
		zipEntry{name: "ml-100k/README", body: files["README"]},
		zipEntry{name: "ml-100k/u.data", body: files["u.data"]},
		zipEntry{name: "ml-100k/sub/u1.base", body: files["sub/u1.base"]},
	)
	return archiveFixture{z, files}, err
})

// server serves one archive and records what it was asked.
type server struct {
	mu          sync.Mutex
	data        []byte
	etag        string
	ignoreRange bool
	stallAfter  int // if > 0, send this many bytes then wait for the client to go away
	reqs        []*request
}

// request is one request the server answered. Its handler may still be
// running after the client is done with it (a cancelled download's handler
// is still writing or waiting for the connection to close), so sent is read
// only after done is closed.
type request struct {
	rng  string        // the Range header
	sent int64         // body bytes of a successful response, guarded by server.mu
	done chan struct{} // closed when the handler has returned
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if path.Dir(r.URL.Path) != "/movielens" {
		http.NotFound(w, r)
		return
	}
	req := &request{rng: r.Header.Get("Range"), done: make(chan struct{})}
	defer close(req.done)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	data, etag, ignore, stall := s.data, s.etag, s.ignoreRange, s.stallAfter
	s.mu.Unlock()
	cw := &countWriter{ResponseWriter: w, s: s, req: req}
	switch {
	case stall > 0:
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusOK)
		cw.Write(data[:stall])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case ignore:
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		cw.Write(data)
	default:
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		http.ServeContent(cw, r, "a.zip", time.Time{}, bytes.NewReader(data))
	}
}

// countWriter counts the body bytes of successful responses.
type countWriter struct {
	http.ResponseWriter
	s    *server
	req  *request
	code int
}

func (c *countWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	if c.code == 0 || c.code < 300 {
		c.s.mu.Lock()
		c.req.sent += int64(n)
		c.s.mu.Unlock()
	}
	return n, err
}

// reqStat is what one finished request asked for and was sent.
type reqStat struct {
	rng  string
	sent int64
}

// stats waits until the handler of every request the server has seen so far
// has returned, then returns those requests in order. Every request whose
// response a Fetch read was recorded before its first byte was written, so
// after Fetch returns nothing in the result can change.
func (s *server) stats(t *testing.T) []reqStat {
	t.Helper()
	s.mu.Lock()
	reqs := append([]*request(nil), s.reqs...)
	s.mu.Unlock()
	timeout := time.After(time.Minute)
	for i, r := range reqs {
		select {
		case <-r.done:
		case <-timeout:
			t.Fatalf("handler of request %d (Range %q) still running after a minute", i, r.rng)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := make([]reqStat, len(reqs))
	for i, r := range reqs {
		st[i] = reqStat{r.rng, r.sent}
	}
	return st
}

// totalSent returns the body bytes sent for reqs.
func totalSent(reqs []reqStat) int64 {
	var n int64
	for _, r := range reqs {
		n += r.sent
	}
	return n
}

// startServer serves s on 127.0.0.1 until the test ends and returns the
// base URL of its archives.
func startServer(t *testing.T, s *server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s)
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL + "/movielens/"
}

// checkExtracted asserts that dir holds exactly files plus the marker.
func checkExtracted(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s: %d bytes differ from the %d archived", name, len(got), len(want))
		}
	}
	if !complete(dir) {
		t.Errorf("%s: no completion marker", dir)
	}
}

// checkNoLeftovers asserts that the cache holds nothing but keep.
func checkNoLeftovers(t *testing.T, cache string, keep ...string) {
	t.Helper()
	ents, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		found := false
		for _, k := range keep {
			found = found || e.Name() == k
		}
		if !found {
			left = append(left, e.Name())
		}
	}
	if len(left) > 0 {
		t.Errorf("cache %s holds %v, want only %v", cache, left, keep)
	}
}

func TestFetchFull(t *testing.T) {
	z, files := testArchive(t)
	s := &server{data: z, etag: `"v1"`}
	base := startServer(t, s)
	cache := t.TempDir()
	var calls int
	var last [2]int64
	opt := FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum(z), Progress: func(done, total int64) {
		calls++
		if done < last[0] {
			t.Errorf("progress went back from %d to %d", last[0], done)
		}
		last = [2]int64{done, total}
	}}
	dir, err := Fetch(context.Background(), "ml-100k", opt)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "ml-100k"); dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	checkExtracted(t, dir, files)
	checkNoLeftovers(t, cache, "ml-100k")
	if n := int64(len(z)); last != [2]int64{n, n} || calls < 3 {
		t.Errorf("progress: %d calls ending at %v, want several ending at [%d %d]", calls, last, n, n)
	}
	if sent := totalSent(s.stats(t)); sent != int64(len(z)) {
		t.Errorf("server sent %d bytes, want %d", sent, len(z))
	}
	// A complete folder is returned without asking the server again.
	_, err = Fetch(context.Background(), "ml-100k", opt)
	if requests := len(s.stats(t)); err != nil || requests != 1 {
		t.Errorf("second fetch: err %v, %d requests in all, want nil and 1", err, requests)
	}
}

func TestFetchResume(t *testing.T) {
	z, files := testArchive(t)
	half := len(z) / 2
	tests := []struct {
		name        string
		ignoreRange bool
		validator   string // If-Range value stored beside the partial file
		partial     []byte
		wantSent    int
	}{
		{name: "range honoured", partial: z[:half], wantSent: len(z) - half},
		{name: "range honoured with If-Range", validator: `"v1"`, partial: z[:half], wantSent: len(z) - half},
		// The archive changed since the partial download: the server sends it whole.
		{name: "stale partial", validator: `"v0"`, partial: bytes.Repeat([]byte{'x'}, half), wantSent: len(z)},
		// Garbage that would fail the checksum if it were kept.
		{name: "range ignored", ignoreRange: true, partial: bytes.Repeat([]byte{'x'}, half), wantSent: len(z)},
		// A partial file longer than the archive: 416, then a fresh download.
		{name: "partial too long", partial: append(append([]byte{}, z...), 'x'), wantSent: len(z)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{data: z, etag: `"v1"`, ignoreRange: tc.ignoreRange}
			base := startServer(t, s)
			cache := t.TempDir()
			part := filepath.Join(cache, "ml-100k.zip.part")
			if err := os.WriteFile(part, tc.partial, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.validator != "" {
				if err := os.WriteFile(part+".validator", []byte(tc.validator), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			first := int64(-1)
			dir, err := Fetch(context.Background(), "ml-100k", FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum(z),
				Progress: func(done, total int64) {
					if first < 0 {
						first = done
					}
					if total != int64(len(z)) {
						t.Errorf("progress total %d, want %d", total, len(z))
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			checkExtracted(t, dir, files)
			checkNoLeftovers(t, cache, "ml-100k")
			reqs := s.stats(t)
			if sent := totalSent(reqs); sent != int64(tc.wantSent) {
				t.Errorf("server sent %d bytes, want %d", sent, tc.wantSent)
			}
			if reqs[0].rng != fmt.Sprintf("bytes=%d-", len(tc.partial)) {
				t.Errorf("first request Range %q, want bytes=%d-", reqs[0].rng, len(tc.partial))
			}
			if wantFirst := int64(len(z) - tc.wantSent); first != wantFirst {
				t.Errorf("first progress report at %d bytes, want %d", first, wantFirst)
			}
		})
	}
}

func TestFetchChecksumMismatch(t *testing.T) {
	z, _ := testArchive(t)
	s := &server{data: z}
	base := startServer(t, s)
	cache := t.TempDir()
	_, err := Fetch(context.Background(), "ml-100k", FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum([]byte("another archive"))})
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("err %v, want ErrChecksum", err)
	}
	if !strings.Contains(err.Error(), sum(z)) {
		t.Errorf("error %q does not name the SHA-256 received", err)
	}
	checkNoLeftovers(t, cache)
}

func TestFetchTrustOnFirstUse(t *testing.T) {
	z, files := testArchive(t)
	s := &server{data: z}
	base := startServer(t, s)
	cache := t.TempDir()
	var warnings []string
	opt := FetchOptions{CacheDir: cache, BaseURL: base, Warn: func(m string) { warnings = append(warnings, m) }}
	dir, err := Fetch(context.Background(), "ml-latest", opt)
	if err != nil {
		t.Fatal(err)
	}
	checkExtracted(t, dir, files)
	if len(warnings) != 1 || !strings.Contains(warnings[0], sum(z)) || !strings.Contains(warnings[0], "first use") {
		t.Errorf("warnings %q, want one naming trust on first use and %s", warnings, sum(z))
	}
	rec, err := os.ReadFile(filepath.Join(cache, "ml-latest.zip.sha256"))
	if err != nil || strings.TrimSpace(string(rec)) != sum(z) {
		t.Errorf("recorded hash %q (%v), want %s", rec, err, sum(z))
	}
	// A later download of different bytes is refused.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.data = makeZip(t, zipEntry{name: "ml-latest/ratings.csv", body: "userId,movieId,rating,timestamp\n"})
	s.mu.Unlock()
	if _, err := Fetch(context.Background(), "ml-latest", opt); !errors.Is(err, ErrChecksum) {
		t.Errorf("changed archive: err %v, want ErrChecksum", err)
	}
	if len(warnings) != 1 {
		t.Errorf("%d warnings, want 1", len(warnings))
	}
}

func TestFetchCancelLeavesResumablePart(t *testing.T) {
	z, files := testArchive(t)
	half := len(z) / 2
	s := &server{data: z, etag: `"v1"`, stallAfter: half}
	base := startServer(t, s)
	cache := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Fetch(ctx, "ml-100k", FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum(z), Progress: func(done, total int64) {
		if done >= int64(half) {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	part := filepath.Join(cache, "ml-100k.zip.part")
	st, err := os.Stat(part)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(half) {
		t.Errorf(".part holds %d bytes, want %d", st.Size(), half)
	}
	if isDir(filepath.Join(cache, "ml-100k")) {
		t.Error("a folder was created for an interrupted download")
	}
	// The cancelled request's handler returns only once it sees the
	// connection close; wait for it so that it is not counted as a resume
	// request's bytes (or still counting when they are read).
	first := s.stats(t)
	if len(first) != 1 || first[0].sent != int64(half) {
		t.Fatalf("cancelled download: %v, want one request sent %d bytes", first, half)
	}
	// Resume: only the rest is sent, with an If-Range of the first ETag.
	s.mu.Lock()
	s.stallAfter = 0
	s.mu.Unlock()
	dir, err := Fetch(context.Background(), "ml-100k", FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum(z)})
	if err != nil {
		t.Fatal(err)
	}
	checkExtracted(t, dir, files)
	reqs := s.stats(t)
	if len(reqs) < 2 {
		t.Fatalf("%d requests in all, want a resume request after the cancelled one", len(reqs))
	}
	resume := reqs[1:]
	if sent := totalSent(resume); sent != int64(len(z)-half) || resume[0].rng != fmt.Sprintf("bytes=%d-", half) {
		t.Errorf("resume sent %d bytes for Range %q, want %d for bytes=%d-", sent, resume[0].rng, len(z)-half, half)
	}
}

func TestFetchRedoesInterruptedExtraction(t *testing.T) {
	z, files := testArchive(t)
	base := startServer(t, &server{data: z})
	cache := t.TempDir()
	stale := filepath.Join(cache, "ml-100k")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "u.data"), []byte("truncat"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := Fetch(context.Background(), "ml-100k", FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum(z)})
	if err != nil {
		t.Fatal(err)
	}
	checkExtracted(t, dir, files)
}

func TestFetchErrors(t *testing.T) {
	z, _ := testArchive(t)
	base := startServer(t, &server{data: z})
	tests := []struct {
		name, dataset, base string
		max                 int64
		want                error
		wantMsg             string
	}{
		{name: "unknown name", dataset: "ml-7m", base: base, want: ErrUnknown, wantMsg: "ml-25m"},
		{name: "not found", dataset: "ml-100k", base: base + "missing/", wantMsg: "404"},
		{name: "too big to download", dataset: "ml-100k", base: base, max: int64(len(z) - 1), want: ErrUnsafeArchive},
		{name: "too big to extract", dataset: "ml-100k", base: base, max: int64(len(z) + 1), want: ErrUnsafeArchive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			_, err := Fetch(context.Background(), tc.dataset, FetchOptions{CacheDir: cache, BaseURL: tc.base, SHA256: sum(z), MaxBytes: tc.max})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err %q does not mention %q", err, tc.wantMsg)
			}
			if isDir(filepath.Join(cache, tc.dataset)) {
				t.Error("a dataset folder was left")
			}
		})
	}
}

func TestExtractRejectsUnsafeArchives(t *testing.T) {
	tests := []struct {
		name    string
		entries []zipEntry
	}{
		{"parent", []zipEntry{{name: "../evil.txt", body: "x"}}},
		{"parent after top folder", []zipEntry{{name: "ml-100k/../../evil.txt", body: "x"}}},
		{"parent inside top folder", []zipEntry{{name: "ml/ok", body: "x"}, {name: "ml/../evil.txt", body: "x"}}},
		{"absolute", []zipEntry{{name: "/tmp/evil.txt", body: "x"}}},
		{"backslash", []zipEntry{{name: `ml\..\..\evil.txt`, body: "x"}}},
		{"symlink", []zipEntry{{name: "ml/link", body: "/etc/passwd", link: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			src := filepath.Join(root, "a.zip")
			if err := os.WriteFile(src, makeZip(t, tc.entries...), 0o644); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(root, "sub", "dest")
			if err := os.MkdirAll(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			err := extract(src, dest, 1<<20)
			if !errors.Is(err, ErrUnsafeArchive) {
				t.Fatalf("err %v, want ErrUnsafeArchive", err)
			}
			ents, _ := os.ReadDir(dest)
			if len(ents) != 0 {
				t.Errorf("%d entries written before the rejection", len(ents))
			}
			for _, p := range []string{filepath.Join(root, "evil.txt"), filepath.Join(root, "sub", "evil.txt")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s written", p)
				}
			}
		})
	}
}

func TestFetchRejectsZipSlip(t *testing.T) {
	z := makeZip(t, zipEntry{name: "ml-100k/u.data", body: "1\t1\t5\t0\n"}, zipEntry{name: "ml-100k/../../evil.txt", body: "x"})
	base := startServer(t, &server{data: z})
	cache := filepath.Join(t.TempDir(), "cache")
	_, err := Fetch(context.Background(), "ml-100k", FetchOptions{CacheDir: cache, BaseURL: base, SHA256: sum(z)})
	if !errors.Is(err, ErrUnsafeArchive) {
		t.Fatalf("err %v, want ErrUnsafeArchive", err)
	}
	checkNoLeftovers(t, cache)
	if _, err := os.Stat(filepath.Join(filepath.Dir(cache), "evil.txt")); err == nil {
		t.Error("evil.txt written outside the cache")
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in          string
		start, size int64
		ok          bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/*", 0, -1, true},
		{"bytes */200", 0, 0, false},
		{"items 1-2/3", 0, 0, false},
		{"bytes 5-9/x", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tc := range tests {
		start, size, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (start != tc.start || size != tc.size)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %t, want %d, %d, %t", tc.in, start, size, ok, tc.start, tc.size, tc.ok)
		}
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("PRIVREC_CACHE", "/env/cache")
	if d, _ := CacheDir("/explicit"); d != "/explicit" {
		t.Errorf("CacheDir(explicit) = %s", d)
	}
	if d, _ := CacheDir(""); d != "/env/cache" {
		t.Errorf("CacheDir with PRIVREC_CACHE = %s", d)
	}
	t.Setenv("PRIVREC_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, err := CacheDir(""); err == nil && !strings.HasSuffix(d, "privrec") {
		t.Errorf("default CacheDir = %s, want a privrec folder", d)
	}
}
