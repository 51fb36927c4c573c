package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/runhub/runhub/internal/npmtest"
	"go.uber.org/goleak"
)

// corsPage is the page on the other origin: it loads the bundled clients.
const corsPage = `<!doctype html><html><head><meta charset="utf-8"><title>cors</title></head>` +
	`<body><script type="module" src="/bundle.js"></script></body></html>`

// A page on another origin (RUNHUB_ALLOWED_ORIGINS names it) drives the
// hub's HTTP integrations in real Chromium with the official clients: the
// AI SDK's DefaultChatTransport (what useChat sends through) posts a chat
// and reads its UI message stream to the end, and the AG-UI HttpAgent runs
// POST /v1/agui to RUN_FINISHED. Both requests are preflighted; without
// the hub's CORS answers Chromium refuses them ("Failed to fetch"). The
// same page on an origin the hub does not allow gets nothing.
func TestBrowser_CrossOriginIntegrations(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
	node, dir := npmtest.Install(t, "the AI SDK and AG-UI clients for the browser", "../../web/cors-test",
		"package.json", "package-lock.json", "page.mjs", "build.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, node, "build.mjs")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("bundle the page: %v\n%s", err, out)
	}
	files := http.FileServer(http.Dir(dir))
	serve := func() *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.Write([]byte(corsPage))
				return
			}
			files.ServeHTTP(w, r)
		}))
	}
	allowed, other := serve(), serve()
	defer allowed.Close()
	defer other.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(allowed.URL, "http://"))
	hub := startHub(t, t.TempDir(), "RUNHUB_ALLOWED_ORIGINS=127.0.0.1:"+port)
	w := startBrowser(t, hub)

	type result struct {
		AISDK struct {
			Text   string   `json:"text"`
			Errors []string `json:"errors"`
			Error  string   `json:"error"`
		} `json:"aisdk"`
		AGUI struct {
			Types []string `json:"types"`
			Text  string   `json:"text"`
			Error string   `json:"error"`
		} `json:"agui"`
	}
	w.do("load the page on the allowed origin", chromedp.Navigate(allowed.URL+"/?hub="+hub.URL()))
	got := waitJS[result](w, "both clients' outcome", `window.__result`, 60*time.Second)
	if got.AISDK.Error != "" || len(got.AISDK.Errors) > 0 || got.AISDK.Text != simText(5) {
		t.Errorf("DefaultChatTransport across origins: %+v, want the text %q", got.AISDK, simText(5))
	}
	if got.AGUI.Error != "" || got.AGUI.Text != simText(5) || len(got.AGUI.Types) == 0 || got.AGUI.Types[len(got.AGUI.Types)-1] != "RUN_FINISHED" {
		t.Errorf("HttpAgent across origins: %+v, want the text %q ending RUN_FINISHED", got.AGUI, simText(5))
	}

	w.do("load the page on an origin the hub does not allow", chromedp.Navigate(other.URL+"/?hub="+hub.URL()))
	refused := waitJS[result](w, "both clients' outcome", `window.__result`, 60*time.Second)
	if refused.AISDK.Error == "" || refused.AGUI.Error == "" {
		t.Errorf("an origin the hub does not allow was served: %+v", refused)
	}
}
