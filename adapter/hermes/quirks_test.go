package hermes_test

// Tests of the driver against the quirks of Hermes Agent 0.18.x the fake
// mirrors (fake_test.go): a start is not idempotent, a resubscribed stream
// may carry only keepalives, and reasoning.available repeats the answer.
// A run a killed hub left, which goes on upstream: reattach_test.go.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/protocol"
)

// Hermes 0.18.x ignores Idempotency-Key, so a start is retried only when
// it provably never reached Hermes: the first connection is refused, the
// retry gets through, and Hermes runs the model once.
func TestStartRetriedWhenNeverSent(t *testing.T) {
	refused := closedAddr(t)
	var dials atomic.Int32
	var armed atomic.Bool
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "once")
		completed(s, "once")
	}, func(c *hermes.Config) {
		var d net.Dialer
		c.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if armed.Load() && dials.Add(1) == 1 {
					addr = refused // nothing listens there: connection refused
				}
				return d.DialContext(ctx, network, addr)
			}}}
	})
	h.drv.RuntimeCapabilities() // the first use reads GET /v1/capabilities; the start's dial is refused
	armed.Store(true)
	res := h.start("", "hello")
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone || text(evs) != "once" {
		t.Fatalf("terminal %s, text %q\n%s", terminal(evs).Type, text(evs), dump(evs))
	}
	if n := len(h.fake.startCalls()); n != 1 {
		t.Errorf("Hermes got %d starts, want 1", n)
	}
	if n := h.fake.modelCalls(); n != 1 {
		t.Errorf("Hermes ran the model %d times, want 1", n)
	}
	if !strings.Contains(h.logs.String(), "retrying the Hermes start") {
		t.Error("no log of the retry")
	}
}

// closedAddr is a local address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Hermes admits the run (the model runs) but the connection drops before
// the answer: the start is not sent again, which would run the model a
// second time and orphan the first run; the run ends with a provider
// error naming the uncertainty. As a session's second turn the request
// rides a reused connection, where Go's client itself would replay a
// POST carrying Idempotency-Key.
func TestStartAnswerLostNotRetried(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		if n == 1 {
			completed(s, "first")
			return
		}
		s.hold(fr, 0)
	}, nil)
	first := h.start("", "hello")
	h.finish(first.RunID)
	h.fake.startLost = func(attempt int) bool { return attempt == 2 }
	res := h.start(first.SessionID, "again")
	evs := h.finish(res.RunID)
	p := wantError(t, evs, protocol.ErrorProviderError)
	if !strings.Contains(p.Message, "may have reached Hermes") || !strings.Contains(p.Message, "not retried") {
		t.Errorf("message %q does not name the uncertainty", p.Message)
	}
	if n := len(h.fake.startCalls()); n != 2 {
		t.Errorf("Hermes got %d starts, want 2 (one per turn, none retried)", n)
	}
	if n := h.fake.modelCalls(); n != 2 {
		t.Errorf("Hermes ran the model %d times, want 2", n)
	}
}

// A gateway in front of Hermes answers 503 although Hermes admitted the
// run: without idempotent_start the start is not retried; with it (a
// server that honours the key) the retry replays the same run.
func TestStartGatewayFailure(t *testing.T) {
	for _, idem := range []bool{false, true} {
		t.Run(fmt.Sprint("idempotent=", idem), func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
				deltas(s, "once")
				completed(s, "once")
			}, func(c *hermes.Config) { c.IdempotentStart = idem })
			h.fake.idempotent = idem
			h.fake.startFail = func(attempt int) (int, string, bool) {
				if attempt == 1 {
					return http.StatusServiceUnavailable, `{"error":{"message":"upstream timeout"}}`, true
				}
				return 0, "", true
			}
			res := h.start("", "hello")
			evs := h.finish(res.RunID)
			starts := h.fake.startCalls()
			if !idem {
				if p := wantError(t, evs, protocol.ErrorProviderError); !strings.Contains(p.Message, "may have reached Hermes") {
					t.Errorf("message %q", p.Message)
				}
				if len(starts) != 1 || starts[0].Key != "" {
					t.Errorf("starts %+v, want one without Idempotency-Key", starts)
				}
				return
			}
			if terminal(evs).Type != protocol.EventDone {
				t.Fatalf("terminal %s %s", terminal(evs).Type, terminal(evs).Payload)
			}
			if len(starts) != 2 || starts[0].Key != res.RunID || starts[1].Key != res.RunID {
				t.Fatalf("starts %+v, want two with the run id as Idempotency-Key", starts)
			}
			h.fake.onlyRun(t) // one upstream run
		})
	}
}

// The connection drops, the poll finds the run going, the resubscribe
// answers 404 (Hermes' old handler already dropped the queue), and by then
// Hermes completed the run: the status settles it, nothing is stopped.
func TestStreamGoneButRunCompleted(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "one ")
		fr.set(func(fr *fakeRun) {
			fr.streamGone = true
			fr.onPoll = func(n int) {
				if n == 2 { // Hermes finished between the two polls
					fr.status, fr.output = "completed", "one two"
				}
			}
		})
		s.drop()
	}, nil)
	evs := h.finish(h.start("", "go").RunID)
	if e := terminal(evs); e.Type != protocol.EventDone || text(evs) != "one two" {
		t.Fatalf("terminal %s, text %q\n%s", e.Type, text(evs), dump(evs))
	}
	if fr := h.fake.onlyRun(t); fr.stopCount() != 0 || fr.subs != 2 {
		t.Errorf("stops %d, subscriptions %d; want 0 and 2", fr.stopCount(), fr.subs)
	}
}

