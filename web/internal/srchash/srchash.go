// Package srchash hashes the sources the page's wasm client is built
// from: every Go file of the module's packages in the wasm command's
// dependencies (for GOOS=js GOARCH=wasm), with the path and version of
// every other module it links (not go.mod and go.sum whole, which change
// with test-only dependencies). The
// committed client.wasm.gz records the hash it was built from, so that a
// test can tell a stale artifact without rebuilding it.
package srchash

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Pkg is the wasm command's import path.
const Pkg = "github.com/privrec/privrec/wasm"

// Of returns the hex SHA-256 of the wasm client's sources, from the
// module root root (go list runs there).
func Of(root string) (string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles \",\"}}|{{join .EmbedFiles \",\"}}{{else}}mod|{{.Module.Path}}@{{.Module.Version}}{{end}}{{end}}", Pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "GOFLAGS=-mod=mod", "GOWORK=off") // the library module alone
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("srchash: go list: %v: %s", err, stderr.String())
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	var files, mods []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "mod|"); ok {
			mods = append(mods, m)
			continue
		}
		parts := strings.Split(sc.Text(), "|")
		if len(parts) != 3 {
			continue
		}
		for _, list := range parts[1:] {
			for _, f := range strings.Split(list, ",") {
				if f != "" {
					files = append(files, filepath.Join(parts[0], f))
				}
			}
		}
	}
	slices.Sort(files)
	mods = slices.Compact(slices.Sorted(slices.Values(mods)))
	h := sha256.New()
	for _, m := range mods {
		fmt.Fprintln(h, "module", m)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(abs, f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
