package adaptertest

import (
	"slices"

	"github.com/runhub/runhub/protocol"
)

var goalTests = []subtest{
	{"IdleSession", func(e *env) {
		r := e.start("", "done")
		e.events(r.RunID)
		sid := r.SessionID
		ctx, cancel := e.ctx()
		defer cancel()
		steps := []struct {
			action, text, status, message string
		}{
			{protocol.GoalStatus, "", protocol.ResultAccepted, "no goal"},
			{protocol.GoalPause, "", protocol.ResultNotActive, ""},
			{protocol.GoalSet, "done stay", protocol.ResultAccepted, "goal active"},
			{protocol.GoalPause, "", protocol.ResultAccepted, "goal paused"},
			{protocol.GoalPause, "", protocol.ResultAccepted, "goal paused"}, // no change
			{protocol.GoalEdit, "done stay longer", protocol.ResultAccepted, "goal paused"},
			{protocol.GoalResume, "", protocol.ResultAccepted, "goal active"},
			{protocol.GoalStatus, "", protocol.ResultAccepted, "goal active"},
			{protocol.GoalClear, "", protocol.ResultAccepted, "goal cleared"},
			{protocol.GoalEdit, "done again", protocol.ResultNotActive, ""},
			{protocol.GoalResume, "", protocol.ResultNotActive, ""},
			{protocol.GoalClear, "", protocol.ResultAccepted, "goal cleared"},
		}
		for _, s := range steps {
			res, err := e.goal(ctx, sid, protocol.GoalRequest{Action: s.action, Text: s.text})
			what := "UpdateGoal " + s.action + " on an idle session"
			e.wantResult(what, res, err, s.status, "", sid)
			if s.message != "" && res.Message != s.message {
				e.t.Errorf("%s: message %q; want %q", what, res.Message, s.message)
			}
			if res.EventID != "" {
				e.t.Errorf("%s: event_id %q; want none (no run to write on)", what, res.EventID)
			}
		}
		_, err := e.goal(ctx, sid, protocol.GoalRequest{Action: "bogus"})
		e.wantCode("UpdateGoal with an unknown action", err, protocol.CodeBadRequest)
		_, err = e.goal(ctx, "s_missing", protocol.GoalRequest{Action: protocol.GoalSet, Text: "done"})
		e.wantNotFound("UpdateGoal of an unknown session", err)
	}},
	{"ActiveRun", func(e *env) {
		r := e.startReady("", ScriptBlock)
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalSet, Text: "done stay"})
		e.wantResult("UpdateGoal set with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantGoalEvent(r.RunID, res.EventID, protocol.GoalActive, "done stay")
		res, err = e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalPause})
		e.wantResult("UpdateGoal pause with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantGoalEvent(r.RunID, res.EventID, protocol.GoalPaused, "done stay")
		res, err = e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalStatus})
		e.wantResult("UpdateGoal status with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		if res.EventID != "" {
			e.t.Errorf("UpdateGoal status wrote event %s; want none", res.EventID)
		}
		res, err = e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalClear})
		e.wantResult("UpdateGoal clear with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantGoalEvent(r.RunID, res.EventID, protocol.GoalCleared, "done stay")
		evs := e.cancelAndEnd(r.RunID)
		if n := count(evs, ofType(protocol.EventGoalUpdated)); n != 3 {
			e.t.Errorf("%d goal.updated events; want 3 (set, pause, clear): %s", n, types(evs))
		}
	}},
	{"Continuation", func(e *env) {
		// A goal set on an idle session that the runtime continues: one goal
		// run (source goal, message the goal text, seq 2 goal.updated with
		// turns 1) that ends the goal as done before its done.
		r := e.start("", "done")
		e.events(r.RunID)
		ctx, cancel := e.ctx()
		defer cancel()
		const text = "done goal-once"
		res, err := e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalSet, Text: text})
		e.wantResult("UpdateGoal set that continues", res, err, protocol.ResultAccepted, "", r.SessionID)
		e.wantGoalRun(e.waitRun(r.SessionID, text), text)
	}},
	{"AfterRunQueueFirst", func(e *env) {
		// A goal set while a run is active is evaluated when the run
		// succeeds; the queue is served first, then the goal's run starts.
		r := e.startReady("", ScriptApproval)
		ctx, cancel := e.ctx()
		defer cancel()
		const text = "done goal-once"
		res, err := e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalSet, Text: text})
		e.wantResult("UpdateGoal set with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		res, err = e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: "done queued"}, "")
		e.wantResult("QueueMessage with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		id := approval.id(e, e.waitEvent(r.RunID, ofType(protocol.EventApprovalReq)))
		res, err = e.approve(ctx, r.RunID, id, "allow")
		e.wantResult("RespondApproval", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantRun(r.RunID, e.events(r.RunID), protocol.EventDone)
		queued := e.waitRun(r.SessionID, "done queued")
		e.wantFromQueue(e.events(queued.RunID), "done queued")
		e.wantGoalRun(e.waitRun(r.SessionID, text), text)
		e.rec.mu.Lock()
		order := slices.Clone(e.rec.runs)
		e.rec.mu.Unlock()
		if len(order) != 3 || order[1].Source != "queue" || order[2].Source != "goal" {
			e.t.Errorf("runs in the session: %+v; want the user's, the queued one, then the goal's", order)
		}
	}},
	{"ResumeAfterCancel", func(e *env) {
		// A cancelled run is not evaluated; the goal it leaves active goes
		// on with resume.
		r := e.startReady("", ScriptBlock)
		ctx, cancel := e.ctx()
		defer cancel()
		const text = "done goal-once"
		res, err := e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalSet, Text: text})
		e.wantResult("UpdateGoal set with an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		evs := e.cancelAndEnd(r.RunID)
		if n := count(evs, ofType(protocol.EventGoalUpdated)); n != 1 {
			e.t.Errorf("the cancelled run has %d goal.updated; want 1 (the set): %s", n, types(evs))
		}
		res, err = e.goal(ctx, r.SessionID, protocol.GoalRequest{Action: protocol.GoalResume})
		e.wantResult("UpdateGoal resume on an idle session", res, err, protocol.ResultAccepted, "", r.SessionID)
		e.wantGoalRun(e.waitRun(r.SessionID, text), text)
	}},
}

