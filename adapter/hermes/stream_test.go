package hermes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/protocol"
)

// Malformed SSE lines (bad JSON, unknown fields, a non-object, an
// over-long line, another run's event, an unknown event) are dropped; the
// run goes on and completes with the right text.
func TestMalformedSSELines(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "a")
		s.raw("data: {not json\n\n")
		s.raw("this line has no colon\n\n")
		s.raw("data: [1,2,3]\n\n")
		s.raw("data: \"just a string\"\n\n")
		s.raw("bogus: field\ndata: {\"event\":\"message.delta\",\"delta\":\"b\"}\n\n")
		s.raw("data: " + strings.Repeat("x", 2<<20) + "\n\n")
		s.raw(`data: {"event":"message.delta","run_id":"run_other","delta":"NOT MINE"}` + "\n\n")
		s.raw(`data: {"event":"shiny.new.event","x":1}` + "\n\n")
		s.raw("event: message.delta\ndata: {\"delta\":\"c\"}\n\n") // name from the event: field
		s.raw("id: 7\nretry: 100\ndata: {\"event\":\"message.delta\",\n" + `data: "delta":"d"}` + "\n\n")
		s.raw(`data: {"event":"tool.completed","tool":"x","duration":"soon","error":"yes"}` + "\n\n")
		completed(s, "abcd")
	}, nil)
	res := h.start("", "go")
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s %s", terminal(evs).Type, terminal(evs).Payload)
	}
	if got := text(evs); got != "abcd" {
		t.Errorf("text %q, want abcd:\n%s", got, dump(evs))
	}
	if !strings.Contains(h.logs.String(), "dropped malformed lines") {
		t.Errorf("no log of the dropped lines")
	}
}

// The connection drops mid-stream: the driver polls the run, finds it
// running and resubscribes; the run completes with every token.
func TestStreamDropResubscribes(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		if sub == 1 {
			deltas(s, "one ", "two ")
			s.drop()
		}
		deltas(s, "three")
		completed(s, "one two three")
	}, nil)
	res := h.start("", "go")
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s %s\n%s", terminal(evs).Type, terminal(evs).Payload, dump(evs))
	}
	if got := text(evs); got != "one two three" {
		t.Errorf("text %q", got)
	}
	if p := notes(evs); len(p) != 1 || payload[protocol.ProgressPayload](p[0]).Text != "reconnecting to Hermes" {
		t.Errorf("progress:\n%s", dump(evs))
	}
	if fr := h.fake.onlyRun(t); fr.subs != 2 {
		t.Errorf("%d subscriptions, want 2", fr.subs)
	}
}

