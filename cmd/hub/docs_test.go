package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root, from cmd/hub.
const repoRoot = "../.."

// repoDocs are the documents a user reads: the README and docs/*.md.
func repoDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "loadtest", "README.md"))
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// The documents stand alone: no path outside the repository, no talk of a
// design note they deviate from, and every relative link resolves to a
// file of the repository.
func TestDocsStandAlone(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for f, doc := range repoDocs(t) {
		lower := strings.ToLower(doc)
		for _, bad := range []string{"/work/", "../shared", "design note", "deviations from the design", "once written"} {
			if strings.Contains(lower, bad) {
				t.Errorf("%s mentions %q", f, bad)
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(doc, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(f), target))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(abs, root+string(filepath.Separator)) && abs != root {
				t.Errorf("%s links outside the repository: %s", f, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to a missing file: %s", f, m[1])
			}
		}
	}
}

// The README and the Makefile agree on what make test needs, and the
// README documents make run's variables and make help.
func TestDocsReadmeMatchesMakefile(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(mk), "\ntest:")
	if i < 0 {
		t.Fatal("Makefile has no test target")
	}
	testComment := string(mk)[strings.LastIndex(string(mk)[:i], "\n\n"):i]
	for _, tool := range []string{"redis-server", "redis-cli", "chromium", "nginx", "node", "npm"} {
		if !strings.Contains(testComment, tool) {
			t.Errorf("the Makefile's comment on make test does not name %s:%s", tool, testComment)
		}
		if !strings.Contains(string(readme), "`"+tool+"`") {
			t.Errorf("the README does not name %s as a need of make test", tool)
		}
	}
	for _, want := range []string{"make run ADDR=", "DATA=", "make help", "make\ntest-short", "bin/hub -h", "`make test` took", "metadata.sim"} {
		if !strings.Contains(strings.ReplaceAll(string(readme), "\n", " "), strings.ReplaceAll(want, "\n", " ")) {
			t.Errorf("the README does not document %q", want)
		}
	}
	// The binary is bin/hub: a bare "hub -h" is not a command a reader can
	// run from the checkout.
	if strings.Contains(strings.ReplaceAll(string(readme), "bin/hub -h", ""), "`hub -h`") {
		t.Error("the README says `hub -h`; the binary is bin/hub")
	}
	for _, v := range []string{"ADDR", "DATA"} {
		if !strings.Contains(string(mk), "RUNHUB_"+v+"=$("+v+")") {
			t.Errorf("make run does not pass %s as RUNHUB_%s", v, v)
		}
	}
}