// The stream is cut mid-run while Hermes goes on. The driver resubscribes
// at once, before Hermes' handler of the cut connection noticed: the new
// stream shares the run's queue until that handler drops it, then carries
// only keepalives, while Hermes settles the run. The status polled
// alongside the resubscribed stream ends the run the way Hermes ended it,
// long before EventIdleTimeout, with exactly one terminal event.
func TestStreamCutQueueDropped(t *testing.T) {
	cases := []struct {
		name   string
		settle func(fr *fakeRun)
		check  func(t *testing.T, evs []protocol.Envelope)
	}{
		{"completed", func(fr *fakeRun) { fr.finish("one two three") }, func(t *testing.T, evs []protocol.Envelope) {
			if e := terminal(evs); e.Type != protocol.EventDone {
				t.Fatalf("terminal %s %s\n%s", e.Type, e.Payload, dump(evs))
			}
			if got := text(evs); got != "one two three" {
				t.Errorf("text %q: the output not streamed is missing", got)
			}
			if u := ofType(evs, protocol.EventUsageFinal); len(u) != 1 || payload[protocol.Usage](u[0]).OutputTokens != 7 {
				t.Errorf("usage.final:\n%s", dump(evs))
			}
		}},
		{"failed", func(fr *fakeRun) { fr.set(func(fr *fakeRun) { fr.status, fr.errText = "failed", "model overloaded" }) },
			func(t *testing.T, evs []protocol.Envelope) {
				if p := wantError(t, evs, protocol.ErrorProviderError); !strings.Contains(p.Message, "model overloaded") {
					t.Errorf("message %q", p.Message)
				}
			}},
		{"cancelled", func(fr *fakeRun) { fr.set(func(fr *fakeRun) { fr.status = "cancelled" }) },
			func(t *testing.T, evs []protocol.Envelope) {
				if e := terminal(evs); e.Type != protocol.EventCancelled {
					t.Fatalf("terminal %s %s", e.Type, e.Payload)
				}
			}},
		{"interrupted", func(fr *fakeRun) { fr.set(func(fr *fakeRun) { fr.status = "interrupted" }) },
			func(t *testing.T, evs []protocol.Envelope) { wantError(t, evs, protocol.ErrorInterrupted) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
				if sub == 1 {
					deltas(s, "one ", "two ")
					s.drop()
				}
				s.orphaned(30*time.Millisecond, func() { tc.settle(fr) })
			}, func(c *hermes.Config) {
				c.EventIdleTimeout = 10 * time.Second // the end without the poll
			})
			res := h.start("", "go")
			evs := h.finish(res.RunID)
			tc.check(t, evs)
			if fr := h.fake.onlyRun(t); fr.subs != 2 || fr.stopCount() != 0 {
				t.Errorf("%d subscriptions, %d stops; want 2 and 0", fr.subs, fr.stopCount())
			}
		})
	}
}

// Hermes 0.18.x sends reasoning.available with the assistant message's own
// text (its first 500 characters) after the message streamed, and, for a
// message it did not stream, before run.completed carries it as output:
// neither is journaled a second time as reasoning. Real reasoning
// (reasoning.delta) and the text of an unstreamed message that is not the
// answer stay, as reasoning.
func TestReasoningAvailableRepeatsAnswer(t *testing.T) {
	answer := "The answer is 42, " + strings.Repeat("and more words ", 40)
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		switch n {
		case 1: // streamed
			s.event("reasoning.delta", map[string]any{"text": "genuine thought"})
			deltas(s, "Let me check.")
			s.event("reasoning.available", map[string]any{"text": "Let me check."})
			s.event("tool.started", map[string]any{"tool": "terminal", "preview": "ls"})
			s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.1})
			deltas(s, answer[:100], answer[100:])
			s.event("reasoning.available", map[string]any{"text": strings.TrimSpace(answer)[:500]})
			completed(s, "Let me check."+answer)
		case 2: // not streamed
			s.event("reasoning.available", map[string]any{"text": "Looking at the files first."})
			s.event("tool.started", map[string]any{"tool": "terminal", "preview": "ls"})
			s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.1})
			s.event("reasoning.available", map[string]any{"text": strings.TrimSpace(answer)[:500]})
			completed(s, answer)
		}
	}, nil)
	for i, q := range []string{"q1", "q2"} {
		evs := h.finish(h.start("", q).RunID) // one after the other: run i+1 is Hermes' run i+1
		var shown strings.Builder             // everything a transcript shows: text and reasoning
		for _, e := range evs {
			switch e.Type {
			case protocol.EventTokenDelta:
				shown.WriteString(payload[protocol.TokenDeltaPayload](e).Text)
			case protocol.EventReasoningDelta:
				shown.WriteString(payload[protocol.ReasoningPayload](e).Text)
			}
		}
		if n := strings.Count(shown.String(), "The answer is 42"); n != 1 {
			t.Errorf("run %d shows the answer %d times, want once:\n%s", i+1, n, dump(evs))
		}
		var reasoning strings.Builder
		for _, e := range ofType(evs, protocol.EventReasoningDelta) {
			reasoning.WriteString(payload[protocol.ReasoningPayload](e).Text)
		}
		want := []string{"genuine thought", "Looking at the files first."}[i]
		if reasoning.String() != want {
			t.Errorf("run %d reasoning %q, want %q", i+1, reasoning.String(), want)
		}
		if !strings.HasSuffix(text(evs), answer) {
			t.Errorf("run %d text %q lacks the answer", i+1, text(evs))
		}
	}
}

func mustEvent(t *testing.T, rid, sid string, typ protocol.EventType, p any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent(rid, sid, typ, p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
