package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
	"go.uber.org/goleak"
)

const testKey = "tk-0penai-fake-4a7f9c2e81d3b6"

// fake is an OpenAI-compatible upstream: handle answers each request.
type fake struct {
	srv    *httptest.Server
	handle func(w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	reqs    []chatRequest
	bodies  [][]byte // each request's body as sent
	auths   []string
	aborted chan struct{} // closed when a request's context ends before the handler returns
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *fake {
	f := &fake{handle: handle, aborted: make(chan struct{})}
	var once sync.Once
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "wrong endpoint "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		var req chatRequest
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.bodies = append(f.bodies, body)
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		f.mu.Unlock()
		f.handle(w, r)
		if r.Context().Err() != nil {
			once.Do(func() { close(f.aborted) })
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() ([]chatRequest, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.reqs...), append([]string(nil), f.auths...)
}

// send writes SSE lines (each followed by one newline) and flushes.
func send(w http.ResponseWriter, lines ...string) {
	for _, l := range lines {
		io.WriteString(w, l+"\n")
	}
	w.(http.Flusher).Flush()
}

func streamHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

func content(s string) string {
	return `data: {"id":"c1","model":"m-up","choices":[{"index":0,"delta":{"content":` + jsonStr(s) + `},"finish_reason":null}]}` + "\n"
}

func reasoning(s string) string {
	return `data: {"id":"c1","model":"m-up","choices":[{"index":0,"delta":{"reasoning_content":` + jsonStr(s) + `}}]}` + "\n"
}

const (
	roleChunk   = `data: {"id":"c1","model":"m-up","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n"
	finishChunk = `data: {"id":"c1","model":"m-up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n"
	usageChunk  = `data: {"id":"c1","model":"m-up","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}` + "\n"
	doneLine    = "data: [DONE]\n"
)

// brief is messages as "[{role content} …]".
func brief(msgs []Message) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = fmt.Sprintf("{%s %v}", m.Role, m.Content)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// setup builds a harness whose profile "fake" is this driver against f.
func setup(t *testing.T, f *fake, mod func(*Config)) *drivertest.Harness {
	t.Helper()
	log, logs := drivertest.Logger()
	cfg := Config{BaseURL: f.srv.URL, Model: "m-test", APIKey: profile.NewSecret(testKey), APIKeyEnv: "TEST_KEY",
		Instructions: "Be brief.", IdleTimeout: 5 * time.Second, Logger: log}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return harness(t, d, log, logs)
}

func harness(t *testing.T, d driver.Driver, log *slog.Logger, logs *drivertest.Buffer) *drivertest.Harness {
	return drivertest.New(t, drivertest.Config{Log: log, Logs: logs,
		Profiles: map[string]driver.Profile{"fake": {Driver: d, Kind: Kind, Model: "m-test"}}})
}

func start(h *drivertest.Harness, sid, msg string) string {
	return h.Start(protocol.StartRunRequest{SessionID: sid, Message: msg, Profile: "fake"}).RunID
}

// noSecret fails the test if the key appears in the journal file or logs.
func noSecret(t *testing.T, h *drivertest.Harness, events []protocol.Envelope) {
	t.Helper()
	if bytes.Contains(h.JournalBytes(), []byte(testKey)) {
		t.Error("the API key is in the journal file")
	}
	if strings.Contains(h.Logs.String(), testKey) {
		t.Error("the API key is in the logs")
	}
	for _, e := range events {
		if bytes.Contains(e.Payload, []byte(testKey)) {
			t.Errorf("the API key is in event %s", e.Type)
		}
	}
}

func payload[T any](t *testing.T, e protocol.Envelope) T {
	t.Helper()
	p, err := protocol.DecodePayload[T](&e)
	if err != nil {
		t.Fatalf("%s: %v", e.Type, err)
	}
	return p
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFullRun_EventByEvent(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, ": keepalive", "", roleChunk, reasoning("Let me "), reasoning("think."), content("Hel"), ": keepalive", "",
			content("lo"), content("!"), finishChunk, usageChunk, doneLine)
	})
	h := setup(t, f, nil)
	rid := start(h, "", "hi there")
	ev := h.Events(rid, 10*time.Second)
	// Streamed text is re-cut at word ends (driver.Execution holds back an
	// unfinished word: it may be part of a secret): "Hel" "lo" "!" is one
	// token.delta, let out when the usage comes.
	want := "run.started reasoning.delta reasoning.delta reasoning.done token.delta usage.final done"
	if got := drivertest.Types(ev); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	drivertest.Terminal(t, ev, protocol.EventDone)
	rs := payload[protocol.RunStartedPayload](t, ev[0])
	if rs.Profile != "fake" || rs.Provider != "openai" || rs.Model != "m-test" || rs.Message != "hi there" {
		t.Errorf("run.started = %+v", rs)
	}
	for i, w := range []protocol.ReasoningPayload{{BlockID: "b1", Text: "Let me "}, {BlockID: "b1", Text: "think."}, {BlockID: "b1", Text: ""}} {
		if got := payload[protocol.ReasoningPayload](t, ev[1+i]); got != w {
			t.Errorf("event %d = %+v, want %+v", 1+i, got, w)
		}
	}
	for i, w := range []string{"Hello!"} {
		if got := payload[protocol.TokenDeltaPayload](t, ev[4+i]); got.Text != w || got.MessageID != "m1" {
			t.Errorf("token %d = %+v, want %q", i, got, w)
		}
	}
	u := payload[protocol.Usage](t, ev[5])
	if u.InputTokens != 12 || u.OutputTokens != 3 || u.Model != "m-up" || u.Provider != "openai" {
		t.Errorf("usage.final = %+v", u)
	}
	done := payload[protocol.DonePayload](t, ev[6])
	if done.Status != "completed" || done.Usage == nil || done.Usage.OutputTokens != 3 {
		t.Errorf("done = %+v", done)
	}
	reqs, auths := f.requests()
	if len(reqs) != 1 || auths[0] != "Bearer "+testKey {
		t.Fatalf("requests %d, auth %q", len(reqs), auths)
	}
	r := reqs[0]
	if r.Model != "m-test" || !r.Stream || !r.StreamOptions.IncludeUsage {
		t.Errorf("request = %+v", r)
	}
	if got, want := brief(r.Messages), "[{system Be brief.} {user hi there}]"; got != want {
		t.Errorf("messages %s, want %s", got, want)
	}

	// A second run of the session sends the transcript; a start's model
	// overrides the profile's.
	sid := ev[0].SessionID
	rid2 := h.Start(protocol.StartRunRequest{SessionID: sid, Message: "and again", Profile: "fake", Model: "m-other"}).RunID
	ev2 := h.Events(rid2, 10*time.Second)
	drivertest.Terminal(t, ev2, protocol.EventDone)
	reqs, _ = f.requests()
	if got, want := brief(reqs[1].Messages), "[{system Be brief.} {user hi there} {assistant Hello!} {user and again}]"; got != want {
		t.Errorf("second run's messages\n got %s\nwant %s", got, want)
	}
	if reqs[1].Model != "m-other" {
		t.Errorf("model %q, want the start's m-other", reqs[1].Model)
	}
	noSecret(t, h, append(ev, ev2...))
}

func TestCancelMidStream_AbortsRequest(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("one "), content("two "))
		<-r.Context().Done() // a slow model: nothing more until the client goes away
	})
	h := setup(t, f, nil)
	rid := start(h, "", "go")
	n := 0
	h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool {
		if e.Type == protocol.EventTokenDelta {
			n++
		}
		return n == 2
	})
	h.Cancel(rid)
	ev := h.Events(rid, 10*time.Second)
	c := payload[protocol.CancelledPayload](t, drivertest.Terminal(t, ev, protocol.EventCancelled))
	if !c.Partial {
		t.Errorf("cancelled = %+v, want partial", c)
	}
	select {
	case <-f.aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not aborted")
	}
}

