package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// reactHarness mounts the snippet's Chat component as a page would, with
// a chat id and a token (any token: a default hub runs open).
const reactHarness = `import { createRoot } from "react-dom/client";
import { Chat } from "./snippet.tsx";

createRoot(document.getElementById("root")).render(<Chat chatId={window.__chatId} token="dev-token" />);
`

// reactBuild bundles harness.jsx and the snippet with esbuild (JSX
// automatic, TypeScript stripped) for the browser.
const reactBuild = `import { build } from "esbuild";
await build({ entryPoints: ["harness.jsx"], bundle: true, format: "esm", platform: "browser", jsx: "automatic",
  outfile: "bundle.js", logLevel: "error", define: { "process.env.NODE_ENV": '"production"' } });
`

// reactPages renders the React (tsx) snippets of the documents in
// headless Chromium with the packages web/cors-test's lockfile pins
// (react, react-dom, @ai-sdk/react, ai). The page comes from its own
// origin, as a Next.js app's would: the test hub allows it with
// RUNHUB_ALLOWED_ORIGINS, what a hub serving such an app needs.
type reactPages struct {
	srv  *httptest.Server
	mu   sync.Mutex
	dir  string // web/cors-test installed, once a snippet needs it
	node string
}

func newReactPages(t *testing.T) *reactPages {
	r := &reactPages{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		dir := r.dir
		r.mu.Unlock()
		if req.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(`<!doctype html><html><head><meta charset="utf-8"><title>snippet</title></head>` +
				`<body><div id="root"></div><script>window.__chatId = new URLSearchParams(location.search).get("chat")</script>` +
				`<script type="module" src="/bundle.js"></script></body></html>`))
			return
		}
		http.FileServer(http.Dir(dir)).ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// reactPackages is the web/ directory whose lockfile pins react,
// react-dom, @ai-sdk/react and ai for the React snippets.
const reactPackages = "cors-test"

// installed tells the pages where npm ci put reactPackages.
func (r *reactPages) installed(node, dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.node, r.dir = node, dir
}

// origin is the page's origin as RUNHUB_ALLOWED_ORIGINS names it.
func (r *reactPages) origin() string {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.srv.URL, "http://"))
	return "127.0.0.1:" + port
}

// render bundles code (the snippet, its hub address rewritten) under the
// harness, loads the page, types "hello" into the component's input,
// presses its button (then its Stop button, if it has one, once enabled)
// and returns the page's text once it matches want
// (or after 20 s).
func (r *reactPages) render(t *testing.T, hub *hubProcess, code, chat string, want *regexp.Regexp) string {
	t.Helper()
	r.mu.Lock()
	dir, node := r.dir, r.node
	r.mu.Unlock()
	for f, text := range map[string]string{"snippet.tsx": code, "harness.jsx": reactHarness, "build.mjs": reactBuild} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, node, "build.mjs")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("bundle the snippet: %v\n%s", err, out)
	}
	w := startBrowser(t, hub)
	w.do("load the snippet's page", chromedp.Navigate(r.srv.URL+"/?chat="+chat))
	w.do("type a message and send it",
		chromedp.WaitEnabled(chromedp.CSS("#root button")),
		chromedp.SendKeys(chromedp.CSS("#root input"), "hello"),
		chromedp.Click(chromedp.CSS("#root button")))
	if strings.Contains(code, ">Stop</button>") {
		w.do("press Stop once the answer streams",
			chromedp.WaitEnabled(chromedp.CSS("#root button:nth-of-type(2)")),
			chromedp.Click(chromedp.CSS("#root button:nth-of-type(2)")))
	}
	var text string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if text = evalJS[string](w, "the page's text", `document.getElementById("root").innerText`); want.MatchString(text) {
			return text
		}
	}
	t.Logf("the page's console and the hub's log:\n%s", w.diagnose())
	return text
}
