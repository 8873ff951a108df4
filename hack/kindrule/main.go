// Command kindrule keeps each workload kind known in one place: it fails
// when code outside internal/targets' kind files switches on a workload
// kind (a type switch case on *appsv1.Deployment or *appsv1.StatefulSet, or
// a switch case or comparison on a kind's name). Such code asks the
// targets.Kind instead, so that adding a kind is one file and its tests.
// Inside the engine (internal/placement), a kind is named only by its own
// files (sim_kind_<name>*.go): any other use of the API's KindDeployment or
// KindStatefulSet there (a map key, an argument) asks the kind's rollouts
// instead.
// Tests are exempt: they build fixtures of a given kind.
//
//	go run ./hack/kindrule [dir...]   # default: api cmd internal
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// kindsHome is where the kinds are known; its kind files may switch.
const kindsHome = "internal/targets/kind"

// engineHome is the engine's package, whose own kind files (engineKinds)
// alone name a kind.
const (
	engineHome  = "internal/placement/"
	engineKinds = "internal/placement/sim_kind_"
)

// apiPath is the API's package, which declares the kinds' names.
const apiPath = "github.com/placement-guard/placement-guard/api/v1alpha1"

// kindTypes are the workload types of k8s.io/api/apps/v1.
var kindTypes = map[string]bool{"Deployment": true, "StatefulSet": true}

// kindNames are the identifiers and literals that name a workload kind,
// by the import path they are declared in ("" for a string literal).
var kindNames = map[string]map[string]bool{
	apiPath: {"KindDeployment": true, "KindStatefulSet": true},
	"":      {`"Deployment"`: true, `"StatefulSet"`: true},
}

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"api", "cmd", "internal"}
	}
	var found []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.HasPrefix(filepath.ToSlash(path), kindsHome) {
				return err
			}
			hits, err := check(path)
			found = append(found, hits...)
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if len(found) > 0 {
		for _, f := range found {
			fmt.Println(f)
		}
		fmt.Printf("%d use(s) of a workload kind outside %s*.go and %s*.go: ask the targets.Kind, or in the engine the kind's rollouts, instead (internal/targets/kind.go, internal/placement/sim_kind.go)\n", len(found), kindsHome, engineKinds)
		os.Exit(1)
	}
}

// check lists the switches on a workload kind in one file.
func check(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	imports := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = p
	}
	var hits []string
	report := func(n ast.Node, what string) {
		hits = append(hits, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), what))
	}
	if inEngine(path) {
		hits = append(hits, engineKindNames(fset, f, imports)...)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSwitchStmt:
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if t := appsType(e, imports); t != "" {
						report(e, "type switch case on *appsv1."+t)
					}
				}
			}
		case *ast.SwitchStmt:
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if name := kindName(e, imports); name != "" {
						report(e, "switch case on "+name)
					}
				}
			}
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			for _, e := range []ast.Expr{n.X, n.Y} {
				if name := kindName(e, imports); name != "" {
					report(e, "comparison with "+name)
				}
			}
		}
		return true
	})
	return hits, nil
}

// appsType is the workload type a type switch case names, "" for another.
func appsType(e ast.Expr, imports map[string]string) string {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return ""
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if pkg, ok := sel.X.(*ast.Ident); ok && imports[pkg.Name] == "k8s.io/api/apps/v1" && kindTypes[sel.Sel.Name] {
		return sel.Sel.Name
	}
	return ""
}

// kindName is the kind an expression names, "" for another expression.
func kindName(e ast.Expr, imports map[string]string) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING && kindNames[""][e.Value] {
			return e.Value
		}
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok && kindNames[imports[pkg.Name]][e.Sel.Name] {
			return pkg.Name + "." + e.Sel.Name
		}
	}
	return ""
}

// inEngine reports whether path is a file of the engine's package, other
// than its kind files.
func inEngine(path string) bool {
	p := filepath.ToSlash(path)
	rest, ok := strings.CutPrefix(p, engineHome)
	return ok && !strings.Contains(rest, "/") && !strings.HasPrefix(p, engineKinds)
}

// engineKindNames lists every use of a kind's name in one of the engine's
// files, whatever it is used for.
func engineKindNames(fset *token.FileSet, f *ast.File, imports map[string]string) []string {
	var hits []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if name := kindName(sel, imports); name != "" {
				hits = append(hits, fmt.Sprintf("%s: the kind %s named in the engine outside %s*.go", fset.Position(n.Pos()), name, engineKinds))
			}
		}
		return true
	})
	return hits
}
