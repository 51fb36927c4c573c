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
	docs := repoDocs(t)
	npm := installSnippetPackages(t, docs, react)
	for f, doc := range docs {
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
						out = runSnippet(t, npm, hub, lang, code)
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

// installSnippetPackages installs, all at once, the pinned packages of
// web/ that the documents' runnable snippets import (and react's, when a
// React snippet runs) and returns a web/ directory's name → where npm ci
// put it. A directory's scripts (*.mjs) are copied beside its lockfile.
func installSnippetPackages(t *testing.T, docs map[string]string, react *reactPages) map[string]string {
	t.Helper()
	need := map[string]bool{}
	for _, doc := range docs {
		for _, m := range markedFence.FindAllStringSubmatchIndex(doc, -1) {
			mark, lang, code := sub(doc, m, 1), sub(doc, m, 3), sub(doc, m, 4)
			switch {
			case mark != "run: want" && mark != profilesMark:
			case lang == "tsx":
				need[reactPackages] = true
			case (lang == "js" || lang == "ts") && snippetPackage(code) != "":
				need[snippetPackage(code)] = true
			}
		}
	}
	var names []string
	var pkgs []npmtest.Package
	for name := range need {
		src := filepath.Join(repoRoot, "web", name)
		files := []string{"package.json", "package-lock.json"}
		scripts, _ := filepath.Glob(filepath.Join(src, "*.mjs"))
		for _, f := range scripts {
			files = append(files, filepath.Base(f))
		}
		names = append(names, name)
		pkgs = append(pkgs, npmtest.Package{What: "web/" + name, Src: src, Files: files})
	}
	npm := map[string]string{}
	if len(pkgs) == 0 {
		return npm
	}
	for i, in := range npmtest.InstallAll(t, pkgs...) {
		npm[names[i]] = in.Dir
		if names[i] == reactPackages {
			react.installed(in.Node, in.Dir)
		}
	}
	return npm
}

func sub(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// snippetPackages are the directories of web/ whose lockfiles pin the
// packages a JavaScript or TypeScript snippet imports, the first that
// matches chosen (CopilotKit's route imports @ag-ui/client too).
var snippetPackages = []struct{ imp, dir string }{
	{"@copilotkit/runtime/v2", "copilotkit-test"},
	{"@durable-streams/client", "durable-test"},
	{"@ag-ui/client", "agui-test"},
}

// snippetPackage is the web/ directory pinning what code imports, or "".
func snippetPackage(code string) string {
	for _, p := range snippetPackages {
		if strings.Contains(code, `from "`+p.imp+`"`) {
			return p.dir
		}
	}
	return ""
}

// runSnippet runs a snippet within 30 s and returns its combined output:
// a shell one with bash (errexit, pipefail), a JavaScript one as an ES
// module with node, in the directory where npm ci installed the pinned
// packages it imports (npm: a web/ directory's name → that directory). A
// TypeScript one is a Next.js route file (CopilotKit's runtime): the
// directory's route-driver.mjs bundles it and calls its GET and POST as
// Next.js and CopilotKit's client would, with RUNHUB_URL the hub's address
// and RUNHUB_TOKEN any token (a default hub runs open); CopilotKit's
// telemetry is off, as a test must not call out.
func runSnippet(t *testing.T, npm map[string]string, hub *hubProcess, lang, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch lang {
	case "sh", "bash":
		cmd = exec.CommandContext(ctx, "bash", "-c", "set -eo pipefail\n"+code)
	case "js", "ts":
		dir := npm[snippetPackage(code)]
		if dir == "" {
			t.Fatalf("the snippet imports no package of %v", snippetPackages)
		}
		name := map[string]string{"js": "snippet.mjs", "ts": "route.ts"}[lang]
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		if lang == "js" {
			cmd = exec.CommandContext(ctx, "node", f)
		} else {
			cmd = exec.CommandContext(ctx, "node", "route-driver.mjs", name)
			cmd.Env = append(os.Environ(), "RUNHUB_URL="+hub.URL(), "RUNHUB_TOKEN=dev-token", "COPILOTKIT_TELEMETRY_DISABLED=true")
		}
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
