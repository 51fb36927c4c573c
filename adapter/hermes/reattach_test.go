package hermes_test

// Runs a hub process left executing, handed back to the driver by the
// executor's Recover (driver.Reattacher): the Hermes run goes on upstream
// meanwhile, and the driver follows it again from where the journal left
// it.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// ev is one event a killed hub journaled.
type ev struct {
	typ protocol.EventType
	p   any
}

// leftOpen journals a run as a hub killed mid-run leaves it: run.started,
// the Hermes run id (when upstream is not empty), then evs; it returns the
// run's id.
func (h *harness) leftOpen(upstream string, evs ...ev) string {
	t := h.t
	t.Helper()
	ctx := context.Background()
	sid, rid := adapter.NewID("s_"), adapter.NewID("r_")
	if err := h.store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "local", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(protocol.StartRunRequest{SessionID: sid, Message: "long job", Provider: "hermes"})
	if err := h.store.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid, Owner: "local", CreatedAt: 1, Request: req}); err != nil {
		t.Fatal(err)
	}
	all := []ev{{protocol.EventRunStarted, protocol.RunStartedPayload{Message: "long job", Provider: "hermes", Toolsets: []string{}}}}
	if upstream != "" {
		all = append(all, ev{protocol.EventProgress, protocol.ProgressPayload{Text: "started Hermes run " + upstream}})
	}
	for _, e := range append(all, evs...) {
		if _, err := h.store.Append(ctx, mustEvent(t, rid, sid, e.typ, e.p), ""); err != nil {
			t.Fatal(err)
		}
	}
	h.runs = append(h.runs, rid)
	return rid
}

// recover runs the executor's start-up recovery and wants n runs ended
// as interrupted by it.
func (h *harness) recover(n int) {
	h.t.Helper()
	if got, err := h.exec.Recover(context.Background()); err != nil || got != n {
		h.t.Fatalf("Recover: %d, %v; want %d runs interrupted", got, err, n)
	}
}

func token(id, text string) ev {
	return ev{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: id, Text: text}}
}

// doneResult checks the run ended done and returns done's result.
func doneResult(t *testing.T, evs []protocol.Envelope) string {
	t.Helper()
	e := terminal(evs)
	if e.Type != protocol.EventDone {
		t.Fatalf("terminal %s %s, want done\n%s", e.Type, e.Payload, dump(evs))
	}
	return payload[protocol.DonePayload](e).Result
}

// A hub killed mid-run left three runs open: one whose Hermes run is still
// going (Hermes dropped its event stream when the hub's connection went),
// one whose Hermes run completed meanwhile, one that never reached Hermes.
// Recover interrupts only the third, and stops nothing: the first is
// followed by its status until Hermes completes it, the second ends at
// once; both end done with the whole answer — the text journaled before
// the restart, then the rest of Hermes' output, nothing twice.
func TestReattach_RecoverFollowsOrEnds(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { s.hold(fr, 0) }, nil)
	going, ended := h.fake.admit(), h.fake.admit()
	going.set(func(fr *fakeRun) {
		fr.streamGone = true
		fr.onPoll = func(n int) {
			if n == 3 { // Hermes completes the run while it is followed
				fr.status, fr.output = "completed", "The answer is 42."
				fr.usage = map[string]any{"input_tokens": 11, "output_tokens": 7}
			}
		}
	})
	ended.set(func(fr *fakeRun) { fr.streamGone = true })
	ended.finish("Done before the restart.")
	runs := []string{
		h.leftOpen(going.id, token("m1", "The answer "), token("m1", "is 4")),
		h.leftOpen(ended.id, token("m1", "Done bef")),
		h.leftOpen("", token("m1", "working")),
	}
	h.recover(1)

	for i, want := range []string{"The answer is 42.", "Done before the restart."} {
		evs := h.finish(runs[i])
		if got := doneResult(t, evs); got != want {
			t.Errorf("run %d: done result %q, want %q", i+1, got, want)
		}
		if got := text(evs); got != want {
			t.Errorf("run %d: journaled text %q, want %q once", i+1, got, want)
		}
		for _, e := range ofType(evs, protocol.EventTokenDelta) {
			if id := payload[protocol.TokenDeltaPayload](e).MessageID; id != "m1" {
				t.Errorf("run %d: text in message %s, want it all in m1", i+1, id)
			}
		}
		if ns := notes(evs); len(ns) != 1 || !strings.Contains(payload[protocol.ProgressPayload](ns[0]).Text, "again after a hub restart") {
			t.Errorf("run %d: progress notes %s", i+1, dump(ns))
		}
	}
	if p := wantError(t, h.finish(runs[2]), protocol.ErrorInterrupted); !strings.Contains(p.Message, "restarted") {
		t.Errorf("run 3: message %q", p.Message)
	}
	if s := h.fake.stopCalls(); len(s) != 0 {
		t.Errorf("stops %v, want none", s)
	}
}