func TestCancelBeforeOutput_NotPartial(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // not even headers
	})
	h := setup(t, f, nil)
	rid := start(h, "", "go")
	h.WaitFor(rid, 5*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventRunStarted })
	time.Sleep(50 * time.Millisecond)
	h.Cancel(rid)
	ev := h.Events(rid, 10*time.Second)
	if c := payload[protocol.CancelledPayload](t, drivertest.Terminal(t, ev, protocol.EventCancelled)); c.Partial {
		t.Errorf("cancelled = %+v, want partial false", c)
	}
	select {
	case <-f.aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not aborted")
	}
}

func TestUpstreamStatusErrors(t *testing.T) {
	tests := []struct {
		status          int
		body            string
		header          string
		code            string
		wantIn, wantOut string
	}{
		{401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error","code":"invalid_api_key"}}`, "",
			CodeAuth, "Incorrect API key provided: [REDACTED]", testKey},
		{403, `{"error":{"message":"project has no access","type":"permission_error"}}`, "", CodeAuth, "refused the credentials (403): project has no access", ""},
		{404, `{"error":{"message":"The model 'm-test' does not exist","type":"invalid_request_error","code":"model_not_found"}}`, "",
			CodeModelNotFound, `no model "m-test"`, ""},
		{429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "7",
			CodeRateLimited, "retry after 7s: Rate limit reached", ""},
		{500, `{"error":{"message":"The server had an error","type":"server_error"}}`, "", protocol.ErrorProviderError, "answered 500: The server had an error", ""},
		{502, `<html><body>Bad Gateway</body></html>`, "", protocol.ErrorProviderError, "answered 502", "html"},
		{503, `upstream overloaded`, "", protocol.ErrorProviderError, "answered 503: upstream overloaded", ""},
		{400, `{"error":"context length exceeded"}`, "", protocol.ErrorProviderError, "answered 400: context length exceeded", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			h := setup(t, f, nil)
			ev := h.Events(start(h, "", "hi"), 10*time.Second)
			if got := drivertest.Types(ev); got != "run.started error" {
				t.Errorf("events %s", got)
			}
			p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
			if p.Code != tt.code || !strings.Contains(p.Message, tt.wantIn) || (tt.wantOut != "" && strings.Contains(p.Message, tt.wantOut)) {
				t.Errorf("error = %+v, want code %s with %q", p, tt.code, tt.wantIn)
			}
			noSecret(t, h, ev)
		})
	}
}

