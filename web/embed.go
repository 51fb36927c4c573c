package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// contentTypes pins the type of every kind of file the workbench ships, so the
// answer does not depend on the host's mime tables (some map .js to
// text/plain, which browsers refuse for ES modules).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
	".ico":  "image/x-icon",
	".png":  "image/png",
}

// contentSecurityPolicy allows only the hub's own origin: scripts, styles and
// the WebSocket. Inline SVG icons are data: URLs.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// FS returns the workbench's files, rooted at the directory holding
// index.html.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("web: embedded static directory missing: " + err.Error())
	}
	return sub
}

// Handler serves the workbench: index.html at /, the other files by name.
// Answers carry a pinned Content-Type, a content-hash ETag (so a reload
// revalidates cheaply and a new binary is never served stale) and security
// headers. Only GET and HEAD are allowed.
func Handler() http.Handler {
	files := FS()
	etags := make(map[string]string)
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		etags["/"+p] = `"` + hex.EncodeToString(sum[:8]) + `"`
		return nil
	})
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := path.Clean("/" + r.URL.Path)
		if strings.HasSuffix(name, "/") {
			name += "index.html"
		}
		h := w.Header()
		if ct, ok := contentTypes[path.Ext(name)]; ok {
			h.Set("Content-Type", ct)
		}
		if tag, ok := etags[name]; ok {
			h.Set("ETag", tag)
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		server.ServeHTTP(w, r)
	})
}
