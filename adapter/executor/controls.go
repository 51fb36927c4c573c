package executor

import (
	"cmp"
	"context"
	"errors"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var _ adapter.Local = (*InProcess)(nil)

// Control implements adapter.Local; it is the one place that tells the
// ops apart. A control of a session (start, queue, goal) is executed here.
// A control of a run is delivered when the run executes in this process;
// executing is false, having done nothing, when it does not. It reads no
// run meta: run is the caller's (for a steer, only ID and SessionID are
// used), and the caller answers a run that has ended (adapter.Unowned). A
// control that came from another process reaches the executor here, so it
// is never sent back out.
func (a *InProcess) Control(ctx context.Context, run journal.RunMeta, c adapter.Control) (protocol.ControlResult, bool, error) {
	switch c.Op {
	case protocol.OpStart:
		res, err := a.startControl(ctx, c)
		return res, true, err
	case protocol.OpQueue:
		if c.Steers() {
			return a.onRun(run, c, func(l *live) (protocol.ControlResult, error) { return a.steer(ctx, l, run, c.Message) })
		}
		if res, no := a.unsupportedInSession(ctx, c); no {
			return res, true, nil
		}
		res, err := a.enqueue(ctx, c.Owner, c.SessionID, c.Message, c.Key)
		return res, true, err
	case protocol.OpGoal:
		if res, no := a.unsupportedInSession(ctx, c); no {
			return res, true, nil
		}
		res, err := a.updateGoal(ctx, c.Owner, c.SessionID, protocol.GoalRequest{Action: c.Action, Text: c.Text})
		return res, true, err
	case protocol.OpCancel:
		return a.onRun(run, c, func(l *live) (protocol.ControlResult, error) { return a.cancelRun(ctx, l, run) })
	case protocol.OpApprove:
		return a.onRun(run, c, func(l *live) (protocol.ControlResult, error) {
			return a.respond(l, run, c.ApprovalID, c.Choice, true)
		})
	case protocol.OpClarify:
		return a.onRun(run, c, func(l *live) (protocol.ControlResult, error) {
			return a.respond(l, run, c.ClarifyID, c.Response, false)
		})
	}
	return adapter.Result(protocol.ResultUnsupported, "unknown op", c.RunID, c.SessionID, ""), true, nil
}

// onRun calls fn with run when it executes here; executing is false, and
// fn is not called, when it does not. A control the run's driver cannot
// do is answered unsupported without calling fn: what it can do is
// resolved now, not at the run's start, as a runtime may say so during
// the run (an exec command's hello line, a Hermes server's refreshed
// /v1/capabilities).
func (a *InProcess) onRun(run journal.RunMeta, c adapter.Control, fn func(*live) (protocol.ControlResult, error)) (res protocol.ControlResult, executing bool, err error) {
	a.mu.Lock()
	l := a.live[run.ID]
	a.mu.Unlock()
	if l == nil {
		return protocol.ControlResult{}, false, nil
	}
	if caps, need := a.capsOf(l.x.Request), c.Capability(); caps.Lacks(need) {
		return caps.Unsupported(need, run.ID, run.SessionID), true, nil
	}
	res, err = fn(l)
	return res, true, err
}

// capsOf resolves what a run of req can do: its profile's driver, else
// its provider's (the default driver's when it names none).
func (a *InProcess) capsOf(req protocol.StartRunRequest) adapter.Capable {
	if req.Profile != "" {
		return a.opts.Capabilities.Resolve(req.Profile, "")
	}
	return a.opts.Capabilities.Resolve("", cmp.Or(req.Provider, a.opts.DefaultDriver))
}

// unsupportedInSession answers a control of a session (queue, goal) that
// the driver of the session's next run cannot do: the latest run's
// profile, which follow-up runs inherit, else a start's default. It reads
// the session's meta and its latest run's, and only with Capabilities
// set; a session that is not the caller's, or a read that fails, is left
// to the control's own path to answer.
func (a *InProcess) unsupportedInSession(ctx context.Context, c adapter.Control) (protocol.ControlResult, bool) {
	need := c.Capability()
	if a.opts.Capabilities == nil || need == "" {
		return protocol.ControlResult{}, false
	}
	meta, err := a.store.Session(ctx, c.SessionID)
	if err != nil || meta.Owner != c.Owner {
		return protocol.ControlResult{}, false
	}
	req := a.latestRequest(ctx, meta)
	if req.Profile == "" && req.Provider == "" {
		req.Profile = a.opts.DefaultProfile
	}
	if caps := a.capsOf(req); caps.Lacks(need) {
		return caps.Unsupported(need, "", c.SessionID), true
	}
	return protocol.ControlResult{}, false
}

// startControl starts a run for a start control; a session with an active
// run answers conflict, a start its driver cannot do (attachments)
// unsupported.
func (a *InProcess) startControl(ctx context.Context, c adapter.Control) (protocol.ControlResult, error) {
	r, err := a.StartRun(ctx, c.Owner, c.StartRequest())
	var pe *protocol.Error
	switch {
	case errors.Is(err, adapter.ErrConflict):
		return adapter.Result(protocol.ResultConflict, "the session already has an active run", "", c.SessionID, ""), nil
	case errors.As(err, &pe) && pe.Code == protocol.CodeUnsupported:
		return adapter.Result(protocol.ResultUnsupported, pe.Message, "", c.SessionID, ""), nil
	case err != nil:
		return protocol.ControlResult{}, err
	}
	return protocol.ControlResult{Accepted: true, Status: protocol.ResultAccepted, EventID: r.Cursor,
		RunID: r.RunID, SessionID: r.SessionID, Message: "started"}, nil
}

// cancelRun moves the run to cancelling; its executor stops and writes one
// terminal cancelled event.
func (a *InProcess) cancelRun(ctx context.Context, l *live, run journal.RunMeta) (protocol.ControlResult, error) {
	x := l.x
	if !x.BeginCancel() {
		return adapter.Result(protocol.ResultNotActive, "the run is already being cancelled", run.ID, run.SessionID, ""), nil
	}
	st, err := x.Append(ctx, mustEvent(run.ID, run.SessionID, protocol.EventStatus, protocol.StatusPayload{Status: protocol.StatusCancelling, Controls: []string{}}))
	if err != nil && !errors.Is(err, journal.ErrTerminal) {
		a.opts.Logger.Warn("cancelling status not journaled", "run_id", run.ID, "err", err)
	}
	l.cancel(errUserCancel)
	return adapter.Result(protocol.ResultAccepted, "cancelling", run.ID, run.SessionID, st.EventID), nil
}

// respond delivers an answer to the run's pending approval or clarify.
func (a *InProcess) respond(l *live, run journal.RunMeta, promptID, answer string, approval bool) (protocol.ControlResult, error) {
	status, err := l.x.Resolve(approval, promptID, answer)
	if err != nil {
		return protocol.ControlResult{}, err
	}
	msg := map[string]string{protocol.ResultAccepted: "delivered", protocol.ResultNotActive: "no such pending prompt", protocol.ResultExpired: "the prompt has expired"}[status]
	return adapter.Result(status, msg, run.ID, run.SessionID, ""), nil
}

// steer hands guidance to the run's driver when it steers. Its
// idempotency key is the Router's: the executor delivers what reaches it.
func (a *InProcess) steer(ctx context.Context, l *live, run journal.RunMeta, text string) (protocol.ControlResult, error) {
	if s, ok := l.drv.(driver.Steerer); !ok || !s.Steers() {
		return adapter.Result(protocol.ResultUnsupported, "this runtime cannot be steered", run.ID, run.SessionID, ""), nil
	}
	// The guidance is the user's word in the run: journal it, so every tab
	// shows it in the transcript, now and after a reload; before the
	// driver has it, so that it precedes what the runtime answers (its
	// terminal event included).
	var e protocol.Envelope
	if !l.x.Steer(text, func() {
		var err error
		if e, err = l.x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: "guidance: " + text, Steer: text}); err != nil {
			a.opts.Logger.Warn("could not journal the steer message", "run_id", run.ID, "err", journal.RedactString(err.Error()))
		}
	}) {
		return adapter.Result(protocol.ResultConflict, "the run has too much guidance waiting", run.ID, run.SessionID, ""), nil
	}
	return adapter.Result(protocol.ResultAccepted, "delivered", run.ID, run.SessionID, e.EventID), nil
}
