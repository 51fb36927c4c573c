package agui

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// cut ends the response abruptly: the connection closes without the end
// of the chunked body, as a crashed agent or a dropped network does.
func (s *agentStream) cut() { panic(http.ErrAbortHandler) }

// A stream that ends before RUN_FINISHED or RUN_ERROR ends the run with
// one provider_error that says why (AG-UI cannot resume a run); the text
// that came before it is journaled.
func TestFault_StreamCut(t *testing.T) {
	cases := []struct {
		name string
		turn func(w *agentStream, in *input)
		want string
	}{
		{"mid-event", func(w *agentStream, in *input) {
			w.runStarted()
			w.text("m1", "partial answer")
			w.raw(`data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","del`)
			w.cut()
		}, "ended in the middle of an event"},
		{"between events", func(w *agentStream, in *input) {
			w.runStarted()
			w.text("m1", "partial answer")
			w.cut()
		}, "ended before the run finished (AG-UI runs cannot be resumed)"},
		{"clean end without RUN_FINISHED", func(w *agentStream, in *input) {
			w.runStarted()
			w.text("m1", "partial answer")
		}, "ended before the run finished"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAgent(t, c.turn)
			h := harness(t, f, Config{})
			res := start(h, "", "go")
			ev := h.Events(res.RunID, 20*time.Second)
			p := errorOf(t, last(ev))
			if terminals(ev) != 1 || p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, c.want) ||
				!strings.Contains(p.Message, "agent run "+res.RunID) {
				t.Fatalf("%d terminals, error %+v", terminals(ev), p)
			}
			if got := text(ev); got != "partial answer" {
				t.Fatalf("text before the cut %q", got)
			}
		})
	}
}

// Answers that are no stream: 4xx and 5xx with the agent's message, a body
// that is not SSE, an agent that is not there.
func TestFault_HTTP(t *testing.T) {
	cases := []struct {
		name, code, want string
		turn             func(w *agentStream, in *input)
	}{
		{"401", CodeAuth, "the agent refused the credentials (401): bad token", func(w *agentStream, in *input) {
			w.w.Header().Set("Content-Type", "application/json")
			w.w.WriteHeader(401)
			io.WriteString(w.w, `{"error":{"message":"bad token"}}`)
		}},
		{"422", protocol.ErrorProviderError, "the agent answered 422: Invalid input", func(w *agentStream, in *input) {
			w.w.Header().Set("Content-Type", "application/json")
			w.w.WriteHeader(422)
			io.WriteString(w.w, `{"error":"Invalid input"}`)
		}},
		{"429", CodeRateLimited, "rate limiting (429); retry after 7s", func(w *agentStream, in *input) {
			w.w.Header().Set("Retry-After", "7")
			w.w.WriteHeader(429)
		}},
		{"500 html", protocol.ErrorProviderError, "the agent answered 500", func(w *agentStream, in *input) {
			w.w.Header().Set("Content-Type", "text/html")
			w.w.WriteHeader(500)
			io.WriteString(w.w, "<html><body>Internal Server Error</body></html>")
		}},
		{"503 text", protocol.ErrorProviderError, "the agent answered 503: upstream overloaded", func(w *agentStream, in *input) {
			w.w.WriteHeader(503)
			io.WriteString(w.w, "upstream overloaded")
		}},
		{"json, not sse", protocol.ErrorProviderError, `answered "application/json", not an AG-UI event stream`, func(w *agentStream, in *input) {
			w.w.Header().Set("Content-Type", "application/json")
			io.WriteString(w.w, `{"ok":true}`)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAgent(t, c.turn)
			h := harness(t, f, Config{})
			ev := h.Events(start(h, "", "go").RunID, 20*time.Second)
			p := errorOf(t, last(ev))
			if terminals(ev) != 1 || p.Code != c.code || !strings.Contains(p.Message, c.want) {
				t.Fatalf("error %+v, want %s %q", p, c.code, c.want)
			}
		})
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f := newFakeAgent(t, nil)
	f.srv.URL = "http://" + addr // nothing listens there
	h := harness(t, f, Config{})
	p := errorOf(t, last(h.Events(start(h, "", "go").RunID, 20*time.Second)))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "could not reach the agent") {
		t.Fatalf("unreachable agent: %+v", p)
	}
}

