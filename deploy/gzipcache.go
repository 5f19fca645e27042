package deploy

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"sync"

	"connectrpc.com/connect"
)

// Gzip once, for every client.
//
// The large answers a server sends are the same for many clients: every
// client of a round gets the round's broadcast in its GetRound answer
// (ML-1M's dp-als item table is 163 KB), and every client the published
// model. Connect compresses each answer anew, and gzip costs about 7 ms
// for such a table on this machine (23 MB/s), so a round of 6,040
// clients spent some 40 s of the server's CPU compressing one table.
// The server's gzip (gzipCached) keeps the compressed bytes of recent
// large answers, keyed by the SHA-256 of the uncompressed message, so
// that an answer is compressed once however many clients receive it.
// Small answers are compressed each time, as before.
const (
	// cacheMinBytes is the least size of an answer kept compressed.
	cacheMinBytes = 32 << 10
	// cacheMaxBytes bounds the compressed bytes kept; the oldest go
	// first.
	cacheMaxBytes = 64 << 20
)

// gzipCache holds recent answers' gzip, by the SHA-256 of the answer.
type gzipCache struct {
	mu      sync.Mutex
	entries map[[32]byte]*gzipEntry
	order   [][32]byte // keys, oldest first
	bytes   int        // compressed bytes held by finished entries
	max     int        // bound on bytes (cacheMaxBytes)
	// off compresses every answer anew (benchmarks compare the two).
	off bool
}

type gzipEntry struct {
	done chan struct{} // closed once out is set
	out  []byte
}

func newGzipCache() *gzipCache {
	return &gzipCache{entries: map[[32]byte]*gzipEntry{}, max: cacheMaxBytes}
}

// gzip returns src compressed with gzip: from the cache, or compressed
// now and kept. Concurrent calls for the same src compress it once.
func (c *gzipCache) gzip(src []byte) ([]byte, error) {
	key := sha256.Sum256(src)
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		<-e.done
		return e.out, nil
	}
	e := &gzipEntry{done: make(chan struct{})}
	c.entries[key] = e
	c.order = append(c.order, key)
	c.mu.Unlock()

	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(src)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	e.out = buf.Bytes()
	close(e.done)

	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// Never kept: the next answer compresses it again.
		if c.entries[key] == e {
			c.drop(key)
		}
		return nil, err
	}
	if c.entries[key] != e {
		return e.out, nil // evicted while it was compressed
	}
	c.bytes += len(e.out)
	for c.bytes > c.max && len(c.order) > 1 {
		c.drop(c.order[0])
	}
	return e.out, nil
}

// drop forgets key; c.mu is held.
func (c *gzipCache) drop(key [32]byte) {
	e, ok := c.entries[key]
	if !ok {
		return
	}
	select {
	case <-e.done:
		c.bytes -= len(e.out)
	default: // being compressed: its bytes were never counted
	}
	delete(c.entries, key)
	for k, o := range c.order {
		if o == key {
			c.order = append(c.order[:k], c.order[k+1:]...)
			break
		}
	}
}

// compression returns the handler option that makes c the server's
// gzip (Connect's default decompressor, c for compression).
func (c *gzipCache) compression() connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &gzip.Reader{} },
		func() connect.Compressor { return &gzipCached{cache: c} })
}

// gzipCached is a Connect compressor that takes the whole answer, then
// writes its gzip: from the cache for a large answer, compressed now
// for a small one.
type gzipCached struct {
	cache *gzipCache
	dst   io.Writer
	buf   bytes.Buffer
	gz    *gzip.Writer // for small answers
}

func (z *gzipCached) Reset(w io.Writer) {
	z.dst = w
	z.buf.Reset()
}

func (z *gzipCached) Write(p []byte) (int, error) { return z.buf.Write(p) }

func (z *gzipCached) Close() error {
	src := z.buf.Bytes()
	defer z.buf.Reset()
	if len(src) >= cacheMinBytes && !z.cache.off {
		out, err := z.cache.gzip(src)
		if err != nil {
			return err
		}
		_, err = z.dst.Write(out)
		return err
	}
	if z.gz == nil {
		z.gz = gzip.NewWriter(z.dst)
	} else {
		z.gz.Reset(z.dst)
	}
	if _, err := z.gz.Write(src); err != nil {
		return err
	}
	return z.gz.Close()
}
