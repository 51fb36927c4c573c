package main

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// coreFileGraph type-checks package hub's non-test files of this system
// (against the
// export data of its imports, from go list) and returns which file uses a
// package-level name (a function, method, type, constant or variable)
// declared in which other file.
func coreFileGraph(t *testing.T) (files []string, uses map[string]map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", "./hub")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	dir := filepath.Join(repoRoot, "hub")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
				continue // another system's file (its build constraints)
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, f)
			files = append(files, n)
		}
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check("github.com/runhub/runhub/hub", fset, parsed, info)
	if err != nil {
		t.Fatalf("type-check hub: %v", err)
	}
	uses = map[string]map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg {
			continue
		}
		switch o := obj.(type) {
		case *types.Func: // functions and methods
		case *types.TypeName, *types.Const:
			if o.Parent() != pkg.Scope() {
				continue
			}
		case *types.Var:
			if o.IsField() || o.Parent() != pkg.Scope() {
				continue
			}
		default:
			continue
		}
		from, to := filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			if uses[from] == nil {
				uses[from] = map[string]bool{}
			}
			uses[from][to] = true
		}
	}
	return files, uses
}

// The core's files are layered: no file of package hub uses, through any
// chain of files, a file that uses it (no arrow points back up), and none
// names a wire dialect (those are edges, docs/architecture.md).
func TestCoreFileLayers(t *testing.T) {
	files, uses := coreFileGraph(t)
	const white, grey, black = 0, 1, 2
	color := map[string]int{}
	var stack []string
	var visit func(f string)
	visit = func(f string) {
		color[f] = grey
		stack = append(stack, f)
		var next []string
		for g := range uses[f] {
			next = append(next, g)
		}
		sort.Strings(next)
		for _, g := range next {
			switch color[g] {
			case grey:
				i := len(stack) - 1
				for stack[i] != g {
					i--
				}
				t.Errorf("hub's files use each other in a cycle: %s -> %s", strings.Join(stack[i:], " -> "), g)
			case white:
				visit(g)
			}
		}
		stack = stack[:len(stack)-1]
		color[f] = black
	}
	for _, f := range files {
		if color[f] == white {
			visit(f)
		}
	}
	dialect := regexp.MustCompile(`(?i)ag-?ui|ai ?sdk|webui|hermes|copilotkit|durable stream`)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, "hub", f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := dialect.FindString(line); m != "" {
				t.Errorf("hub/%s:%d names a dialect (%q): it belongs in an edge package", f, i+1, m)
			}
		}
	}
}
