// Command layerrule keeps the engine's layers pointing one way. The files
// of internal/placement are named by their layer, from the ground up:
//
//	model_   what the engine is asked about: workloads, constraints,
//	         resources, affinity terms, hazards, the pods it tells apart
//	index_   the snapshot of the cluster and what it keeps between questions
//	filter_  the scheduler's filters, evaluating one pod over the snapshot
//	score_   the scheduler's scores, ranking the nodes the filters left
//	sim_     the simulations: placing a template, rollouts, end states,
//	         scale-downs, drains; each kind's rollout in sim_kind_<name>*.go
//	ask_     the questions the operator asks: analysis, hazards, capacity
//	         and its request, moves, deletion costs, measurements, Pending
//
// A file may use what its own layer and the layers below it declare, never
// what a layer above declares. The check type-checks the package, so a
// use is a use of the declaration itself (a type, a function, a method, a
// field, a constant), not a word that happens to match. A file named by no
// layer is refused too, so that a new file picks one. Tests are exempt:
// they exercise the layers together.
//
//	go run ./hack/layerrule [dir]   # default: internal/placement
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// layers are the file-name prefixes of the engine's layers, lowest first.
var layers = []string{"model_", "index_", "filter_", "score_", "sim_", "ask_"}

// unlayered are the files that declare nothing and so belong to no layer.
var unlayered = map[string]bool{"doc.go": true}

func main() {
	dir := "internal/placement"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	found, err := check(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layerrule:", err)
		os.Exit(2)
	}
	for _, f := range found {
		fmt.Println(f)
	}
	if len(found) > 0 {
		fmt.Printf("%d use(s) against the engine's layers (%s, lowest first): move the declaration down, or the use up\n",
			len(found), strings.Join(layers, " < "))
		os.Exit(1)
	}
}

// layerOf is the rank of a file's layer, -1 when its name gives none.
func layerOf(file string) int {
	base := filepath.Base(file)
	for i, p := range layers {
		if strings.HasPrefix(base, p) {
			return i
		}
	}
	return -1
}

// check type-checks the package in dir and lists its files named by no
// layer and every use of a declaration from a layer above the user's.
func check(dir string) ([]string, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, f := range files {
		name := fset.Position(f.Package).Filename
		if layerOf(name) < 0 && !unlayered[filepath.Base(name)] {
			found = append(found, fmt.Sprintf("%s: named by no layer: start its name with one of %s", name, strings.Join(layers, ", ")))
		}
	}
	imp, err := exportImporter(fset, dir)
	if err != nil {
		return nil, err
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check(dir, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-check %s: %w", dir, err)
	}
	seen := map[string]bool{}
	judge := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		user, decl := fset.Position(at), fset.Position(obj.Pos())
		if layerOf(decl.Filename) <= layerOf(user.Filename) || layerOf(user.Filename) < 0 {
			return
		}
		line := fmt.Sprintf("%s: %s uses %s, declared in %s (a layer above)", user, filepath.Base(user.Filename), obj.Name(), filepath.Base(decl.Filename))
		if !seen[line] {
			seen[line] = true
			found = append(found, line)
		}
	}
	for id, obj := range info.Uses {
		judge(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		judge(sel.Sel.Pos(), s.Obj())
	}
	sort.Strings(found)
	return found, nil
}

// parseDir parses the package's files, tests left out.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	return files, nil
}

// exportImporter imports the package's dependencies from the export data
// the go command builds for them (and keeps in its build cache).
func exportImporter(fset *token.FileSet, dir string) (types.Importer, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export in %s: %w: %s", dir, err, stderr.String())
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), " "); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}), nil
}