// A re-attached run whose Hermes event stream is still there (the hub came
// back before Hermes noticed its connection was gone) is followed on it:
// tool activity is journaled as it comes; the text Hermes streams is not
// (what it sent while the hub was down is partly lost), the final output
// is — here a message of its own, after the tool call.
func TestReattach_FollowsTheStream(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "ile list.") // the end of the message the journal holds part of
		s.event("tool.started", map[string]any{"tool": "terminal", "preview": "ls"})
		s.event("tool.completed", map[string]any{"tool": "terminal", "duration": 0.25, "error": false})
		deltas(s, "The files ", "are a and b.")
		completed(s, "The files are a and b.")
	}, nil)
	fr := h.fake.admit()
	rid := h.leftOpen(fr.id, token("m1", "Let me get the f"),
		ev{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "read", Args: json.RawMessage(`{}`)}},
		ev{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t1", Status: "ok", Result: json.RawMessage(`null`)}},
		token("m2", "Let me get the f"))
	h.recover(0)
	evs := h.finish(rid)
	if got := doneResult(t, evs); got != "The files are a and b." {
		t.Errorf("done result %q", got)
	}
	if got := text(evs); got != "Let me get the fLet me get the fThe files are a and b." {
		t.Errorf("journaled text %q", got)
	}
	last := ofType(evs, protocol.EventTokenDelta)
	if id := payload[protocol.TokenDeltaPayload](last[len(last)-1]).MessageID; id != "m3" {
		t.Errorf("the output is in message %s, want m3 (after the tool call)", id)
	}
	tools := ofType(evs, protocol.EventToolStarted)
	if len(tools) != 2 || payload[protocol.ToolStartedPayload](tools[1]).ToolCallID != "t2" {
		t.Errorf("tool calls:\n%s", dump(evs))
	}
	if d := ofType(evs, protocol.EventToolDone); len(d) != 2 || payload[protocol.ToolDonePayload](d[1]).ToolCallID != "t2" {
		t.Errorf("tool ends:\n%s", dump(evs))
	}
	if fr.stopCount() != 0 {
		t.Errorf("%d stops", fr.stopCount())
	}
}

// A Hermes run that ended while the hub was down ends the same way here:
// failed → provider_error with Hermes' reason, cancelled → cancelled,
// interrupted (Hermes restarted) → interrupted.
func TestReattach_EndedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		status, errText string
		check           func(t *testing.T, evs []protocol.Envelope)
	}{
		{"failed", "model overloaded", func(t *testing.T, evs []protocol.Envelope) {
			if p := wantError(t, evs, protocol.ErrorProviderError); !strings.Contains(p.Message, "model overloaded") {
				t.Errorf("message %q", p.Message)
			}
		}},
		{"cancelled", "", func(t *testing.T, evs []protocol.Envelope) {
			if e := terminal(evs); e.Type != protocol.EventCancelled {
				t.Fatalf("terminal %s %s", e.Type, e.Payload)
			}
		}},
		{"interrupted", "", func(t *testing.T, evs []protocol.Envelope) { wantError(t, evs, protocol.ErrorInterrupted) }},
	} {
		t.Run(tc.status, func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { s.hold(fr, 0) }, nil)
			fr := h.fake.admit()
			fr.set(func(fr *fakeRun) { fr.status, fr.errText, fr.streamGone = tc.status, tc.errText, true })
			rid := h.leftOpen(fr.id, token("m1", "half"))
			h.recover(0)
			evs := h.finish(rid)
			tc.check(t, evs)
			if got := text(evs); got != "half" {
				t.Errorf("text %q", got)
			}
		})
	}
}

// Hermes no longer knows the run (its status expired, or Hermes restarted
// too): one clear error, interrupted, and nothing to stop.
func TestReattach_GoneFromHermes(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { s.hold(fr, 0) }, nil)
	rid := h.leftOpen("run_000000000000000000000000000000ff", token("m1", "half"))
	h.recover(0)
	p := wantError(t, h.finish(rid), protocol.ErrorInterrupted)
	if !strings.Contains(p.Message, "no longer knows run run_000000000000000000000000000000ff") || !strings.Contains(p.Message, "404") {
		t.Errorf("message %q", p.Message)
	}
	if s := h.fake.stopCalls(); len(s) != 0 {
		t.Errorf("stops %v", s)
	}
}

// The Hermes run waits on an approval it asked while the hub was down: the
// journal never saw it and nobody can answer it. The run ends with one
// clear error and the Hermes run is stopped, once.
func TestReattach_ApprovalTheJournalNeverSaw(t *testing.T) {
	for _, gone := range []bool{true, false} {
		name := map[bool]string{true: "status only", false: "stream"}[gone]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
				// The request went to the old connection: the new one has
				// keepalives only.
				s.hold(fr, 10*time.Millisecond)
			}, nil)
			fr := h.fake.admit()
			fr.set(func(fr *fakeRun) { fr.status, fr.streamGone = "running", gone })
			if gone {
				fr.set(func(fr *fakeRun) { fr.status = "waiting_for_approval" })
			} else {
				fr.set(func(fr *fakeRun) {
					fr.onPoll = func(n int) { // asked after the re-attach's first look
						if n > 1 {
							fr.status = "waiting_for_approval"
						}
					}
				})
			}
			rid := h.leftOpen(fr.id, token("m1", "Cleaning up."))
			h.recover(0)
			evs := h.finish(rid)
			p := wantError(t, evs, protocol.ErrorInterrupted)
			if !strings.Contains(p.Message, "approval") || !strings.Contains(p.Message, "stopped") {
				t.Errorf("message %q", p.Message)
			}
			if len(ofType(evs, protocol.EventApprovalReq)) != 0 {
				t.Errorf("an approval was journaled:\n%s", dump(evs))
			}
			if fr.stopCount() != 1 {
				t.Errorf("%d stops, want 1", fr.stopCount())
			}
		})
	}
}

