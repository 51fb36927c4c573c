package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/runhub/runhub/"

// docPackages reads the package table of docs/architecture.md: each row's
// package and the runhub packages it may import, in the table's order.
func docPackages(t *testing.T) (order []string, imports map[string][]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| package | its job | imports |")
	if !ok {
		t.Fatal("docs/architecture.md has no package table")
	}
	imports = map[string][]string{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("architecture table row %q: want 3 cells", line)
		}
		pkg := strings.Trim(cells[0], "`")
		var deps []string
		if cells[2] != "—" {
			for _, d := range strings.Split(cells[2], ", ") {
				deps = append(deps, strings.TrimSpace(d))
			}
		}
		order = append(order, pkg)
		imports[pkg] = deps
	}
	return order, imports
}

// The packages and their arrows are those docs/architecture.md draws: every
// package is in its table, imports exactly the runhub packages its row
// lists, and only packages above it (the arrows point one way).
func TestArchitectureArrows(t *testing.T) {
	order, documented := docPackages(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rank := map[string]int{}
	for i, p := range order {
		rank[p] = i
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], modulePath)
		seen[pkg] = true
		want, ok := documented[pkg]
		if !ok {
			t.Errorf("package %s is not in docs/architecture.md's table", pkg)
			continue
		}
		var got []string
		for _, imp := range fields[1:] {
			if dep, ok := strings.CutPrefix(imp, modulePath); ok {
				got = append(got, dep)
				if r, ok := rank[dep]; ok && r >= rank[pkg] {
					t.Errorf("%s imports %s, which is not above it in the table", pkg, dep)
				}
			}
		}
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s imports %v; docs/architecture.md says %v", pkg, got, want)
		}
	}
	for _, p := range order {
		if !seen[p] {
			t.Errorf("docs/architecture.md lists %s, which is not a package", p)
		}
	}
}

// The most lines a Go file of the repository may have: a file that grows
// past its limit is split by topic (docs/architecture.md).
const maxSourceLines, maxTestLines = 500, 800

// Every Go file of the repository stays within its limit: maxSourceLines
// for a non-test file, maxTestLines for a _test.go file (whatever its
// build tags). A line is what wc -l counts, plus a last line that lacks
// its newline.
func TestFileSizes(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "testdata" || (strings.HasPrefix(n, ".") && path != repoRoot) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			lines++
		}
		limit := maxSourceLines
		if strings.HasSuffix(path, "_test.go") {
			limit = maxTestLines
		}
		if lines > limit {
			rel, _ := filepath.Rel(repoRoot, path)
			t.Errorf("%s has %d lines, over %d: split it by topic", rel, lines, limit)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files found under %s: the walk missed the repository", checked, repoRoot)
	}
}