// wantGoalRun checks a goal's one continuation run: source goal, the goal
// text as message, seq 2 goal.updated active with turns 1, and the goal
// done before the run's done.
func (e *env) wantGoalRun(s Started, text string) {
	e.t.Helper()
	evs := e.events(s.RunID)
	e.wantRun(s.RunID, evs, protocol.EventDone)
	if st := payload[protocol.RunStartedPayload](e.t, evs[0]); st.Source != "goal" || st.Message != text {
		e.t.Errorf("goal run.started = %+v; want source goal, message %q", st, text)
	}
	if len(evs) < 2 || evs[1].Type != protocol.EventGoalUpdated {
		e.t.Fatalf("goal run: seq 2 is not goal.updated: %s", types(evs))
	}
	if g := payload[protocol.GoalUpdatedPayload](e.t, evs[1]); g.State != protocol.GoalActive || g.Turns != 1 || g.Text != text {
		e.t.Errorf("goal run seq 2 goal.updated = %+v; want active, turns 1", g)
	}
	end := evs[len(evs)-2]
	if g := payload[protocol.GoalUpdatedPayload](e.t, end); end.Type != protocol.EventGoalUpdated || g.State != protocol.GoalDone || g.Reason != "one run made" {
		e.t.Errorf("goal run: before done %s %+v; want goal.updated done", end.Type, g)
	}
}

// wantGoalEvent checks that eventID is a goal.updated of the run with state
// and text.
func (e *env) wantGoalEvent(runID, eventID, state, text string) {
	e.t.Helper()
	if eventID == "" {
		e.t.Fatalf("a goal change with an active run answered no event_id")
	}
	ev := e.waitEvent(runID, func(ev protocol.Envelope) bool { return ev.EventID == eventID })
	g := payload[protocol.GoalUpdatedPayload](e.t, ev)
	if ev.Type != protocol.EventGoalUpdated || g.State != state || g.Text != text {
		e.t.Fatalf("event %s = %s %+v; want goal.updated %s %q", eventID, ev.Type, g, state, text)
	}
}
