package adapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// localOnly marks a context whose controls must not be routed to another
// process (they came from one).
type localOnly struct{}

// LocalOnly returns a context under which controls act only on runs
// executing in this process: a control that arrived from another process
// through Remote is never sent back out.
func LocalOnly(ctx context.Context) context.Context { return context.WithValue(ctx, localOnly{}, true) }

// remote returns the Remote to route a control through, or nil.
func (a *InProcess) remote(ctx context.Context) Remote {
	if ctx.Value(localOnly{}) != nil {
		return nil
	}
	return a.opts.Remote
}

// GetRun implements RuntimeAdapter.
func (a *InProcess) GetRun(ctx context.Context, runID string) (protocol.RunStatus, error) {
	meta, err := a.store.Run(ctx, runID)
	if err != nil {
		return protocol.RunStatus{}, notFound(err, "run "+runID)
	}
	r, err := journal.FoldRun(ctx, a.store, runID, meta.SessionID)
	if err != nil {
		return protocol.RunStatus{}, err
	}
	return r.RunStatus(), nil
}

// CancelRun implements RuntimeAdapter: the run moves to cancelling, its
// executor stops and writes one terminal cancelled event.
func (a *InProcess) CancelRun(ctx context.Context, runID string) (protocol.ControlResult, error) {
	meta, err := a.store.Run(ctx, runID)
	if err != nil {
		return protocol.ControlResult{}, notFound(err, "run "+runID)
	}
	if meta.Terminal {
		return Result(protocol.ResultNotActive, "the run has already ended", runID, meta.SessionID, ""), nil
	}
	a.mu.Lock()
	l := a.live[runID]
	a.mu.Unlock()
	if l == nil && a.remote(ctx) != nil {
		res, owned, err := a.remote(ctx).Control(ctx, runID, RemoteControl{Op: protocol.OpCancel})
		if err != nil || owned {
			return res, err
		}
		if meta.LastSeq > 0 {
			// Started, but its executor is gone: the lease reaper ends it.
			return Result(protocol.ResultNotActive, "the run's executor is gone; it will end as interrupted", runID, meta.SessionID, ""), nil
		}
	}
	if l == nil {
		// Not executing anywhere (e.g. queued and not started): end it directly.
		e := mustEvent(runID, meta.SessionID, protocol.EventCancelled, protocol.CancelledPayload{Reason: "cancelled by user", Partial: false})
		out, err := a.store.Append(ctx, e, runID+"/cancel")
		if errors.Is(err, journal.ErrTerminal) {
			return Result(protocol.ResultNotActive, "the run has already ended", runID, meta.SessionID, ""), nil
		}
		if err != nil {
			return protocol.ControlResult{}, err
		}
		return Result(protocol.ResultAccepted, "cancelled", runID, meta.SessionID, out.EventID), nil
	}
	x := l.x
	x.mu.Lock()
	if x.cancelling {
		x.mu.Unlock()
		return Result(protocol.ResultNotActive, "the run is already being cancelled", runID, meta.SessionID, ""), nil
	}
	x.cancelling = true
	x.mu.Unlock()
	st, err := x.append(ctx, mustEvent(runID, meta.SessionID, protocol.EventStatus, protocol.StatusPayload{Status: protocol.StatusCancelling, Controls: []string{}}))
	if err != nil && !errors.Is(err, journal.ErrTerminal) {
		a.opts.Logger.Warn("cancelling status not journaled", "run_id", runID, "err", err)
	}
	l.cancel(errUserCancel)
	return Result(protocol.ResultAccepted, "cancelling", runID, meta.SessionID, st.EventID), nil
}

// RespondApproval implements RuntimeAdapter.
func (a *InProcess) RespondApproval(ctx context.Context, runID, approvalID, choice string) (protocol.ControlResult, error) {
	return a.respond(ctx, runID, approvalID, choice, true)
}

// RespondClarify implements RuntimeAdapter.
func (a *InProcess) RespondClarify(ctx context.Context, runID, clarifyID, response string) (protocol.ControlResult, error) {
	return a.respond(ctx, runID, clarifyID, response, false)
}

func (a *InProcess) respond(ctx context.Context, runID, promptID, answer string, approval bool) (protocol.ControlResult, error) {
	meta, err := a.store.Run(ctx, runID)
	if err != nil {
		return protocol.ControlResult{}, notFound(err, "run "+runID)
	}
	a.mu.Lock()
	l := a.live[runID]
	a.mu.Unlock()
	if l == nil && !meta.Terminal && a.remote(ctx) != nil {
		op := protocol.OpClarify
		if approval {
			op = protocol.OpApprove
		}
		res, owned, err := a.remote(ctx).Control(ctx, runID, RemoteControl{Op: op, PromptID: promptID, Answer: answer})
		if err != nil || owned {
			return res, err
		}
	}
	if l == nil || meta.Terminal {
		return Result(protocol.ResultNotActive, "the run is not active", runID, meta.SessionID, ""), nil
	}
	slot := &l.x.clarify
	if approval {
		slot = &l.x.approval
	}
	status, err := l.x.respond(slot, promptID, answer)
	if err != nil {
		return protocol.ControlResult{}, err
	}
	msg := map[string]string{protocol.ResultAccepted: "delivered", protocol.ResultNotActive: "no such pending prompt", protocol.ResultExpired: "the prompt has expired"}[status]
	return Result(status, msg, runID, meta.SessionID, ""), nil
}

func notFound(err error, what string) error {
	if errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return err
}
