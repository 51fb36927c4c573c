package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/npmtest"
)

var (
	// markedFence is a fenced block with the HTML comment, if any, on the
	// line before it: `<!-- run: want REGEXP -->`, `<!-- run with the
	// profiles above: want REGEXP -->` or `<!-- not run: why -->`.
	markedFence = regexp.MustCompile("(?s)(?:<!-- (run: want|" + profilesMark + "|not run:) ([^\n]*?) -->\n[ \t]*)?```([a-z]*)\n(.*?)```")
	// talksToHub is a block that sends a hub a request.
	talksToHub = regexp.MustCompile(`/v1/|wss?://`)
	// docsHub is the address the documents' snippets reach a hub at.
	docsHub = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):8080\b`)
)

// Every code snippet of the README and docs/*.md that talks to a hub runs
// as written against a default hub (embedded journal, the built-in sim
// profile, no auth), as `make run` starts it, the test rewriting only the
// address 127.0.0.1:8080 (or localhost:8080) to the test hub's. A React
// (tsx) snippet is a Chat component rendered in Chromium from a page on
// another origin, which the hub allows (RUNHUB_ALLOWED_ORIGINS); the test
// types "hello", presses its button and matches the page's text. A snippet
// runs when the line before its fence is `<!-- run: want REGEXP -->`: its
// output must match REGEXP (Go syntax), what the snippet's effect shows.
// A snippet it cannot run says why in `<!-- not run: why -->`. A snippet
// that talks to a hub and carries neither fails the test, so none drifts
// unseen.
func TestDocsSnippetsRun(t *testing.T) {
	react := newReactPages(t)
	hub := startHub(t, t.TempDir(), "RUNHUB_ALLOWED_ORIGINS="+react.origin())
	npm := map[string]string{} // a web/ directory → where its pinned packages are installed
	for f, doc := range repoDocs(t) {
		name, _ := filepath.Rel(repoRoot, f)
		for _, m := range markedFence.FindAllStringSubmatchIndex(doc, -1) {
			line := strings.Count(doc[:m[0]], "\n") + 1
			mark, arg, lang, code := sub(doc, m, 1), sub(doc, m, 2), sub(doc, m, 3), sub(doc, m, 4)
			where := name + ":" + strconv.Itoa(line)
			switch {
			case mark == "not run:":
				if strings.TrimSpace(arg) == "" {
					t.Errorf("%s: a not-run snippet gives no reason", where)
				}
			case mark == "run: want" || mark == profilesMark:
				want, err := regexp.Compile(arg)
				if err != nil {
					t.Errorf("%s: want %q: %v", where, arg, err)
					continue
				}
				if pkg := snippetPackage(code); lang == "js" && pkg != "" && npm[pkg] == "" {
					_, npm[pkg] = npmtest.Install(t, pkg, filepath.Join(repoRoot, "web", pkg), "package.json", "package-lock.json")
				}
				if lang == "tsx" {
					react.install(t)
				}
				before := doc[:m[0]]
				t.Run(strings.ReplaceAll(where, "/", "_"), func(t *testing.T) {
					hub := hub
					if mark == profilesMark {
						hub = startProfilesHub(t, before)
					}
					code := docsHub.ReplaceAllString(code, hub.addr)
					var out string
					if lang == "tsx" {
						out = react.render(t, hub, code, "docs-chat-"+strconv.Itoa(line), want)
					} else {
						out = runSnippet(t, npm, lang, code)
					}
					if !want.MatchString(out) {
						t.Errorf("%s: the snippet's output does not match %q:\n%s\n--- output:\n%s", where, arg, code, out)
					}
				})
			case talksToHub.MatchString(code):
				t.Errorf("%s: a snippet talks to a hub but neither runs (<!-- run: want REGEXP -->) nor says why not (<!-- not run: why -->):\n%s", where, code)
			}
		}
	}
}

func sub(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// snippetPackages are the directories of web/ whose lockfiles pin the
// packages a JavaScript snippet imports.
var snippetPackages = map[string]string{
	"@durable-streams/client": "durable-test",
	"@ag-ui/client":           "agui-test",
}

// snippetPackage is the web/ directory pinning what code imports, or "".
func snippetPackage(code string) string {
	for imp, d := range snippetPackages {
		if strings.Contains(code, `from "`+imp+`"`) {
			return d
		}
	}
	return ""
}

// runSnippet runs a snippet within 20 s and returns its combined output:
// a shell one with bash (errexit, pipefail), a JavaScript one as an ES
// module with node, in the directory where npm ci installed the pinned
// packages it imports (npm: a web/ directory's name → that directory).
func runSnippet(t *testing.T, npm map[string]string, lang, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch lang {
	case "sh", "bash":
		cmd = exec.CommandContext(ctx, "bash", "-c", "set -eo pipefail\n"+code)
	case "js":
		dir := npm[snippetPackage(code)]
		if dir == "" {
			t.Fatalf("the snippet imports no package of %v", snippetPackages)
		}
		f := filepath.Join(dir, "snippet.mjs")
		if err := os.WriteFile(f, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd = exec.CommandContext(ctx, "node", f)
		cmd.Dir = dir
	default:
		t.Fatalf("no runner for a %q snippet", lang)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the snippet failed: %v\n%s\n--- output:\n%s", err, code, out)
	}
	return string(out)
}
