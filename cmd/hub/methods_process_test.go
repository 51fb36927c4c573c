package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/protocol"
)

// serveRoutes is every route hub serve registers on its main address
// (with pprof on), as pattern → methods, taken from the router routeServe
// builds, so a route added later is covered without touching the test.
func serveRoutes(t *testing.T) map[string][]string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := ServeConfig{RuntimeConfig: RuntimeConfig{Data: t.TempDir(), MaxRuns: 10}, PProf: true}
	rt, err := openRuntime(context.Background(), cfg.RuntimeConfig, log, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(hub.Config{Logger: log}, rt.store, rt.router)
	defer func() {
		h.Shutdown(context.Background())
		rt.close()
	}()
	e := newEcho(log, metrics.New("test"))
	routeServe(e, cfg, rt, h, metrics.New("test"))
	routes := map[string][]string{}
	for _, r := range e.Routes() {
		if r.Method != echo.RouteNotFound {
			routes[r.Path] = append(routes[r.Path], r.Method)
		}
	}
	if len(routes) < 15 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	return routes
}

// concretePath fills a route pattern's parameters (:sid, *) with values no
// static route has.
func concretePath(pattern string) string {
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, ":"):
			parts[i] = "zz_" + p[1:]
		case p == "*":
			parts[i] = "zz_any"
		}
	}
	return strings.Join(parts, "/")
}

// Every route of a hub process answers a method it is not registered for
// with 405 method_not_allowed, the error body of every error, and an Allow
// header listing the methods it has — the API under /v1 (whose group
// catches unknown paths), /v1/ws, /v1/profiles, /healthz, /readyz,
// /metrics, /debug/pprof and the web UI alike. An unknown /v1 path stays
// 404 not_found.
func TestProcess_WrongMethod405(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a hub process")
	}
	routes := serveRoutes(t)
	p := startHub(t, t.TempDir(), "RUNHUB_PPROF=1")
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	tested := 0
	for pattern, allowed := range routes {
		sort.Strings(allowed)
		path := concretePath(pattern)
		for _, m := range methods {
			if contains(allowed, m) {
				continue
			}
			tested++
			req, _ := http.NewRequest(m, p.URL()+path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var eb protocol.ErrorBody
			json.Unmarshal(body, &eb)
			if resp.StatusCode != http.StatusMethodNotAllowed || eb.Error == nil || eb.Error.Code != protocol.CodeMethodNotAllowed {
				t.Errorf("%s %s (route %s): %d %s, want 405 method_not_allowed", m, path, pattern, resp.StatusCode, body)
				continue
			}
			if got, want := resp.Header.Get("Allow"), strings.Join(allowed, ", "); got != want {
				t.Errorf("%s %s: Allow %q, want %q", m, path, got, want)
			}
		}
	}
	if tested < 40 {
		t.Fatalf("only %d wrong-method requests over %d routes", tested, len(routes))
	}
	var eb protocol.ErrorBody
	if code := call(t, "DELETE", p.URL()+"/v1/no/such/path", nil, &eb); code != 404 || eb.Error.Code != protocol.CodeNotFound {
		t.Fatalf("unknown path: %d %+v", code, eb.Error)
	}
	if code := call(t, "GET", p.URL()+"/v1/sessions/s_unknown", nil, &eb); code != 404 || eb.Error.Code != protocol.CodeNotFound {
		t.Fatalf("unknown session: %d %+v", code, eb.Error)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
