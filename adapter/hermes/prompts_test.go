package hermes_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// An approval is relayed as Hermes 0.18.x sends it: tools/approval.py's
// approval data (command, description, pattern keys) and the choices the
// API server adds. Hermes sends no risk, so the prompt's risk is empty and
// named unknown, not made up; its choices are Hermes' own. A server that
// does send a risk has it kept.
func TestApprovalAsHermesSentIt(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("approval.request", map[string]any{"command": "rm -rf build/", "description": "recursive delete",
			"pattern_key": "recursive delete", "pattern_keys": []string{"recursive delete"},
			"choices": []string{"once", "session", "always", "deny"}})
		s.event("approval.responded", map[string]any{"choice": "once", "resolved": 1})
		s.event("approval.request", map[string]any{"command": "curl x | sh", "risk": "medium", "choices": []string{"once", "deny"}})
		s.event("approval.responded", map[string]any{"choice": "deny", "resolved": 1})
		completed(s, "ok")
	}, nil)
	evs := h.finish(h.start("", "clean").RunID)
	reqs := ofType(evs, protocol.EventApprovalReq)
	if len(reqs) != 2 {
		t.Fatalf("%d approval.requested:\n%s", len(reqs), dump(evs))
	}
	a := payload[protocol.ApprovalRequestedPayload](reqs[0])
	if a.Risk != "" || !reflect.DeepEqual(a.Unknown, []string{protocol.PromptRisk}) ||
		!reflect.DeepEqual(a.Choices, []string{"once", "session", "always", "deny"}) || a.Summary != "recursive delete: rm -rf build/" {
		t.Errorf("approval.requested %+v: want Hermes' choices, no risk and risk unknown", a)
	}
	if !strings.Contains(string(reqs[0].Payload), `"unknown":["risk"]`) || !strings.Contains(string(reqs[0].Payload), `"risk":""`) {
		t.Errorf("on the wire: %s", reqs[0].Payload)
	}
	b := payload[protocol.ApprovalRequestedPayload](reqs[1])
	if b.Risk != "medium" || b.Unknown != nil || !reflect.DeepEqual(b.Choices, []string{"once", "deny"}) {
		t.Errorf("approval.requested %+v: want the risk Hermes sent", b)
	}
}

// Hermes may settle an approval with a choice runhub's prompt did not
// offer (another of its clients answered with a wider scope): the
// resolution records the choice Hermes made, not a "nearest" offered one,
// and nothing is posted back.
func TestApprovalSettledOutsideTheOfferedChoices(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("approval.request", map[string]any{"command": "make deploy", "choices": []string{"once", "deny"}})
		s.event("approval.responded", map[string]any{"choice": "always", "resolved": 1})
		completed(s, "deployed")
	}, nil)
	evs := h.finish(h.start("", "deploy").RunID)
	res := ofType(evs, protocol.EventApprovalRes)
	if len(res) != 1 {
		t.Fatalf("%d approval.resolved:\n%s", len(res), dump(evs))
	}
	if p := payload[protocol.ApprovalResolvedPayload](res[0]); p.Choice != "always" || p.Status != "resolved" {
		t.Errorf("approval.resolved %+v, want the choice Hermes made (always)", p)
	}
	if fr := h.fake.onlyRun(t); len(fr.approvals) != 0 {
		t.Error("an answer was posted for an approval Hermes settled")
	}
}

// Hermes' runs API has no clarify endpoint, so a clarify.request (the
// plain question or the form variant) is not asked of the user: no
// clarify.requested, no prompt a user could answer, no expiry, and
// nothing is ever posted to /clarify. The question is journaled as a
// note, and the run goes on to Hermes' end.
func TestClarifyNotRelayed(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		s.event("clarify.request", map[string]any{"clarify_id": "clr_1", "question": "Which environment?", "choices": []string{"staging", "production"}})
		s.event("clarify.request", map[string]any{"clarify_id": "clr_2",
			"questions": []map[string]any{{"id": "q0", "prompt": "Which target?", "choices": []string{"eu", "us"}}}})
		s.event("clarify.responded", map[string]any{"clarify_id": "clr_1", "outcome": "expired"})
		s.event("clarify.retired", map[string]any{"clarify_id": "clr_2"})
		deltas(s, "going ", "on")
		completed(s, "going on")
	}, nil)
	res := h.start("", "deploy")
	evs := h.finish(res.RunID)
	if terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s:\n%s", terminal(evs).Type, dump(evs))
	}
	if n := len(ofType(evs, protocol.EventClarifyReq)) + len(ofType(evs, protocol.EventClarifyRes)); n != 0 {
		t.Fatalf("%d clarify events for questions nobody can answer:\n%s", n, dump(evs))
	}
	var got []string
	for _, e := range notes(evs) {
		got = append(got, payload[protocol.ProgressPayload](e).Text)
	}
	want := []string{
		"Hermes asked a question this server gives no way to answer, so it was not relayed: Which environment?",
		"Hermes asked a question this server gives no way to answer, so it was not relayed: Which target?",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}
	if r, err := h.control(context.Background(), protocol.Control{Op: protocol.OpClarify, RunID: res.RunID, ClarifyID: "c1", Response: "staging"}); err != nil || r.Accepted {
		t.Errorf("a clarify answer: %+v %v", r, err)
	}
	if n := h.fake.absentCalls(); n != 0 {
		t.Errorf("%d requests to a route Hermes does not have (POST /clarify)", n)
	}
	if text(evs) != "going on" {
		t.Errorf("text %q", text(evs))
	}
}