// A slow agent that goes silent past idle_timeout ends the run with
// timeout; one that keeps sending within it is waited for.
func TestFault_SlowAgent(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.send(`{"type":"TEXT_MESSAGE_START","messageId":"m1"}`)
		for _, word := range []string{"slow ", "but ", "steady"} {
			time.Sleep(30 * time.Millisecond)
			w.send(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"` + word + `"}`)
		}
		w.send(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`)
		<-w.ctx.Done() // then silent until the driver gives up
	})
	h := harness(t, f, Config{IdleTimeout: 2 * time.Second})
	ev := h.Events(start(h, "", "go").RunID, 30*time.Second)
	p := errorOf(t, last(ev))
	if text(ev) != "slow but steady" || p.Code != protocol.ErrorTimeout || !strings.Contains(p.Message, "no event for 2s") || terminals(ev) != 1 {
		t.Fatalf("text %q, error %+v", text(ev), p)
	}
}

// A malformed event ends the run with an error naming it; nothing
// journaled before it is lost.
func TestFault_Malformed(t *testing.T) {
	for _, c := range []struct{ name, frame, want string }{
		{"not json", "data: {not json}\n\n", "malformed AG-UI event #6: not JSON"},
		{"no type", `data: {"messageId":"m1"}` + "\n\n", "#6: the event carries no type"},
		{"missing field", `data: {"type":"TOOL_CALL_START","toolCallId":"t1"}` + "\n\n", "#6 (TOOL_CALL_START): toolCallName is required"},
		{"wrong kind", `data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":{"x":1}}` + "\n\n", "#6 (TEXT_MESSAGE_CONTENT): delta (a string) is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAgent(t, func(w *agentStream, in *input) {
				w.runStarted()
				w.text("m1", "kept ", "text")
				w.raw(c.frame)
				w.text("m2", "never read")
				w.finished("")
			})
			h := harness(t, f, Config{})
			ev := h.Events(start(h, "", "go").RunID, 20*time.Second)
			p := errorOf(t, last(ev))
			if terminals(ev) != 1 || p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, c.want) {
				t.Fatalf("error %+v, want %q", p, c.want)
			}
			if got := text(ev); got != "kept text" {
				t.Fatalf("text %q", got)
			}
			if !strings.Contains(h.Logs.String(), "agui: malformed event") {
				t.Fatalf("no log of the malformed event:\n%s", h.Logs.String())
			}
		})
	}
}

// An agent's RUN_ERROR ends the run with its message and code.
func TestFault_RunError(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.text("m1", "trying")
		w.send(`{"type":"RUN_ERROR","message":"model quota exceeded","code":"quota"}`)
	})
	h := harness(t, f, Config{})
	ev := h.Events(start(h, "", "go").RunID, 20*time.Second)
	p := errorOf(t, last(ev))
	if terminals(ev) != 1 || p.Message != "the agent failed: model quota exceeded (quota)" || text(ev) != "trying" {
		t.Fatalf("error %+v, text %q", p, text(ev))
	}
}

// timeout bounds the whole run, a prompt's wait included: the run ends
// with timeout, once.
func TestFault_RunTimeout(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.text("m1", "asking")
		w.finished(`{"type":"interrupt","interrupts":[{"id":"q","reason":"input_required","message":"Which?"}]}`)
	})
	h := harness(t, f, Config{Timeout: 300 * time.Millisecond})
	ev := h.Events(start(h, "", "go").RunID, 20*time.Second)
	p := errorOf(t, last(ev))
	if terminals(ev) != 1 || p.Code != protocol.ErrorTimeout || p.Message != "the run exceeded its 300ms timeout" || text(ev) != "asking" {
		t.Fatalf("error %+v, text %q, events %v", p, text(ev), eventTypes(ev))
	}
}

// A cut in the continuing run of an interrupt ends the one run once, the
// prompt and its answer journaled.
func TestFault_CutAfterResume(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		if len(in.Resume) == 0 {
			w.text("m1", "first ")
			w.finished(`{"type":"interrupt","interrupts":[{"id":"q1","reason":"input_required","message":"Name?"}]}`)
			return
		}
		w.text("m2", "second")
		w.cut()
	})
	h := harness(t, f, Config{})
	res := start(h, "", "go")
	h.WaitFor(res.RunID, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventClarifyReq })
	if r, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpClarify, RunID: res.RunID, ClarifyID: "q1", Response: "Ada"}); err != nil || !r.Accepted {
		t.Fatalf("clarify: %+v %v", r, err)
	}
	ev := h.Events(res.RunID, 20*time.Second)
	p := errorOf(t, last(ev))
	types := eventTypes(ev)
	if terminals(ev) != 1 || !strings.Contains(p.Message, "agent run "+res.RunID+".1: the agent's stream ended before the run finished") ||
		text(ev) != "first second" || !slices.Contains(types, protocol.EventClarifyRes) {
		t.Fatalf("error %+v, text %q, events %v", p, text(ev), types)
	}
}
