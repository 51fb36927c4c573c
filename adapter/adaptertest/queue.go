package adaptertest

import (
	"fmt"

	"github.com/runhub/runhub/protocol"
)

var queueTests = []subtest{
	{"WhileRunningThenDrained", func(e *env) {
		r := e.startReady("", ScriptApproval)
		ctx, cancel := e.ctx()
		defer cancel()
		q := func(msg, key string) (protocol.ControlResult, error) {
			return e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: msg}, key)
		}
		res, err := q("done first", "k1")
		e.wantResult("QueueMessage while a run is active", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantMessage(res, "queued")
		e.wantQueueEvent(r.RunID, res.EventID, "done first")
		res, err = q("done first", "k1")
		e.wantResult("QueueMessage with a repeated key", res, err, protocol.ResultNotActive, "", r.SessionID)
		e.wantMessage(res, "duplicate request: already queued")
		res, err = q("done second", "k2")
		e.wantResult("a second QueueMessage", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantQueueEvent(r.RunID, res.EventID, "done first", "done second") // the repeat was not enqueued

		id := approval.id(e, e.waitEvent(r.RunID, ofType(protocol.EventApprovalReq)))
		out, err := e.approve(ctx, r.RunID, id, "allow")
		e.wantResult("RespondApproval", out, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantRun(r.RunID, e.events(r.RunID), protocol.EventDone)
		// The queue drains in order, each run from the queue beginning
		// run.started, queue.updated (what is left behind it).
		for i, msg := range []string{"done first", "done second"} {
			s := e.waitRun(r.SessionID, msg)
			evs := e.events(s.RunID)
			e.wantRun(s.RunID, evs, protocol.EventDone)
			e.wantFromQueue(evs, msg, []string{"done second"}[:1-i]...)
		}
	}},
	{"IdleStarts", func(e *env) {
		first := e.start("", "done")
		e.events(first.RunID)
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.queue(ctx, first.SessionID, protocol.QueueRequest{Message: "done queued", Mode: protocol.ModeQueue}, "k1")
		e.wantResult("QueueMessage on an idle session", res, err, protocol.ResultAccepted, "-", first.SessionID)
		e.wantMessage(res, "started")
		if res.RunID == "" || res.RunID == first.RunID {
			e.t.Fatalf("QueueMessage on an idle session = %+v; want a new run", res)
		}
		cursor := protocol.EventID(res.RunID, 1)
		if e.h.Dispatched {
			cursor = protocol.EventID(res.RunID, 0)
		}
		if res.EventID != cursor {
			e.t.Errorf("QueueMessage that started a run: event_id %q; want %q", res.EventID, cursor)
		}
		evs := e.events(res.RunID)
		e.wantRun(res.RunID, evs, protocol.EventDone)
		e.wantFromQueue(evs, "done queued")
		res, err = e.queue(ctx, first.SessionID, protocol.QueueRequest{Message: "done queued"}, "k1")
		e.wantResult("QueueMessage with a repeated key", res, err, protocol.ResultNotActive, "", first.SessionID)
	}},
	{"InheritsTheRuntime", func(e *env) {
		// A queued run is the next turn of the session: it runs on the
		// latest run's driver with its model and toolsets, not the
		// default's.
		first := e.startReq(protocol.StartRunRequest{Message: "done", Provider: DriverNameNoSteer, Model: "m-switched", Toolsets: []string{"web"}})
		e.wantRun(first.RunID, e.events(first.RunID), protocol.EventDone)
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.queue(ctx, first.SessionID, protocol.QueueRequest{Message: "done queued"}, "")
		e.wantResult("QueueMessage on an idle session", res, err, protocol.ResultAccepted, "-", first.SessionID)
		evs := e.events(res.RunID)
		e.wantRun(res.RunID, evs, protocol.EventDone)
		started, ok := find(evs, ofType(protocol.EventRunStarted))
		if !ok {
			e.t.Fatalf("the queued run has no run.started: %s", types(evs))
		}
		p := payload[protocol.RunStartedPayload](e.t, started)
		if p.Provider != DriverNameNoSteer || p.Model != "m-switched" || fmt.Sprint(p.Toolsets) != "[web]" || p.Source != "queue" {
			e.t.Errorf("the queued run started %+v; want provider %s, model m-switched, toolsets [web], source queue", p, DriverNameNoSteer)
		}
	}},
	{"Full", func(e *env) {
		r := e.startReady("", ScriptBlock)
		ctx, cancel := e.ctx()
		defer cancel()
		const maxQueue = 50 // executor.Options.MaxQueue's default
		for i := range maxQueue {
			res, err := e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: fmt.Sprintf("done %d", i)}, "")
			e.wantResult("QueueMessage below the bound", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		}
		res, err := e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: "done over"}, "")
		e.wantResult("QueueMessage on a full queue", res, err, protocol.ResultConflict, "", r.SessionID)
		e.wantMessage(res, "the session's queue is full")
		e.cancelAndEnd(r.RunID)
	}},
	{"UnknownSession", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		_, err := e.queue(ctx, "s_missing", protocol.QueueRequest{Message: "done"}, "")
		e.wantNotFound("QueueMessage to an unknown session", err)
	}},
}

