package durable_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
)

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, token string, headers map[string]string, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func memEdge(t *testing.T, o durable.Options, cfg hub.Config) string {
	return memHub(t, o, cfg).URL + durable.Prefix
}

func memHub(t *testing.T, o durable.Options, cfg hub.Config) *hubtest.Hub {
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	th, _ := serve(t, store, store.Streams(journal.StreamLimits{MaxStreamBytes: 64}), o, cfg)
	return th
}

// A stream is its creator's: another subject reads it as missing, an
// admin reads it and writes nothing.
func TestOwnership(t *testing.T) {
	base := memEdge(t, durable.Options{}, hubtest.WithAuth(t, hub.Config{}))
	tokens := map[string]string{}
	for _, sub := range []string{"alice", "bob"} {
		tokens[sub] = hubtest.Token(t, sub, time.Hour, "")
	}
	tokens["admin"] = hubtest.Token(t, "root", time.Hour, auth.RoleAdmin)
	do := func(t *testing.T, method, url, who string, headers map[string]string, body string) answer {
		return do(t, method, url, tokens[who], headers, body)
	}
	if a := do(t, "GET", base+"alice/s", "", nil, ""); a.status != 401 {
		t.Errorf("no token: %d, want 401", a.status)
	}
	text := map[string]string{"Content-Type": "text/plain"}
	if a := do(t, "PUT", base+"alice/s", "alice", text, "secret"); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	for _, m := range []string{"GET", "HEAD", "POST", "DELETE"} {
		if a := do(t, m, base+"alice/s", "bob", text, "x"); a.status != 404 {
			t.Errorf("bob %s: %d, want 404", m, a.status)
		}
	}
	if a := do(t, "PUT", base+"alice/s", "bob", text, ""); a.status != 403 {
		t.Errorf("bob's PUT of alice's stream: %d, want 403", a.status)
	}
	if a := do(t, "GET", base+"alice/s", "admin", nil, ""); a.status != 200 || a.body != "secret" {
		t.Errorf("admin GET: %d %q", a.status, a.body)
	}
	for _, m := range []string{"POST", "DELETE", "PUT"} {
		if a := do(t, m, base+"alice/s", "admin", text, "x"); a.status != 403 {
			t.Errorf("admin %s of alice's stream: %d, want 403 (the admin role reads only)", m, a.status)
		}
	}
	if a := do(t, "GET", base+"alice/s", "alice", nil, ""); a.body != "secret" {
		t.Errorf("after the refused writes alice reads %q", a.body)
	}
	if a := do(t, "PUT", base+"bob/fork", "bob", map[string]string{"Stream-Forked-From": durable.Prefix + "alice/s"}, ""); a.status != 404 {
		t.Errorf("bob forking alice's stream: %d, want 404", a.status)
	}
}

// Bad input: the protocol's status and a readable message, and nothing
// changes.
func TestBadInput(t *testing.T) {
	base := memEdge(t, durable.Options{MaxAppendBytes: 16}, hub.Config{})
	if a := do(t, "PUT", base+"s", "", map[string]string{"Content-Type": "text/plain"}, "ok"); a.status != 201 {
		t.Fatal(a.status)
	}
	cases := []struct {
		method  string
		path    string
		headers map[string]string
		body    string
		status  int
	}{
		{"GET", "s?offset=abc", nil, "", 400},
		{"GET", "s?offset=0000000000000009_0000000000000000", nil, "", 400},
		{"GET", "s?live=sse", nil, "", 400},
		{"GET", "s?offset=-1&live=forever", nil, "", 400},
		{"POST", "s", map[string]string{"Content-Type": "text/plain"}, strings.Repeat("x", 17), 413},
		{"GET", "runs/r_missing", nil, "", 404},
		{"POST", "s", map[string]string{"Content-Type": "text/plain", "Producer-Id": "p"}, "x", 400},
		{"POST", "s", map[string]string{"Content-Type": "text/plain", "Producer-Id": "p", "Producer-Epoch": "01", "Producer-Seq": "0"}, "x", 400},
		{"POST", "s", map[string]string{"Content-Type": "text/ plain"}, "x", 400},
		{"PUT", "t", map[string]string{"Stream-TTL": "1.5"}, "", 400},
		{"PUT", "t", map[string]string{"Stream-Expires-At": "tomorrow"}, "", 400},
		{"PUT", "t", map[string]string{"Stream-Fork-Offset": "-1"}, "", 400},
		{"PUT", "a/../b", nil, "", 400},
		{"PUT", "runs/r1", nil, "", 405},
		{"POST", "runs/r1", map[string]string{"Content-Type": "application/json"}, "{}", 405},
		{"DELETE", "runs/r1", nil, "", 405},
	}
	for _, c := range cases {
		a := do(t, c.method, base+c.path, "", c.headers, c.body)
		if a.status != c.status {
			t.Errorf("%s %s %v: %d %s, want %d", c.method, c.path, c.headers, a.status, a.body, c.status)
			continue
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(a.body), &e) != nil || e.Error.Message == "" || e.Error.Code == "" {
			t.Errorf("%s %s: body %q has no code and message", c.method, c.path, a.body)
		}
	}
	if a := do(t, "GET", base+"s", "", nil, ""); a.body != "ok" {
		t.Fatalf("after the refused requests the stream reads %q", a.body)
	}
	if a := do(t, "HEAD", base+"t", "", nil, ""); a.status != 404 {
		t.Fatalf("a refused create created: %d", a.status)
	}
}

