// Command codeshape measures the shape of the privrec tree: the numbers
// issue 43 asks for before and after a refactor.
//
// Usage (from the module root):
//
//	go run ./scripts/codeshape [-dup] [-root DIR] > docs/results/code-shape-X.md
//
// It prints, as Markdown:
//
//   - lines per package, counting only non-test, non-generated Go files
//     (a file is generated when it carries the standard
//     "// Code generated ... DO NOT EDIT." line);
//   - files over 700 lines (the house limit is 800);
//   - functions over 100 lines (declaration to closing brace);
//   - imports that run from a lower layer to a higher one;
//   - with -dup, repeated blocks of six or more lines outside tests and
//     generated code, by running the workplace's `duplicates` command on
//     a temporary copy that holds only those files:
//     `duplicates --repo TMP --min-lines 6 --most 200 --seconds 300`.
//
// # Layers
//
// The layers describe the intended architecture, lowest first. A package
// may import packages of its own layer or of lower ones; an import of a
// higher layer is listed as running up. A package the table does not
// name is listed as unlayered, so that a new package has to be placed.
//
//  0. ground: helpers with no knowledge of recommenders or privacy: rng,
//     internal/vec, internal/linalg, internal/progress,
//     internal/atomicfile, internal/kstest, web/internal/srchash and the
//     generated wire stubs under gen/.
//  1. data: ratings and what is read or computed from them without
//     privacy: ratings, datasets, itemmeta, model, eval, internal/testdata,
//     internal/tuning.
//  2. mechanisms: privacy and aggregation primitives: dp, accountant,
//     accountant/rdp, budget, secagg.
//  3. protocol: the federated contract between server and clients:
//     protocol, protocol/protocoltest, maskplan (the integer path).
//  4. methods: the recommenders: baseline, mf, pmf, bmf, fm, topn, hdpmf,
//     ldpop, sdcf, dpals, dpease.
//  5. registry: method, which names and configures every method.
//  6. transport: serving a method over a network or in a browser: deploy,
//     deploy/deploytest, shard, webclient, web, wasm.
//  7. top: programs and studies: audit, experiment, cmd/privrec,
//     scripts/..., web/gen, and the nested modules tools/ and e2e/.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// module is the import path of the module measured.
const module = "github.com/privrec/privrec"

// layerNames names the layers of layers, lowest first.
var layerNames = []string{"ground", "data", "mechanisms", "protocol", "methods", "registry", "transport", "top"}

// layers places each package (by path relative to the module) on a layer;
// a path ending in "/..." covers the packages below it.
var layers = map[string]int{
	"rng": 0, "internal/vec": 0, "internal/linalg": 0,
	"internal/progress": 0, "internal/atomicfile": 0, "internal/kstest": 0,
	"web/internal/srchash": 0, "gen/...": 0,
	"ratings": 1, "datasets": 1, "itemmeta": 1, "model": 1, "eval": 1,
	"internal/testdata": 1, "internal/tuning": 1,
	"dp": 2, "accountant": 2, "accountant/rdp": 2, "budget": 2, "secagg": 2,
	"protocol": 3, "protocol/protocoltest": 3, "maskplan": 3,
	"baseline": 4, "mf": 4, "pmf": 4, "bmf": 4, "fm": 4, "topn": 4, "hdpmf": 4,
	"ldpop": 4, "sdcf": 4, "dpals": 4, "dpease": 4,
	"method": 5,
	"deploy": 6, "shard": 6, "webclient": 6, "web": 6, "wasm": 6, "deploy/deploytest": 6,
	"audit": 7, "experiment": 7, "cmd/...": 7, "scripts/...": 7, "web/gen": 7, "tools/...": 7, "e2e/...": 7,
}

// layerOf returns the layer of the package at rel, or -1.
func layerOf(rel string) int {
	if l, ok := layers[rel]; ok {
		return l
	}
	for p, l := range layers {
		if base, ok := strings.CutSuffix(p, "/..."); ok && (rel == base || strings.HasPrefix(rel, base+"/")) {
			return l
		}
	}
	return -1
}

// generated matches the standard marker of generated Go files.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// file is one non-test, non-generated Go file.
type file struct {
	rel   string // path relative to the root
	pkg   string // package directory relative to the root
	lines int
	src   []byte
}

// funcLen is a function longer than the limit.
type funcLen struct {
	where string
	name  string
	lines int
}

func main() {
	root := flag.String("root", ".", "module root")
	dup := flag.Bool("dup", false, "also run the duplicates command")
	flag.Parse()
	files, err := collect(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codeshape:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if err := report(w, files, *dup); err != nil {
		w.Flush()
		fmt.Fprintln(os.Stderr, "codeshape:", err)
		os.Exit(1)
	}
}

// collect reads every non-test, non-generated Go file below root,
// skipping hidden folders, testdata and vendor.
func collect(root string) ([]file, error) {
	var files []file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(src) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		files = append(files, file{rel: rel, pkg: filepath.ToSlash(filepath.Dir(rel)), lines: bytes.Count(src, []byte("\n")), src: src})
		return nil
	})
	return files, err
}

// report writes every section.
func report(w io.Writer, files []file, dup bool) error {
	fmt.Fprintf(w, "# Code shape\n\nNon-test, non-generated Go files: %d, %d lines.\n\n", len(files), total(files))
	packageLines(w, files)
	bigFiles(w, files)
	if err := longFuncs(w, files); err != nil {
		return err
	}
	if err := upImports(w, files); err != nil {
		return err
	}
	if dup {
		return duplicates(w, files)
	}
	return nil
}

// total sums the lines of files.
func total(files []file) int {
	n := 0
	for _, f := range files {
		n += f.lines
	}
	return n
}