func TestInStreamError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("par"), `data: {"error":{"message":"model overloaded, key `+testKey+`","type":"server_error"}}`, "", doneLine)
	})
	h := setup(t, f, nil)
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	if got := drivertest.Types(ev); got != "run.started token.delta error" {
		t.Errorf("events %s", got)
	}
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "model overloaded") {
		t.Errorf("error = %+v", p)
	}
	noSecret(t, h, ev)
}

func TestMalformedSSELinesAreSkipped(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w,
			"data: {not json", "",
			`data: {"choices": 5}`, "",
			"garbage without a colon",
			`{"raw":"json without data:"}`,
			"event: message", "id: 7", "retry: 100",
			"data: "+strings.Repeat("x", maxLineBytes+10), "", // over the line bound
			content("A"),
			// no blank line between events
			`data: {"choices":[{"index":0,"delta":{"content":"B"}}]}`,
			`data: {"choices":[{"index":0,"delta":{"content":"C"}}]}`,
			"",
			// one event over two data lines (the SSE spec joins them with \n)
			`data: {"choices":[{"index":0,`,
			`data: "delta":{"content":"D"}}]}`,
			"",
			"\r", // CRLF line ending of an empty line
			`data: {"choices":[{"index":1,"delta":{"content":"not the first choice"}}]}`, "",
			finishChunk, doneLine)
	})
	h := setup(t, f, nil)
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	var text strings.Builder
	for _, e := range ev {
		if e.Type == protocol.EventTokenDelta {
			text.WriteString(payload[protocol.TokenDeltaPayload](t, e).Text)
		}
	}
	if text.String() != "ABCD" {
		t.Errorf("text %q, want ABCD", text.String())
	}
	if !strings.Contains(h.Logs.String(), "skipped malformed stream lines") || !strings.Contains(h.Logs.String(), "lines=5") {
		t.Errorf("logs: %s", h.Logs.String())
	}
}

func TestConnectionDroppedMidStream(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("one "), content("two "))
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close() // mid chunked body: the client sees an unexpected EOF
	})
	h := setup(t, f, nil)
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	if got := drivertest.Types(ev); got != "run.started token.delta token.delta error" {
		t.Errorf("events %s", got)
	}
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "broke mid-stream") {
		t.Errorf("error = %+v", p)
	}
}

