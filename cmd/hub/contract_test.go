package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// contractStatuses are the statuses a requirement of docs/contract.md may
// have.
var contractStatuses = map[string]bool{
	"implemented+tested": true,
	"partial":            true,
	"deviates":           true,
	"not in scope":       true,
}

var (
	// contractRow is a requirement row: | ID-n | text | status | proof |.
	contractRow = regexp.MustCompile(`^\|\s*([A-Z]+-\d+)\s*\|(.*)\|\s*([a-z+ ]+?)\s*\|(.*)\|\s*$`)
	// testName is a test named in a row, with an optional subtest path.
	testName = regexp.MustCompile("`(Test[A-Za-z0-9_]+)(/[^`]*)?`")
	testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
)

// contractRequirement is one row of docs/contract.md's requirement tables.
type contractRequirement struct {
	id, text, status, proof string
	tests                   []string
	paths                   []string // the tests named with a subtest path, as named (Test/Sub/…)
}

// parseContract returns the requirement rows of a contract document.
func parseContract(doc string) []contractRequirement {
	var out []contractRequirement
	for _, line := range strings.Split(doc, "\n") {
		m := contractRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := contractRequirement{id: m[1], text: strings.TrimSpace(m[2]), status: m[3], proof: strings.TrimSpace(m[4])}
		for _, t := range testName.FindAllStringSubmatch(m[4], -1) {
			r.tests = append(r.tests, t[1])
			if t[2] != "" {
				r.paths = append(r.paths, t[1]+t[2])
			}
		}
		out = append(out, r)
	}
	return out
}

// repoTests returns the name of every top-level test function in the
// repository's *_test.go files.
func repoTests(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || (strings.HasPrefix(n, ".") && path != repoRoot) || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// repoGoSources returns the text of every Go file of the repository
// (subtests are named by string literals, in a test's t.Run or a suite's
// table outside *_test.go files).
func repoGoSources(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || (strings.HasPrefix(n, ".") && path != repoRoot) || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(src)
			b.WriteByte('\n')
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// missingSubtest returns the first element of path's subtest path (Test/A/B)
// that no Go string literal of sources names ("A", or with spaces where go
// test shows underscores), or "".
func missingSubtest(path, sources string) string {
	elems := strings.Split(path, "/")[1:]
	for _, e := range elems {
		if !strings.Contains(sources, `"`+e+`"`) && !strings.Contains(sources, `"`+strings.ReplaceAll(e, "_", " ")+`"`) {
			return e
		}
	}
	return ""
}

// docs/contract.md's requirement tables are sound: ids unique, a known
// status on every row, a reason on every row that is not implemented+tested,
// a test on every implemented+tested row, and every test named exists in
// the repository, in a row or anywhere else on the page (a renamed or
// deleted test fails here). The README links
// the page instead of claiming the contract wholesale, and the page keeps
// its deviations and state inventory.
func TestContractTableNamesRealTests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := parseContract(doc)
	if len(rows) < 40 {
		t.Fatalf("docs/contract.md has %d requirement rows; the parser or the page is broken", len(rows))
	}
	tests := repoTests(t)
	sources := repoGoSources(t)
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.id] {
			t.Errorf("%s: id used twice", r.id)
		}
		seen[r.id] = true
		if !contractStatuses[r.status] {
			t.Errorf("%s: status %q is not one of implemented+tested, partial, deviates, not in scope", r.id, r.status)
		}
		if r.text == "" {
			t.Errorf("%s: no requirement text", r.id)
		}
		if r.status == "implemented+tested" && len(r.tests) == 0 {
			t.Errorf("%s: implemented+tested names no test", r.id)
		}
		if r.status != "implemented+tested" && len(testName.ReplaceAllString(r.proof, "")) < 20 {
			t.Errorf("%s: %s without a reason: %q", r.id, r.status, r.proof)
		}
		for _, name := range r.tests {
			if !tests[name] {
				t.Errorf("%s names %s, which is no test of the repository (no func %s in a *_test.go)", r.id, name, name)
			}
		}
		for _, path := range r.paths {
			if sub := missingSubtest(path, sources); sub != "" {
				t.Errorf("%s names %s, whose subtest %q is named by no string in the repository's Go files", r.id, path, sub)
			}
		}
	}

	// Tests named outside the requirement rows (the state inventory, the
	// deviations) must exist too.
	for _, line := range strings.Split(doc, "\n") {
		if contractRow.MatchString(line) {
			continue
		}
		for _, m := range testName.FindAllStringSubmatch(line, -1) {
			if !tests[m[1]] {
				t.Errorf("docs/contract.md names %s outside the requirements, which is no test of the repository", m[1])
			}
			if sub := missingSubtest(m[1]+m[2], sources); m[2] != "" && sub != "" {
				t.Errorf("docs/contract.md names %s%s outside the requirements, whose subtest %q is named by no string in the repository's Go files", m[1], m[2], sub)
			}
		}
	}

	for _, want := range []string{
		"## Deviations", "Separate cancelled and error terminals", "`interrupted`", "journal is always on",
		"queue and the goal's state are the hub's", "HTTP shapes",
		"## State inventory", "active run", "cancel flag", "pending approval / clarify", "session queue",
		"goal", "leases", "presence", "stream cursors",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/contract.md lacks %q", want)
		}
	}

	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "(docs/contract.md)") {
		t.Error("the README does not link docs/contract.md")
	}
	if strings.Contains(strings.ToLower(string(readme)), "it implements the hermes run-adapter contract") {
		t.Error("the README claims the whole contract instead of linking docs/contract.md")
	}
}

// The parser finds rows, statuses and test names, and the check catches a
// test that does not exist.
func TestContractTableParser(t *testing.T) {
	doc := "| id | requirement | status | proof |\n|---|---|---|---|\n" +
		"| ENV-1 | Every event has a seq | implemented+tested | `TestNewEvent`, `TestConformance/StartRun/NewSession` |\n" +
		"| AT-9 | Slash commands | not in scope | runhub has no command layer at all |\n" +
		"| X | not a row | partial | - |\n"
	rows := parseContract(doc)
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[0]; r.id != "ENV-1" || r.status != "implemented+tested" || len(r.tests) != 2 ||
		r.tests[0] != "TestNewEvent" || r.tests[1] != "TestConformance" {
		t.Errorf("row 0 %+v", r)
	}
	if r := rows[1]; r.id != "AT-9" || r.status != "not in scope" || len(r.tests) != 0 {
		t.Errorf("row 1 %+v", r)
	}
	if r := rows[0]; len(r.paths) != 1 || r.paths[0] != "TestConformance/StartRun/NewSession" {
		t.Errorf("row 0 paths %v", r.paths)
	}
	src := `t.Run("StartRun", f); {name: "new session"}`
	if got := missingSubtest("TestConformance/StartRun/new_session", src); got != "" {
		t.Errorf("missingSubtest found no %q", got)
	}
	if got := missingSubtest("TestConformance/StartRun/NoSuchSubtest", src); got != "NoSuchSubtest" {
		t.Errorf("missingSubtest(NoSuchSubtest) = %q", got)
	}
	tests := repoTests(t)
	if !tests["TestContractTableParser"] || !tests["TestNewEvent"] || tests["TestNoSuchTestAnywhere"] {
		t.Errorf("repoTests misses or invents tests (%d found)", len(tests))
	}
}
