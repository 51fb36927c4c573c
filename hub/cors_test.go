package hub_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
)

// A page on an allowed other origin may call the HTTP routes: the
// preflight answers the path's methods and the headers it may send, and
// the answer carries the CORS headers; a page on another origin gets no
// CORS headers (its browser refuses) and its request is 403.
func TestCORS_AllowedOrigin(t *testing.T) {
	const page = "http://localhost:13000"
	th := newTestHub(t, hub.Config{OriginPatterns: []string{"localhost:13000"}})
	preflight := func(origin, path, method string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, th.URL+path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", "content-type,authorization,last-event-id")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight(page, "/v1/sessions", "POST")
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != page ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || !strings.Contains(h.Get("Vary"), "Origin") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, h)
	}
	for _, want := range []string{"Content-Type", "Authorization", "Last-Event-ID"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Headers"), want) {
			t.Errorf("preflight allows headers %q, not %s", h.Get("Access-Control-Allow-Headers"), want)
		}
	}
	if resp := preflight(page, "/v1/runs/r_x/events", "GET"); resp.Header.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("preflight of a parameterized route: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight("http://evil.example", "/v1/sessions", "POST"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin allowed: %v", resp.Header)
	}

	status, _ := rawDo(t, "POST", th.URL+"/v1/sessions", `{}`, map[string]string{"Origin": page})
	if status != http.StatusCreated {
		t.Fatalf("POST from the allowed origin: %d", status)
	}
	req, _ := http.NewRequest("GET", th.URL+"/v1/sessions", nil)
	req.Header.Set("Origin", page)
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got.Body.Close()
	if got.Header.Get("Access-Control-Allow-Origin") != page || !strings.Contains(got.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("answer to the allowed origin: %v", got.Header)
	}
	if status, _ := rawDo(t, "POST", th.URL+"/v1/sessions", `{}`, map[string]string{"Origin": "http://evil.example"}); status != http.StatusForbidden {
		t.Errorf("POST from another origin: %d, want 403", status)
	}
}

// ownPreflight is an edge that answers its paths' preflights itself.
type ownPreflight struct{}

func (ownPreflight) Mount(e *echo.Echo, api hub.API) {
	e.OPTIONS("/v1/own/*", func(c echo.Context) error {
		c.Response().Header().Set("X-Own-Preflight", "yes")
		return c.NoContent(http.StatusNoContent)
	})
	e.POST("/v1/own/*", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
}

// An edge whose routes answer OPTIONS keeps its preflights: the core does
// not answer them for it.
func TestCORS_EdgeAnswersItsOwnPreflight(t *testing.T) {
	th := newTestHubWith(t, hub.Config{OriginPatterns: []string{"localhost:13000"}}, nil,
		runtimeOpts{Edges: append(coreEdges(), ownPreflight{})})
	req, _ := http.NewRequest(http.MethodOptions, th.URL+"/v1/own/x", nil)
	req.Header.Set("Origin", "http://localhost:13000")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Own-Preflight") != "yes" || resp.Header.Get("Access-Control-Allow-Headers") != "" {
		t.Errorf("the edge's own preflight was answered by the core: %v", resp.Header)
	}
}