func TestStreamEndsWithoutDone(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("one "), content("two ")) // then the body ends cleanly
	})
	h := setup(t, f, nil)
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "closed the stream before the answer finished") {
		t.Errorf("error = %+v", p)
	}

	// A stream that finished but omits data: [DONE] is complete.
	f2 := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("one"), finishChunk)
	})
	h2 := setup(t, f2, nil)
	drivertest.Terminal(t, h2.Events(start(h2, "", "hi"), 10*time.Second), protocol.EventDone)
}

func TestKeepaliveOnlySlowUpstream_TimesOut(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("first"))
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				send(w, ": keepalive", "")
			}
		}
	})
	h := setup(t, f, func(c *Config) { c.IdleTimeout = 400 * time.Millisecond })
	began := time.Now()
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
	if p.Code != protocol.ErrorTimeout || !strings.Contains(p.Message, "no data for 400ms") {
		t.Errorf("error = %+v", p)
	}
	if d := time.Since(began); d < 400*time.Millisecond {
		t.Errorf("ended after %s, before the idle timeout", d)
	}
	select {
	case <-f.aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not aborted")
	}
}

func TestNoHeaders_TimesOut(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	h := setup(t, f, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventError))
	if p.Code != protocol.ErrorTimeout {
		t.Errorf("error = %+v", p)
	}
}

func TestSlowButSteadyUpstream_Completes(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		for i := 0; i < 5; i++ { // 5 × 150ms: longer in total than the idle timeout
			send(w, content(fmt.Sprint(i)))
			time.Sleep(150 * time.Millisecond)
		}
		send(w, finishChunk, doneLine)
	})
	h := setup(t, f, func(c *Config) { c.IdleTimeout = 450 * time.Millisecond })
	drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventDone)
}

func TestRunTimeout(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		for r.Context().Err() == nil {
			send(w, content("x"))
			time.Sleep(30 * time.Millisecond)
		}
	})
	h := setup(t, f, func(c *Config) { c.Timeout = 300 * time.Millisecond })
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventError))
	if p.Code != protocol.ErrorTimeout || !strings.Contains(p.Message, "exceeded its 300ms timeout") {
		t.Errorf("error = %+v", p)
	}
}

func TestKeyVariableUnset_Auth(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { t.Error("no request expected") })
	h := setup(t, f, func(c *Config) { c.APIKey = profile.Secret{} })
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventError))
	if p.Code != CodeAuth || !strings.Contains(p.Message, "TEST_KEY is not set") {
		t.Errorf("error = %+v", p)
	}
}

func TestNoKey_NoAuthorizationHeader(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("ok"), finishChunk, doneLine)
	})
	h := setup(t, f, func(c *Config) { c.APIKey, c.APIKeyEnv, c.Instructions = profile.Secret{}, "", "" })
	drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventDone)
	reqs, auths := f.requests()
	if auths[0] != "" || brief(reqs[0].Messages) != "[{user hi}]" {
		t.Errorf("auth %q, messages %v", auths[0], reqs[0].Messages)
	}
}

func TestUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d, err := New(Config{BaseURL: "http://" + addr + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	h := harness(t, d, nil, nil)
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventError))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "could not reach the upstream") {
		t.Errorf("error = %+v", p)
	}
}

func TestNonStreamedAnswer(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"m-up","choices":[{"index":0,"message":{"role":"assistant","content":"whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":2}}`)
	})
	h := setup(t, f, nil)
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	if got := drivertest.Types(ev); got != "run.started token.delta token.delta usage.final done" { // "whole ", "answer"

		t.Errorf("events %s", got)
	}
}

// A profile of the file builds the driver through the registration, with
// its own key variable only.
func TestProfile_Build(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, content("ok"), finishChunk, doneLine)
	})
	reg := profile.NewRegistry(Registration())
	p, err := reg.Profile("x", []byte(`{"driver":"openai","base_url":"`+f.srv.URL+`/v1/","model":"m","api_key_env":"MY_KEY"}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Build(p, profile.Env{Getenv: func(k string) string {
		if k == "MY_KEY" {
			return "k-123456"
		}
		return "other-profile-key"
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := harness(t, d, nil, nil)
	drivertest.Terminal(t, h.Events(start(h, "", "hi"), 10*time.Second), protocol.EventDone)
	if _, auths := f.requests(); auths[0] != "Bearer k-123456" {
		t.Errorf("auth %q", auths[0])
	}
}
