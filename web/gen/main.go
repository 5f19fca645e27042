// Command gen rebuilds the page's wasm client (go generate ./web): it
// compiles package wasm with GOOS=js GOARCH=wasm, -trimpath,
// -ldflags="-s -w" and no inlining outside the hot paths (see run), gzips it (zopfli when installed, else level 9) without a name or time (so the
// same sources and Go give the same bytes), copies the Go runtime's
// wasm_exec.js, and records the sources' hash (package srchash) that the
// web package's test checks the artifact against.
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/privrec/privrec/web/internal/srchash"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	// go generate runs in web/; the module root is its parent.
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "privrec-wasm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "client.wasm")
	// No inlining in privrec's own packages and in encoding/json, fmt,
	// reflect and strconv: Go's wasm code for an inlined body is large
	// and compresses poorly, and none of these is on the hot path of a
	// masked round (the cryptography and gonum keep their inlining).
	// Measured on the client of issue 44's active protocol: 1,936,819
	// bytes at gzip -9 with inlining, 1,882,027 without it there (-2.8%);
	// the e2e test's masked rounds stay far inside their 2 s budget.
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w",
		"-gcflags=github.com/privrec/privrec/...=-l", "-gcflags=encoding/json=-l", "-gcflags=fmt=-l",
		"-gcflags=reflect=-l", "-gcflags=strconv=-l", "-o", raw, srchash.Pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "GOWORK=off") // the library module alone, as go get builds it
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		return err
	}
	gz, err := compress(raw, b)
	if err != nil {
		return err
	}
	if err := os.WriteFile("static/client.wasm.gz", gz, 0o644); err != nil {
		return err
	}
	goroot := strings.TrimSpace(runtime.GOROOT())
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	exec_, err := os.ReadFile(filepath.Join(goroot, "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		return err
	}
	if err := os.WriteFile("static/wasm_exec.js", exec_, 0o644); err != nil {
		return err
	}
	sum, err := srchash.Of(root)
	if err != nil {
		return err
	}
	ver, _ := exec.Command("go", "env", "GOVERSION").Output()
	rec := fmt.Sprintf("%s\n%s\n", sum, strings.TrimSpace(string(ver)))
	if err := os.WriteFile("static/client.src", []byte(rec), 0o644); err != nil {
		return err
	}
	fmt.Printf("client.wasm: %d bytes, %d gzipped; sources %s\n", len(b), len(gz), sum[:12])
	return nil
}

// compress gzips the wasm: with zopfli when it is installed (5%
// smaller, the format browsers read as gzip), else compress/gzip at
// level 9. Both write no name or time, so the output is reproducible.
func compress(path string, b []byte) ([]byte, error) {
	if _, err := exec.LookPath("zopfli"); err == nil {
		return exec.Command("zopfli", "-c", "--i5", path).Output()
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.Write(b)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return gz.Bytes(), nil
}