// An approval the journal holds and nobody had answered when the hub died
// waits on the user again after the restart, without a second
// approval.requested: the user's choice reaches Hermes, which goes on, and
// the run ends done with one approval.resolved.
func TestReattach_JournaledApprovalAskedAgain(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { s.hold(fr, 0) }, nil)
	fr := h.fake.admit()
	fr.set(func(fr *fakeRun) { fr.status, fr.streamGone = "waiting_for_approval", true })
	rid := h.leftOpen(fr.id, token("m1", "Checking. "),
		ev{protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a1", Summary: "make clean", Risk: "high", Choices: []string{"once", "deny"}}})
	h.recover(0)
	go func() {
		body := fr.wait(t, fr.approvals, "approval")
		if body["choice"] != "once" {
			t.Errorf("approval body %v", body)
		}
		fr.finish("Checking. Cleaned.")
	}()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := h.control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: rid, ApprovalID: "a1", Choice: "once"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == protocol.ResultAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approve: %+v", res)
		}
		time.Sleep(10 * time.Millisecond)
	}
	evs := h.finish(rid)
	if got := doneResult(t, evs); got != "Checking. Cleaned." {
		t.Errorf("done result %q", got)
	}
	if n := len(ofType(evs, protocol.EventApprovalReq)); n != 1 {
		t.Errorf("%d approval.requested, want the one journaled before", n)
	}
	res := ofType(evs, protocol.EventApprovalRes)
	if len(res) != 1 || payload[protocol.ApprovalResolvedPayload](res[0]).Choice != "once" {
		t.Errorf("approval.resolved:\n%s", dump(evs))
	}
}

// The hub stops (Close, Options.Detach: a graceful shutdown) while a
// Hermes run streams: the Hermes run is not stopped and the run gets no
// terminal event. The next executor re-attaches it: it ends done with the
// whole answer, the text journaled before the stop once.
func TestReattach_DetachedOnCloseThenReattached(t *testing.T) {
	streamed := make(chan struct{})
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		if sub == 1 {
			deltas(s, "The answer ", "is ")
			close(streamed)
			s.hold(fr, 10*time.Millisecond)
			return
		}
		deltas(s, "42", ".")
		completed(s, "The answer is 42.")
	}, nil)
	h.newExec(true)
	rid := h.start("", "question").RunID
	<-streamed
	deadline := time.Now().Add(10 * time.Second)
	for text(h.events(rid)) != "The answer is " && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	h.exec.Close()
	meta, err := h.store.Run(context.Background(), rid)
	if err != nil || meta.Terminal {
		t.Fatalf("after Close: %+v, %v; want the run left open", meta, err)
	}
	fr := h.fake.onlyRun(t)
	if fr.stopCount() != 0 {
		t.Fatalf("Close stopped the Hermes run")
	}
	h.newExec(true)
	h.recover(0)
	evs := h.finish(rid)
	if got := doneResult(t, evs); got != "The answer is 42." {
		t.Errorf("done result %q", got)
	}
	if got := text(evs); got != "The answer is 42." {
		t.Errorf("journaled text %q", got)
	}
	if fr.stopCount() != 0 || h.fake.modelCalls() != 1 {
		t.Errorf("%d stops, %d Hermes runs; want 0 and 1", fr.stopCount(), h.fake.modelCalls())
	}
}

// The user was cancelling the run when the hub died (status cancelling
// journaled, no terminal event): the re-attached run is cancelled again —
// the Hermes run is stopped, once, and the run ends cancelled.
func TestReattach_CancellingRunIsStopped(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { s.hold(fr, 0) }, nil)
	fr := h.fake.admit()
	rid := h.leftOpen(fr.id, token("m1", "half"),
		ev{protocol.EventStatus, protocol.StatusPayload{Status: protocol.StatusCancelling, Controls: []string{}}})
	h.recover(0)
	evs := h.finish(rid)
	if e := terminal(evs); e.Type != protocol.EventCancelled || !payload[protocol.CancelledPayload](e).Partial {
		t.Fatalf("terminal %s %s, want cancelled with partial output\n%s", e.Type, e.Payload, dump(evs))
	}
	if fr.stopCount() != 1 {
		t.Errorf("%d stops, want 1", fr.stopCount())
	}
}
