package adaptertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/protocol"
)

var startTests = []subtest{
	{"NewSession", func(e *env) {
		r := e.start("", "done first")
		if r.RunID == "" || r.SessionID == "" || r.StreamID != r.RunID {
			e.t.Fatalf("StartRun = %+v; want run, session and stream ids (stream = run)", r)
		}
		e.wantStarted(r)
		evs := e.events(r.RunID)
		e.wantRun(r.RunID, evs, protocol.EventDone)
		st := payload[protocol.RunStartedPayload](e.t, evs[0])
		if st.Message != "done first" || st.Source != "user" || evs[0].SessionID != r.SessionID {
			e.t.Errorf("run.started = %+v in session %s; want message %q, source user, session %s", st, evs[0].SessionID, "done first", r.SessionID)
		}
		done := evs[len(evs)-1]
		d := payload[protocol.DonePayload](e.t, done)
		if d.Status != string(protocol.StatusCompleted) {
			e.t.Errorf("done status %q; want completed", d.Status)
		}
		// done carries the final assistant text and the seq before it;
		// GetRun shows the same result (the driver speaks one message).
		var answer string
		for _, ev := range evs {
			if ev.Type == protocol.EventTokenDelta {
				answer += payload[protocol.TokenDeltaPayload](e.t, ev).Text
			}
		}
		if answer == "" || d.Result != answer || d.Truncated || d.LastSeq != done.Seq-1 {
			e.t.Errorf("done result %q (truncated %v, last_seq %d, seq %d); want %q, last_seq %d", d.Result, d.Truncated, d.LastSeq, done.Seq, answer, done.Seq-1)
		}
		ctx, cancel := e.ctx()
		defer cancel()
		if st, err := e.a.GetRun(ctx, r.RunID); err != nil || st.Result != answer || st.Error != nil {
			e.t.Errorf("GetRun of a completed run = %+v, %v; want result %q, no error", st, err, answer)
		}
	}},
	{"ExistingSession", func(e *env) {
		first := e.start("", "done one")
		e.events(first.RunID)
		second := e.start(first.SessionID, "done two")
		if second.SessionID != first.SessionID || second.RunID == first.RunID {
			e.t.Fatalf("second start = %+v; want a new run in session %s", second, first.SessionID)
		}
		e.wantRun(second.RunID, e.events(second.RunID), protocol.EventDone)
	}},
	{"ConflictWhileActive", func(e *env) {
		r := e.startReady("", "block")
		ctx, cancel := e.ctx()
		defer cancel()
		if _, err := e.a.StartRun(ctx, Owner, protocol.StartRunRequest{SessionID: r.SessionID, Message: "done"}); !errors.Is(err, adapter.ErrConflict) {
			e.t.Fatalf("StartRun in a session with an active run: %v; want adapter.ErrConflict", err)
		}
		e.cancelAndEnd(r.RunID)
		next := e.start(r.SessionID, "done after")
		e.wantRun(next.RunID, e.events(next.RunID), protocol.EventDone)
	}},
	{"BadRequest", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		_, err := e.a.StartRun(ctx, Owner, protocol.StartRunRequest{Message: "no-such-script"})
		e.wantCode("StartRun with a message the driver refuses", err, protocol.CodeBadRequest)
		_, err = e.a.StartRun(ctx, Owner, protocol.StartRunRequest{Message: "done", Provider: "no-such-driver"})
		e.wantCode("StartRun with an unknown provider", err, protocol.CodeBadRequest)
		_, err = e.a.StartRun(ctx, Owner, protocol.StartRunRequest{SessionID: "s_missing", Message: "done"})
		e.wantNotFound("StartRun in an unknown session", err)
		r := e.start("", "done")
		e.events(r.RunID)
		_, err = e.a.StartRun(ctx, Stranger, protocol.StartRunRequest{SessionID: r.SessionID, Message: "done"})
		e.wantNotFound("StartRun in another owner's session", err)
	}},
	{"DriverFailure", func(e *env) {
		r := e.start("", "fail")
		evs := e.events(r.RunID)
		e.wantRun(r.RunID, evs, protocol.EventError)
		if p := payload[protocol.ErrorPayload](e.t, evs[len(evs)-1]); p.Code != protocol.ErrorProviderError || !p.Terminal {
			e.t.Errorf("terminal error = %+v; want provider_error, terminal", p)
		}
	}},
}