// wantQueueEvent checks that eventID is a queue.updated of the run listing
// previews.
func (e *env) wantQueueEvent(runID, eventID string, previews ...string) {
	e.t.Helper()
	ev := e.waitEvent(runID, func(ev protocol.Envelope) bool { return ev.EventID == eventID })
	if ev.Type != protocol.EventQueueUpdated {
		e.t.Fatalf("event %s is %s; want queue.updated", eventID, ev.Type)
	}
	e.wantQueue(payload[protocol.QueueUpdatedPayload](e.t, ev), previews)
}

func (e *env) wantQueue(q protocol.QueueUpdatedPayload, previews []string) {
	e.t.Helper()
	ok := q.Depth == len(previews) && len(q.Items) == len(previews)
	for i := 0; ok && i < len(previews); i++ {
		ok = q.Items[i].Preview == previews[i] && q.Items[i].ID != ""
	}
	if !ok {
		e.t.Fatalf("queue.updated = %+v; want the previews %q", q, previews)
	}
}

// wantFromQueue checks a run of a queued message: run.started with source
// queue and the message, then queue.updated with what is left.
func (e *env) wantFromQueue(evs []protocol.Envelope, message string, left ...string) {
	e.t.Helper()
	st := payload[protocol.RunStartedPayload](e.t, evs[0])
	if st.Source != "queue" || st.Message != message {
		e.t.Fatalf("run.started = %+v; want source queue, message %q", st, message)
	}
	if len(evs) < 2 || evs[1].Type != protocol.EventQueueUpdated {
		e.t.Fatalf("a run from the queue: seq 2 is not queue.updated: %s", types(evs))
	}
	e.wantQueue(payload[protocol.QueueUpdatedPayload](e.t, evs[1]), left)
}

var steerTests = []subtest{
	{"Delivered", func(e *env) {
		r := e.startReady("", ScriptBlock)
		ctx, cancel := e.ctx()
		defer cancel()
		steer := func(text, key string) (protocol.ControlResult, error) {
			return e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: text, Mode: protocol.ModeSteer}, key)
		}
		res, err := steer("left", "s1")
		e.wantResult("steer", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantMessage(res, "delivered")
		ev := e.waitEvent(r.RunID, func(ev protocol.Envelope) bool { return ev.EventID == res.EventID })
		if p := payload[protocol.ProgressPayload](e.t, ev); ev.Type != protocol.EventProgress || p.Steer != "left" {
			e.t.Fatalf("steer event_id %s is %s %+v; want progress with steer %q", res.EventID, ev.Type, p, "left")
		}
		e.waitEvent(r.RunID, func(ev protocol.Envelope) bool { return progressText(ev) == "steered: left" })
		res, err = steer("left", "s1")
		e.wantResult("steer with a repeated key", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
		e.wantMessage(res, "duplicate request: already delivered")
		evs := e.cancelAndEnd(r.RunID)
		if n := count(evs, func(ev protocol.Envelope) bool { return progressText(ev) == "steered: left" }); n != 1 {
			e.t.Errorf("the driver got the steer %d times; want 1: %s", n, types(evs))
		}
		res, err = steer("right", "s2")
		e.wantResult("steer on an idle session", res, err, protocol.ResultNotActive, "", r.SessionID)
		e.wantMessage(res, "no active run to steer")
	}},
	{"Unsupported", func(e *env) {
		r := e.startReq(protocol.StartRunRequest{Message: ScriptBlock, Provider: DriverNameNoSteer})
		e.waitEvent(r.RunID, isReady)
		ctx, cancel := e.ctx()
		defer cancel()
		// A steer that was not delivered does not use up its key: the
		// same request gets the same answer.
		for range 2 {
			res, err := e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: "left", Mode: protocol.ModeSteer}, "s1")
			e.wantResult("steer a driver that cannot steer", res, err, protocol.ResultUnsupported, r.RunID, r.SessionID)
		}
		e.cancelAndEnd(r.RunID)
	}},
	{"BufferFull", func(e *env) {
		r := e.startReady("", ScriptDeaf)
		ctx, cancel := e.ctx()
		defer cancel()
		const buffer = 16 // the steer buffer of an execution
		for i := range buffer {
			res, err := e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: fmt.Sprint(i), Mode: protocol.ModeSteer}, "")
			e.wantResult("steer within the buffer", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		}
		for range 2 { // not delivered: its key is not used up
			res, err := e.queue(ctx, r.SessionID, protocol.QueueRequest{Message: "over", Mode: protocol.ModeSteer}, "s-over")
			e.wantResult("steer past the buffer", res, err, protocol.ResultConflict, r.RunID, r.SessionID)
			e.wantMessage(res, "the run has too much guidance waiting")
		}
		e.cancelAndEnd(r.RunID)
	}},
}