// packageLines prints the lines of each package, largest first.
func packageLines(w io.Writer, files []file) {
	per := map[string]int{}
	for _, f := range files {
		per[f.pkg] += f.lines
	}
	pkgs := make([]string, 0, len(per))
	for p := range per {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool {
		if per[pkgs[i]] != per[pkgs[j]] {
			return per[pkgs[i]] > per[pkgs[j]]
		}
		return pkgs[i] < pkgs[j]
	})
	fmt.Fprintf(w, "## Lines per package (%d packages)\n\n| package | layer | lines |\n| --- | --- | ---: |\n", len(pkgs))
	for _, p := range pkgs {
		fmt.Fprintf(w, "| %s | %s | %d |\n", p, layerName(layerOf(p)), per[p])
	}
	fmt.Fprintln(w)
}

// layerName names layer l ("unlayered" for -1).
func layerName(l int) string {
	if l < 0 {
		return "unlayered"
	}
	return layerNames[l]
}

// bigFiles prints the files over 700 lines.
func bigFiles(w io.Writer, files []file) {
	big := slices.DeleteFunc(slices.Clone(files), func(f file) bool { return f.lines <= 700 })
	sort.Slice(big, func(i, j int) bool { return big[i].lines > big[j].lines })
	over := 0
	for _, f := range big {
		if f.lines > 800 {
			over++
		}
	}
	fmt.Fprintf(w, "## Files over 700 lines (%d; over 800: %d)\n\n| file | lines |\n| --- | ---: |\n", len(big), over)
	for _, f := range big {
		fmt.Fprintf(w, "| %s | %d |\n", f.rel, f.lines)
	}
	fmt.Fprintln(w)
}

// longFuncs prints the functions over 100 lines.
func longFuncs(w io.Writer, files []file) error {
	var long []funcLen
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f.rel, f.src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > 100 {
				long = append(long, funcLen{where: fmt.Sprintf("%s:%d", f.rel, start.Line), name: funcName(fd), lines: n})
			}
		}
	}
	sort.Slice(long, func(i, j int) bool { return long[i].lines > long[j].lines })
	fmt.Fprintf(w, "## Functions over 100 lines (%d)\n\n| function | where | lines |\n| --- | --- | ---: |\n", len(long))
	for _, l := range long {
		fmt.Fprintf(w, "| %s | %s | %d |\n", l.name, l.where, l.lines)
	}
	fmt.Fprintln(w)
	return nil
}

// funcName names fd, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// edge is an import of package to by package from.
type edge struct{ from, to string }

// upImports prints the imports that run from a lower layer to a higher
// one, and the packages without a layer.
func upImports(w io.Writer, files []file) error {
	seen := map[edge]string{}
	unlayered := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f.rel, f.src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		from := layerOf(f.pkg)
		if from < 0 {
			unlayered[f.pkg] = true
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			rel, ok := strings.CutPrefix(p, module+"/")
			if !ok {
				continue
			}
			to := layerOf(rel)
			if to < 0 {
				unlayered[rel] = true
			}
			if e := (edge{f.pkg, rel}); from >= 0 && to > from && seen[e] == "" {
				seen[e] = f.rel
			}
		}
	}
	edges := make([]edge, 0, len(seen))
	for e := range seen {
		edges = append(edges, e)
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].from != edges[j].from {
			return edges[i].from < edges[j].from
		}
		return edges[i].to < edges[j].to
	})
	fmt.Fprintf(w, "## Imports running up a layer (%d)\n\nLayers, lowest first: %s (see the program's doc).\n\n", len(edges), strings.Join(layerNames, " < "))
	fmt.Fprintf(w, "| importer | layer | imports | layer | first file |\n| --- | --- | --- | --- | --- |\n")
	for _, e := range edges {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", e.from, layerName(layerOf(e.from)), e.to, layerName(layerOf(e.to)), seen[e])
	}
	fmt.Fprintln(w)
	var deployUses []string
	for e := range seen2(files) {
		if e.from == "deploy" && (layerOf(e.to) == 4 || layerOf(e.to) == 5 || e.to == "dp") {
			deployUses = append(deployUses, e.to)
		}
	}
	sort.Strings(deployUses)
	fmt.Fprintf(w, "deploy imports of method packages, method or dp (issue 43 wants none): %d %v\n\n", len(deployUses), deployUses)
	if len(unlayered) > 0 {
		names := make([]string, 0, len(unlayered))
		for p := range unlayered {
			names = append(names, p)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "Unlayered packages (place them in the program's table): %s\n\n", strings.Join(names, ", "))
	}
	return nil
}

// seen2 returns every import edge between the module's packages.
func seen2(files []file) map[edge]bool {
	all := map[edge]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f.rel, f.src, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				all[edge{f.pkg, rel}] = true
			}
		}
	}
	return all
}

// duplicates copies files to a temporary folder and runs the workplace's
// duplicates command on it, so that tests and generated code do not count.
func duplicates(w io.Writer, files []file) error {
	tmp, err := os.MkdirTemp("", "codeshape")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		dst := filepath.Join(tmp, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, f.src, 0o644); err != nil {
			return err
		}
	}
	out, err := exec.Command("duplicates", "--repo", tmp, "--min-lines", "6", "--most", "200", "--seconds", "300").Output()
	if err != nil {
		return fmt.Errorf("duplicates: %w", err)
	}
	fmt.Fprintf(w, "## Repeated blocks of six or more lines (non-test, non-generated)\n\n")
	fmt.Fprintf(w, "`duplicates --repo TMP --min-lines 6 --most 200 --seconds 300` on a copy of the files above:\n\n```\n%s```\n", out)
	return nil
}