// wantStarted checks a start's status and cursor: running with the
// run.started cursor, or queued with the cursor before it when dispatched.
func (e *env) wantStarted(r protocol.RunStartResult) {
	e.t.Helper()
	status, cursor := protocol.StatusRunning, protocol.EventID(r.RunID, 1)
	if e.h.Dispatched {
		status, cursor = protocol.StatusQueued, protocol.EventID(r.RunID, 0)
	}
	if r.Status != status || r.Cursor != cursor || !slices.Contains(r.ActiveControls, protocol.OpCancel) {
		e.t.Errorf("StartRun = %+v; want status %s, cursor %s, controls with cancel", r, status, cursor)
	}
}

var getTests = []subtest{
	{"RunningAndEnded", func(e *env) {
		r := e.startReady("", "block")
		ctx, cancel := e.ctx()
		defer cancel()
		st, err := e.a.GetRun(ctx, r.RunID)
		if err != nil || st.RunID != r.RunID || st.SessionID != r.SessionID || st.Status != protocol.StatusRunning ||
			st.Terminal || !slices.Contains(st.ActiveControls, protocol.OpCancel) {
			e.t.Fatalf("GetRun while running = %+v, %v; want running with cancel", st, err)
		}
		evs := e.cancelAndEnd(r.RunID)
		st, err = e.a.GetRun(ctx, r.RunID)
		last := evs[len(evs)-1]
		if err != nil || !st.Terminal || st.TerminalState != protocol.StatusCancelled || st.Status != protocol.StatusCancelled ||
			st.LastSeq != last.Seq || st.LastEventID != last.EventID || len(st.ActiveControls) != 0 {
			e.t.Fatalf("GetRun after the end = %+v, %v; want cancelled, terminal, last seq %d", st, err, last.Seq)
		}
	}},
	{"Completed", func(e *env) {
		r := e.start("", "done")
		evs := e.events(r.RunID)
		ctx, cancel := e.ctx()
		defer cancel()
		st, err := e.a.GetRun(ctx, r.RunID)
		if err != nil || !st.Terminal || st.TerminalState != protocol.StatusCompleted || st.LastSeq != uint64(len(evs)) {
			e.t.Fatalf("GetRun = %+v, %v; want completed at seq %d", st, err, len(evs))
		}
	}},
	{"UnknownRun", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		_, err := e.a.GetRun(ctx, "r_missing")
		e.wantNotFound("GetRun of an unknown run", err)
	}},
}

var observeTests = []subtest{
	{"ReplayAndCursor", func(e *env) {
		r := e.start("", "done")
		evs := e.events(r.RunID)
		e.wantRun(r.RunID, evs, protocol.EventDone)
		for k := range uint64(len(evs)) + 1 {
			got := e.observe(r.RunID, k)
			if !sameEvents(got, evs[k:]) {
				e.t.Fatalf("ObserveRun from %d = %s; want %s", k, types(got), types(evs[k:]))
			}
		}
	}},
	{"LiveThenTerminal", func(e *env) {
		r := e.startReady("", "block")
		// Observers attached mid-run (from 0, and from just before the
		// ready event) get the rest live and end after the one terminal.
		ready := e.waitEvent(r.RunID, isReady)
		var wg sync.WaitGroup
		attached := make(chan struct{}, 2)
		froms := []uint64{0, ready.Seq - 1}
		got := make([][]protocol.Envelope, len(froms))
		for i, from := range froms {
			wg.Go(func() { got[i] = e.observeLive(r.RunID, from, attached) })
		}
		for range froms {
			select {
			case <-attached:
			case <-time.After(waitFor):
				e.t.Fatal("observers did not replay the ready event")
			}
		}
		evs := e.cancelAndEnd(r.RunID)
		wg.Wait()
		e.wantRun(r.RunID, evs, protocol.EventCancelled)
		for i, from := range froms {
			if !sameEvents(got[i], evs[from:]) {
				e.t.Fatalf("live observer from %d saw %s; want %s", from, types(got[i]), types(evs[from:]))
			}
		}
	}},
	{"ContextEnds", func(e *env) {
		r := e.startReady("", ScriptBlock)
		ctx, cancel := e.ctx()
		var errs []error
		n := 0
		for _, err := range e.a.ObserveRun(ctx, r.RunID, 0) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if n++; n == 2 { // run.started, ready: then the observer leaves
				cancel()
			}
		}
		cancel()
		if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			e.t.Errorf("ObserveRun after its context ended yielded %v; want one context.Canceled", errs)
		}
		e.cancelAndEnd(r.RunID)
	}},
	{"UnknownRun", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		var errs []error
		for ev, err := range e.a.ObserveRun(ctx, "r_missing", 0) {
			if err == nil {
				e.t.Fatalf("ObserveRun of an unknown run yielded %s", ev.Type)
			}
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], adapter.ErrNotFound) {
			e.t.Errorf("ObserveRun of an unknown run yielded %v; want one adapter.ErrNotFound", errs)
		}
	}},
}

