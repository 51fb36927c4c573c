package adaptertest

import (
	"context"

	"github.com/runhub/runhub/protocol"
)

// respondFunc is env.approve or env.clarify.
type respondFunc func(ctx context.Context, runID, promptID, answer string) (protocol.ControlResult, error)

// prompt is one kind of prompt as the suite drives it.
type prompt struct {
	script        string
	requested     protocol.EventType
	resolved      protocol.EventType
	awaiting      protocol.Status
	answer, other string // an answer the prompt takes, and another one
	respond       func(e *env) respondFunc
	id            func(t *env, ev protocol.Envelope) string
	pending       func(st protocol.RunStatus) string
	resolution    func(t *env, ev protocol.Envelope) (id, status, answer string)
}

var approval = prompt{
	script: ScriptApproval, requested: protocol.EventApprovalReq, resolved: protocol.EventApprovalRes,
	awaiting: protocol.StatusAwaitingApproval, answer: "allow", other: "deny",
	respond: func(e *env) respondFunc { return e.approve },
	id: func(e *env, ev protocol.Envelope) string {
		return payload[protocol.ApprovalRequestedPayload](e.t, ev).ApprovalID
	},
	pending: func(st protocol.RunStatus) string { return st.PendingApprovalID },
	resolution: func(e *env, ev protocol.Envelope) (string, string, string) {
		p := payload[protocol.ApprovalResolvedPayload](e.t, ev)
		return p.ApprovalID, p.Status, p.Choice
	},
}

var clarify = prompt{
	script: ScriptClarify, requested: protocol.EventClarifyReq, resolved: protocol.EventClarifyRes,
	awaiting: protocol.StatusAwaitingClarify, answer: "short", other: "long",
	respond: func(e *env) respondFunc { return e.clarify },
	id: func(e *env, ev protocol.Envelope) string {
		return payload[protocol.ClarifyRequestedPayload](e.t, ev).ClarifyID
	},
	pending: func(st protocol.RunStatus) string { return st.PendingClarifyID },
	resolution: func(e *env, ev protocol.Envelope) (string, string, string) {
		p := payload[protocol.ClarifyResolvedPayload](e.t, ev)
		return p.ClarifyID, p.Status, p.Response
	},
}

var respondTests = []subtest{
	{"Approval", func(e *env) { e.respondCases(approval) }},
	{"Clarify", func(e *env) { e.respondCases(clarify) }},
	{"ApprovalChoiceOutsideChoices", func(e *env) {
		r := e.start("", ScriptApproval)
		id := approval.id(e, e.waitEvent(r.RunID, ofType(protocol.EventApprovalReq)))
		ctx, cancel := e.ctx()
		defer cancel()
		_, err := e.approve(ctx, r.RunID, id, "maybe")
		e.wantCode("RespondApproval with a choice outside the prompt's", err, protocol.CodeBadRequest)
		res, err := e.approve(ctx, r.RunID, id, "deny")
		e.wantResult("RespondApproval after a refused choice", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantRun(r.RunID, e.events(r.RunID), protocol.EventDone)
	}},
	{"ClarifyExpired", func(e *env) {
		r := e.start("", ScriptExpire)
		res := e.waitEvent(r.RunID, ofType(protocol.EventClarifyRes))
		id, status, _ := clarify.resolution(e, res)
		if status != "expired" {
			e.t.Fatalf("clarify.resolved status %q; want expired", status)
		}
		ctx, cancel := e.ctx()
		defer cancel()
		out, err := e.clarify(ctx, r.RunID, id, "late")
		e.wantResult("RespondClarify to an expired prompt", out, err, protocol.ResultExpired, r.RunID, r.SessionID)
		e.wantMessage(out, "the prompt has expired")
		evs := e.cancelAndEnd(r.RunID)
		if n := count(evs, ofType(protocol.EventClarifyRes)); n != 1 {
			e.t.Errorf("%d clarify.resolved events; want 1: %s", n, types(evs))
		}
	}},
	{"AfterCancel", func(e *env) {
		// A cancel closes the pending prompt unresolved; it takes no answer.
		r := e.start("", ScriptApproval)
		id := approval.id(e, e.waitEvent(r.RunID, ofType(protocol.EventApprovalReq)))
		evs := e.cancelAndEnd(r.RunID)
		if n := count(evs, ofType(protocol.EventApprovalRes)); n != 0 {
			e.t.Errorf("a cancelled prompt was resolved: %s", types(evs))
		}
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.approve(ctx, r.RunID, id, "allow")
		e.wantResult("RespondApproval after a cancel", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
		e.wantMessage(res, "the run is not active")
	}},
	{"UnknownRun", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		_, err := e.approve(ctx, "r_missing", "a_1", "allow")
		e.wantNotFound("RespondApproval of an unknown run", err)
		_, err = e.clarify(ctx, "r_missing", "c_1", "short")
		e.wantNotFound("RespondClarify of an unknown run", err)
	}},
}

// respondCases drives one prompt: pending in GetRun, a wrong id, the
// answer, a second answer, the journaled resolution, an answer after the
// end.
func (e *env) respondCases(p prompt) {
	r := e.start("", p.script)
	req := e.waitEvent(r.RunID, ofType(p.requested))
	id := p.id(e, req)
	respond := p.respond(e)
	ctx, cancel := e.ctx()
	defer cancel()
	st, err := e.a.GetRun(ctx, r.RunID)
	if err != nil || st.Status != p.awaiting || p.pending(st) != id {
		e.t.Fatalf("GetRun with a pending prompt = %+v, %v; want %s with pending id %s", st, err, p.awaiting, id)
	}
	res, err := respond(ctx, r.RunID, id+"x", p.answer)
	e.wantResult("respond to a wrong prompt id", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
	e.wantMessage(res, "no such pending prompt")
	res, err = respond(ctx, r.RunID, id, p.answer)
	e.wantResult("respond to the pending prompt", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
	e.wantMessage(res, "delivered")
	res, err = respond(ctx, r.RunID, id, p.other)
	e.wantResult("a second answer", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
	evs := e.events(r.RunID)
	e.wantRun(r.RunID, evs, protocol.EventDone)
	if n := count(evs, ofType(p.resolved)); n != 1 {
		e.t.Fatalf("%d %s events; want 1: %s", n, p.resolved, types(evs))
	}
	resolved, _ := find(evs, ofType(p.resolved))
	if gotID, status, answer := p.resolution(e, resolved); gotID != id || status != "resolved" || answer != p.answer {
		e.t.Errorf("%s = %s %s %q; want %s resolved %q", p.resolved, gotID, status, answer, id, p.answer)
	}
	if text := e.tokens(evs); text != p.script+": "+p.answer {
		e.t.Errorf("the driver got %q; want %q", text, p.script+": "+p.answer)
	}
	res, err = respond(ctx, r.RunID, id, p.answer)
	e.wantResult("respond after the run ended", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
	e.wantMessage(res, "the run is not active")
}

// tokens is the text of a run's token.delta events (the executor may re-cut
// streamed text at word boundaries).
func (e *env) tokens(evs []protocol.Envelope) string {
	text := ""
	for _, ev := range evs {
		if ev.Type == protocol.EventTokenDelta {
			text += payload[protocol.TokenDeltaPayload](e.t, ev).Text
		}
	}
	return text
}