// The connection drops and the poll finds the run gone (404), interrupted
// (Hermes restarted), failed, cancelled or completed: each ends the run with
// the matching terminal event.
func TestStreamDropThenPoll(t *testing.T) {
	cases := []struct {
		name  string
		set   func(fr *fakeRun)
		check func(t *testing.T, evs []protocol.Envelope)
	}{
		{"gone", func(fr *fakeRun) { fr.deleted = true }, func(t *testing.T, evs []protocol.Envelope) {
			if p := wantError(t, evs, protocol.ErrorInterrupted); !strings.Contains(p.Message, "gone") {
				t.Errorf("message %q", p.Message)
			}
		}},
		{"interrupted", func(fr *fakeRun) { fr.status = "interrupted" }, func(t *testing.T, evs []protocol.Envelope) {
			if p := wantError(t, evs, protocol.ErrorInterrupted); !strings.Contains(p.Message, "restarted") {
				t.Errorf("message %q", p.Message)
			}
		}},
		{"failed", func(fr *fakeRun) { fr.status, fr.errText = "failed", "model overloaded" }, func(t *testing.T, evs []protocol.Envelope) {
			if p := wantError(t, evs, protocol.ErrorProviderError); !strings.Contains(p.Message, "model overloaded") {
				t.Errorf("message %q", p.Message)
			}
		}},
		{"cancelled", func(fr *fakeRun) { fr.status = "cancelled" }, func(t *testing.T, evs []protocol.Envelope) {
			if e := terminal(evs); e.Type != protocol.EventCancelled || !payload[protocol.CancelledPayload](e).Partial {
				t.Errorf("terminal %s %s", e.Type, e.Payload)
			}
		}},
		{"completed", func(fr *fakeRun) {
			fr.status, fr.output, fr.usage = "completed", "one two three", map[string]any{"input_tokens": 3, "output_tokens": 4}
		}, func(t *testing.T, evs []protocol.Envelope) {
			if e := terminal(evs); e.Type != protocol.EventDone {
				t.Fatalf("terminal %s %s", e.Type, e.Payload)
			}
			if got := text(evs); got != "one two three" {
				t.Errorf("text %q: the unstreamed rest of the output is missing", got)
			}
			if u := payload[protocol.Usage](ofType(evs, protocol.EventUsageFinal)[0]); u.InputTokens != 3 || u.OutputTokens != 4 {
				t.Errorf("usage.final %+v", u)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
				deltas(s, "one ")
				fr.set(tc.set)
				s.drop()
			}, nil)
			res := h.start("", "go")
			evs := h.finish(res.RunID)
			tc.check(t, evs)
			if fr := h.fake.onlyRun(t); fr.subs != 1 {
				t.Errorf("%d subscriptions, want 1 (a settled run is not resubscribed)", fr.subs)
			}
		})
	}
}

// The connection drops, the run is still running, but Hermes dropped its
// event queue (a resubscribe answers 404): the stream cannot be resumed, so
// the Hermes run is stopped and the run ends interrupted.
func TestStreamDropNotResumable(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "one ")
		fr.set(func(fr *fakeRun) { fr.streamGone = true })
		s.drop()
	}, nil)
	res := h.start("", "go")
	evs := h.finish(res.RunID)
	if p := wantError(t, evs, protocol.ErrorInterrupted); !strings.Contains(p.Message, "cannot resume") {
		t.Errorf("message %q", p.Message)
	}
	if fr := h.fake.onlyRun(t); fr.stopCount() != 1 {
		t.Errorf("Hermes got %d stops, want 1", fr.stopCount())
	}
}

// A slow upstream that sends only keepalives: the run ends with a timeout
// error after EventIdleTimeout and the Hermes run is stopped.
func TestSlowUpstreamKeepalivesOnly(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "started ")
		s.hold(fr, 30*time.Millisecond)
	}, func(c *hermes.Config) {
		c.EventIdleTimeout = 400 * time.Millisecond
		c.StreamIdleTimeout = 200 * time.Millisecond // keepalives keep the connection alive
	})
	res := h.start("", "go")
	evs := h.finish(res.RunID)
	if p := wantError(t, evs, protocol.ErrorTimeout); !strings.Contains(p.Message, "keepalives") {
		t.Errorf("message %q", p.Message)
	}
	fr := h.fake.onlyRun(t)
	if fr.stopCount() != 1 || fr.subs != 1 {
		t.Errorf("stops %d, subscriptions %d; want 1 and 1", fr.stopCount(), fr.subs)
	}
}

// An upstream that goes fully silent (not even keepalives) is taken as a
// broken connection: polled, resubscribed, and after MaxReconnects the run
// ends interrupted with the Hermes run stopped.
func TestSilentUpstream(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.hold(fr, 0)
	}, func(c *hermes.Config) {
		c.StreamIdleTimeout = 150 * time.Millisecond
		c.MaxReconnects = 2
	})
	res := h.start("", "go")
	evs := h.finish(res.RunID)
	if p := wantError(t, evs, protocol.ErrorInterrupted); !strings.Contains(p.Message, "broke 3 times") {
		t.Errorf("message %q", p.Message)
	}
	fr := h.fake.onlyRun(t)
	if fr.subs != 3 || fr.stopCount() != 1 {
		t.Errorf("subscriptions %d, stops %d; want 3 and 1", fr.subs, fr.stopCount())
	}
}
