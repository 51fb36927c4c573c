package web

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHandler_ServesWorkbenchFiles(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()

	tests := []struct {
		path     string
		wantType string
		wantBody string
	}{
		{"/", "text/html; charset=utf-8", `data-testid="transcript"`},
		{"/app.js", "text/javascript; charset=utf-8", "new RunhubClient("},
		{"/runhub-client.js", "text/javascript; charset=utf-8", "export class RunhubClient"},
		{"/transcript.js", "text/javascript; charset=utf-8", "export class SessionView"},
		{"/dom.js", "text/javascript; charset=utf-8", "export function h("},
		{"/style.css", "text/css; charset=utf-8", ":root"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type %q, want %q", got, tt.wantType)
			}
			if resp.Header.Get("ETag") == "" {
				t.Error("no ETag")
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body lacks %q", tt.wantBody)
			}
		})
	}
}

func TestHandler_RevalidatesWithETag(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/app.js", nil))
	tag := rec.Header().Get("ETag")
	req := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	req.Header.Set("If-None-Match", tag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Fatalf("status %d, want 304", rec.Code)
	}
}

func TestHandler_RejectsOtherMethodsAndUnknownFiles(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope.js", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nope.js: status %d, want 404", rec.Code)
	}
}

// TestClientJS runs the JS client's tests (jstest/) and a syntax check of
// every workbench module with node (Debian's nodejs; .ci/run installs it).
// A missing node fails the test.
func TestClientJS(t *testing.T) {
	runClientJS(t, ".")
}

// TestClientJS_UnderCommonJSParent runs the same checks on a copy of web/
// (package.json, static/, jstest/) under a directory whose package.json says
// "type": "commonjs", as `npm init -y` writes one in a JavaScript workspace
// holding the clone. web/package.json must declare the module type itself, or
// node reads static/*.js as CommonJS and `node --check` fails on `import`.
func TestClientJS_UnderCommonJSParent(t *testing.T) {
	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "package.json"), []byte(`{"name":"workspace","version":"1.0.0","type":"commonjs"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "web")
	for _, p := range []string{"static", "jstest"} {
		if err := os.CopyFS(filepath.Join(dir, p), os.DirFS(p)); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile("package.json"); err != nil {
		t.Errorf("web/package.json: %v (it declares the module type of static/*.js)", err)
	} else if err := os.WriteFile(filepath.Join(dir, "package.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	runClientJS(t, dir)
}

// runClientJS checks every workbench module with `node --check` and runs the
// node tests of jstest/, in dir (a directory shaped like web/).
func runClientJS(t *testing.T, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (apt-get install nodejs): the JS client's tests cannot run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	entries, err := fs.Glob(FS(), "*.js")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no js files: %v", err)
	}
	for _, name := range entries {
		cmd := exec.CommandContext(ctx, node, "--check", filepath.Join("static", name))
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("node --check %s: %v\n%s", name, err, out)
		}
	}
	cmd := exec.CommandContext(ctx, node, "--test", filepath.Join("jstest", "runhub-client.test.mjs"), filepath.Join("jstest", "markdown.test.mjs"), filepath.Join("jstest", "catchup.test.mjs"))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
}