// observeLive is observe for use off the test goroutine: it reports
// problems with Errorf, and signals attached once it has yielded the ready
// event (it is subscribed by then).
func (e *env) observeLive(runID string, afterSeq uint64, attached chan<- struct{}) []protocol.Envelope {
	ctx, cancel := e.ctx()
	defer cancel()
	var out []protocol.Envelope
	for ev, err := range e.a.ObserveRun(ctx, runID, afterSeq) {
		if err != nil {
			e.t.Errorf("ObserveRun(%s, %d): %v", runID, afterSeq, err)
			break
		}
		out = append(out, ev)
		if isReady(ev) {
			attached <- struct{}{}
		}
	}
	return out
}

func sameEvents(a, b []protocol.Envelope) bool {
	return slices.EqualFunc(a, b, func(x, y protocol.Envelope) bool {
		return x.EventID == y.EventID && x.Seq == y.Seq && x.Type == y.Type && x.Terminal == y.Terminal
	})
}

var cancelTests = []subtest{
	{"Active", func(e *env) {
		r := e.startReady("", "block")
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.a.CancelRun(ctx, r.RunID)
		e.wantResult("CancelRun of an active run", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantMessage(res, "cancelling")
		evs := e.events(r.RunID)
		e.wantRun(r.RunID, evs, protocol.EventCancelled)
		st, ok := find(evs, func(ev protocol.Envelope) bool { return ev.EventID == res.EventID })
		if !ok || st.Type != protocol.EventStatus || payload[protocol.StatusPayload](e.t, st).Status != protocol.StatusCancelling {
			e.t.Errorf("CancelRun event_id %q is not the run's status cancelling event: %s", res.EventID, types(evs))
		}
		if p := payload[protocol.CancelledPayload](e.t, evs[len(evs)-1]); p.Reason != "cancelled by user" {
			e.t.Errorf("cancelled = %+v; want reason %q", p, "cancelled by user")
		}
		res, err = e.a.CancelRun(ctx, r.RunID)
		e.wantResult("CancelRun after the end", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
		e.wantMessage(res, "the run has already ended")
	}},
	{"Twice", func(e *env) {
		r := e.startReady("", "block")
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.a.CancelRun(ctx, r.RunID)
		e.wantResult("first CancelRun", res, err, protocol.ResultAccepted, r.RunID, r.SessionID)
		e.wantMessage(res, "cancelling")
		res, err = e.a.CancelRun(ctx, r.RunID)
		e.wantResult("second CancelRun", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
		evs := e.events(r.RunID)
		e.wantRun(r.RunID, evs, protocol.EventCancelled)
	}},
	{"Concurrent", func(e *env) {
		r := e.startReady("", "block")
		const n = 4
		results := make([]protocol.ControlResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ctx, cancel := e.ctx()
				defer cancel()
				results[i], errs[i] = e.a.CancelRun(ctx, r.RunID)
			})
		}
		wg.Wait()
		accepted := 0
		for i, res := range results {
			if errs[i] != nil {
				e.t.Fatalf("CancelRun %d: %v", i, errs[i])
			}
			if res.Accepted {
				accepted++
			} else if res.Status != protocol.ResultNotActive {
				e.t.Errorf("CancelRun %d = %+v; want accepted or not-active", i, res)
			}
		}
		if accepted != 1 {
			e.t.Errorf("%d of %d concurrent cancels accepted; want 1: %+v", accepted, n, results)
		}
		evs := e.events(r.RunID)
		e.wantRun(r.RunID, evs, protocol.EventCancelled)
		if c := count(evs, ofType(protocol.EventCancelled)); c != 1 {
			e.t.Errorf("%d cancelled events; want 1", c)
		}
	}},
	{"Ended", func(e *env) {
		r := e.start("", "done")
		e.events(r.RunID)
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.a.CancelRun(ctx, r.RunID)
		e.wantResult("CancelRun of a completed run", res, err, protocol.ResultNotActive, r.RunID, r.SessionID)
		e.wantMessage(res, "the run has already ended")
		if evs := e.events(r.RunID); evs[len(evs)-1].Type != protocol.EventDone {
			e.t.Errorf("a cancel after the end changed the run: %s", types(evs))
		}
	}},
	{"UnknownRun", func(e *env) {
		ctx, cancel := e.ctx()
		defer cancel()
		_, err := e.a.CancelRun(ctx, "r_missing")
		e.wantNotFound("CancelRun of an unknown run", err)
	}},
}