// A listed origin gets CORS headers; any other cross-origin request goes
// through the core's origin check, which refuses it.
func TestCORS(t *testing.T) {
	base := memEdge(t, durable.Options{CORSOrigins: []string{"https://app.example"}}, hub.Config{})
	ok := do(t, "PUT", base+"c", "", map[string]string{"Origin": "https://app.example", "Content-Type": "text/plain"}, "")
	if ok.status != 201 || ok.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(ok.header.Get("Access-Control-Expose-Headers"), "Stream-Next-Offset") {
		t.Fatalf("listed origin: %d %v", ok.status, ok.header)
	}
	if a := do(t, "GET", base+"c", "", map[string]string{"Origin": "https://evil.example"}, ""); a.status != 403 {
		t.Fatalf("unlisted origin: %d, want the core's refusal", a.status)
	}
	pre := do(t, "OPTIONS", base+"c", "", map[string]string{"Origin": "https://app.example",
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "producer-id"}, "")
	if pre.status != 204 || !strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Producer-Id") ||
		pre.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight: %d %v", pre.status, pre.header)
	}
}

// The hub's shutdown (its context ending) ends the live reads waiting on
// it at once, so that shutting down does not wait out their timeouts.
func TestShutdownEndsLiveReads(t *testing.T) {
	th := memHub(t, durable.Options{LongPollTimeout: time.Minute}, hub.Config{})
	base := th.URL + durable.Prefix
	if a := do(t, "PUT", base+"w", "", map[string]string{"Content-Type": "text/plain"}, ""); a.status != 201 {
		t.Fatal(a.status)
	}
	ended := make(chan string, 2)
	for _, live := range []string{"long-poll", "sse"} {
		go func() {
			resp, err := http.Get(base + "w?offset=now&live=" + live)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			ended <- live
		}()
	}
	time.Sleep(300 * time.Millisecond)
	go th.Hub.Shutdown(context.Background())
	for range 2 {
		select {
		case <-ended:
		case <-time.After(3 * time.Second):
			t.Fatal("a live read outlived the hub's shutdown")
		}
	}
}

// A quiet SSE answer sends keep-alive comments, which SSE parsers skip.
func TestSSEKeepAlive(t *testing.T) {
	base := memEdge(t, durable.Options{SSEKeepAlive: 50 * time.Millisecond, SSEMaxDuration: 400 * time.Millisecond}, hub.Config{})
	if a := do(t, "PUT", base+"quiet", "", map[string]string{"Content-Type": "text/plain"}, ""); a.status != 201 {
		t.Fatal(a.status)
	}
	a := do(t, "GET", base+"quiet?offset=now&live=sse", "", nil, "")
	if a.status != 200 || !strings.Contains(a.body, "\n: keep-alive\n\n") || !strings.HasPrefix(a.body, "event: control\n") {
		t.Fatalf("SSE of a quiet stream for 400 ms: %d %q", a.status, a.body)
	}
}
