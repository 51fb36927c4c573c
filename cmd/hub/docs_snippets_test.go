package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// fence is a fenced code block of a document.
	fence = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	// profileUse is a start option naming a profile, in JS or JSON.
	profileUse = regexp.MustCompile(`\bprofile"?\s*:\s*"([^"]*)"`)
	// profileDef is a profile defined in a profiles file.
	profileDef = regexp.MustCompile(`"([A-Za-z0-9_.-]+)"\s*:\s*\{\s*"driver"`)
)

// Every profile a code snippet of the README or docs/*.md names exists
// where the snippet runs: the built-in sim of a hub without a profiles
// file, or a profile the same document defines in a profiles file. A
// snippet naming another ("default", "ops") fails as written with
// `profile: unknown profile`.
func TestDocsSnippetProfilesExist(t *testing.T) {
	for f, doc := range repoDocs(t) {
		defined := map[string]bool{"sim": true}
		blocks := fence.FindAllStringSubmatch(doc, -1)
		for _, b := range blocks {
			for _, m := range profileDef.FindAllStringSubmatch(b[1], -1) {
				defined[m[1]] = true
			}
		}
		for _, b := range blocks {
			for _, m := range profileUse.FindAllStringSubmatch(b[1], -1) {
				if !defined[m[1]] {
					t.Errorf("%s: a snippet names profile %q, which a default hub lacks and the document defines nowhere:\n%s", f, m[1], strings.TrimSpace(m[0]))
				}
			}
		}
	}
}

// The README says which Node.js the JavaScript examples need: the least
// version the pinned ai package (web/aisdk-test's lockfile) declares.
func TestDocsReadmeNodeVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "web", "aisdk-test", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Engines struct {
				Node string `json:"node"`
			} `json:"engines"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatal(err)
	}
	ai := lock.Packages["node_modules/ai"]
	m := regexp.MustCompile(`^>=\s*(\d+)$`).FindStringSubmatch(ai.Engines.Node)
	if m == nil {
		t.Fatalf("ai %s declares node %q; want a >= N range", ai.Version, ai.Engines.Node)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	if want := "Node.js " + m[1] + " or later"; !strings.Contains(text, want) {
		t.Errorf("the README does not say the JavaScript examples need %q (ai %s declares node %s)", want, ai.Version, ai.Engines.Node)
	}
	if want := "`ai` " + ai.Version; !strings.Contains(text, want) {
		t.Errorf("the README does not name the ai version the tests pin (%s)", want)
	}
}

// The nginx excerpt of docs/operations.md is what deploy/nginx.conf, the
// file TestNginx_FrontsTheHubs runs in a real nginx, says: every directive of the
// excerpt (its comments aside) is a line of that file, so the excerpt
// cannot drift from the configuration that is tested.
func TestDocsNginxExcerptIsDeployed(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(conf), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	m := regexp.MustCompile("(?s)<!-- not run: an nginx configuration excerpt[^\n]*-->\n[ \t]*```\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no nginx excerpt")
	}
	n := 0
	for _, l := range strings.Split(string(m[1]), "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		n++
		if !lines[l] {
			t.Errorf("the excerpt's %q is not a line of deploy/nginx.conf", l)
		}
	}
	if n < 5 {
		t.Fatalf("the excerpt has %d directives", n)
	}
}
