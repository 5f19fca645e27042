// Package web is the page privrec serve serves at /: a person searches
// and rates the run's public catalog, keeps the ratings in the browser
// (IndexedDB), takes part in the run's masked rounds through the wasm
// client (packages wasm and webclient), sees a privacy panel and gets
// recommendations computed in the browser. Everything is embedded: the
// committed static/client.wasm.gz is rebuilt by go generate ./web, and
// TestArtifactNotStale checks it against the sources' hash it records.
package web

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed static/index.html static/app.js static/style.css static/wasm_exec.js static/client.wasm.gz static/client.src
var static embed.FS

type asset struct {
	ctype   string
	raw, gz []byte
}

var (
	once   sync.Once
	assets map[string]*asset
)

func load() {
	assets = map[string]*asset{}
	for name, ctype := range map[string]string{
		"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
		"style.css": "text/css; charset=utf-8", "wasm_exec.js": "text/javascript; charset=utf-8",
	} {
		raw, err := static.ReadFile("static/" + name)
		if err != nil {
			panic(err) // unreachable: embedded
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(raw)
		zw.Close()
		assets[name] = &asset{ctype: ctype, raw: raw, gz: gz.Bytes()}
	}
	gz, err := static.ReadFile("static/client.wasm.gz")
	if err != nil {
		panic(err)
	}
	assets["client.wasm"] = &asset{ctype: "application/wasm", gz: gz}
}

// Handler serves the page: / and its assets, gzipped for a browser that
// accepts gzip. Any other path is not found.
func Handler() http.Handler {
	once.Do(load)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := path.Base(r.URL.Path)
		if r.URL.Path == "/" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok || strings.Count(r.URL.Path, "/") != 1 {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' https:; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		h.Add("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			w.Write(a.gz)
			return
		}
		if a.raw == nil {
			zr, err := gzip.NewReader(bytes.NewReader(a.gz))
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			io.Copy(w, zr)
			return
		}
		w.Write(a.raw)
	})
}

// Source returns the sources' hash and Go version the embedded wasm
// client was built from (static/client.src).
func Source() string {
	b, _ := static.ReadFile("static/client.src")
	return string(b)
}
