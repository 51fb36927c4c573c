package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// body is what a run's goroutine runs: the driver's Execute, or its
// Reattach for a run re-attached after a restart.
type body func(ctx context.Context, x *driver.Execution) (*protocol.Usage, error)

// launch starts the executor goroutine running body (nil: drv's Execute);
// false when the executor is closed. A run launched with a cause (a
// re-attached run its user was cancelling) starts cancelled with it.
func (a *InProcess) launch(x *driver.Execution, drv driver.Driver, owner string, run body, cause error) bool {
	if run == nil {
		run = drv.Execute
	}
	ctx, cancel := context.WithCancelCause(a.ctx)
	if cause != nil {
		cancel(cause)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		cancel(nil)
		return false
	}
	a.live[x.RunID] = &live{x: x, drv: drv, owner: owner, cancel: cancel}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		defer cancel(nil)
		cont := a.execute(ctx, x, drv, run)
		a.mu.Lock()
		delete(a.live, x.RunID)
		a.mu.Unlock()
		a.release(x.RunID)
		a.afterRun(x.SessionID, cont)
	}()
	return true
}

// execute runs the driver and writes the run's one terminal event; it
// reports whether the session's goal wants another run.
func (a *InProcess) execute(ctx context.Context, x *driver.Execution, drv driver.Driver, run body) (cont bool) {
	usage, err := a.safeExecute(ctx, x, run)
	// Text a stream held back (a word not finished) goes out first. The
	// flush and the terminal append must happen even though ctx is
	// cancelled.
	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if ferr := x.Flush(fctx); ferr != nil && err == nil {
		err = ferr
	}
	fcancel()
	// A run that succeeded is a turn of the session's goal: its judge
	// answers before the run ends (a cancel meanwhile ends the run
	// cancelled and the verdict is dropped).
	var turn *judged
	if err == nil && ctx.Err() == nil {
		turn = a.judgeTurn(ctx, x)
	}
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var typ protocol.EventType
	var payload any
	var runtimeCancel *driver.Cancelled
	cause := context.Cause(ctx)
	detached := errors.Is(cause, driver.ErrDetached)
	switch {
	case detached && err != nil:
		// Close left the run to the next process (Options.Detach): its
		// upstream work goes on, and Recover re-attaches it.
		a.opts.Logger.Info("left the run executing upstream; the next start re-attaches it", "run_id", x.RunID)
		return false
	case errors.Is(err, journal.ErrTerminal):
		// The journal refused the run's events because the run has
		// ended: another process ended it (its lease lapsed while this
		// one was cut off from Redis or stalled, and a reaper journaled
		// interrupted). The run stops here; a terminal event of ours
		// would be refused too.
		a.opts.Logger.Warn("run ended elsewhere: the journal refused its events; stopped it here", "run_id", x.RunID)
		return false
	case errors.Is(cause, errUserCancel):
		typ, payload = protocol.EventCancelled, protocol.CancelledPayload{Reason: "cancelled by user", Partial: x.Streamed()}
	case ctx.Err() != nil && !detached:
		// An append cut short by the stop may still have been journaled:
		// the journal, not x, knows the last seq.
		last := x.LastSeq()
		if meta, err := a.store.Run(tctx, x.RunID); err == nil && meta.LastSeq > last {
			last = meta.LastSeq
		}
		typ, payload = protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted,
			Message: "the executor stopped while the run was active", Terminal: true, LastSeq: last}
	case errors.As(err, &runtimeCancel):
		typ, payload = protocol.EventCancelled, protocol.CancelledPayload{Reason: journal.RedactString(runtimeCancel.Reason), Partial: x.Streamed()}
	case err == nil:
		cont = a.postTurn(tctx, x, turn)
		result, truncated := x.Result()
		last := x.LastSeq()
		if meta, err := a.store.Run(tctx, x.RunID); err == nil && meta.LastSeq > last {
			last = meta.LastSeq // events journaled beside the driver's (goal.updated, approval.resolved)
		}
		typ, payload = protocol.EventDone, protocol.DonePayload{Status: string(protocol.StatusCompleted), Usage: usage,
			Result: result, Truncated: truncated, LastSeq: last}
	case journal.Unavailable(err):
		// The journal refused the run's events for longer than
		// AppendRetry (Redis away, a failover whose new master lacks the
		// replicas WAIT wants): the run could not go on, through no fault
		// of its own. It is interrupted, like a run whose executor stopped.
		a.opts.Logger.Warn("run stopped: the journal was unavailable", "run_id", x.RunID, "err", journal.RedactString(err.Error()))
		last := x.LastSeq()
		if meta, err := a.store.Run(tctx, x.RunID); err == nil && meta.LastSeq > last {
			last = meta.LastSeq
		}
		typ, payload = protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted,
			Message: "the journal was unavailable for longer than the run could wait", Terminal: true, LastSeq: last}
	default:
		var de *driver.Error
		if !errors.As(err, &de) {
			a.opts.Logger.Error("run failed", "run_id", x.RunID, "session_id", x.SessionID, "err", journal.RedactString(err.Error()))
			de = &driver.Error{Code: protocol.ErrorInternal, Message: "the runtime failed"}
		}
		typ, payload = protocol.EventError, protocol.ErrorPayload{Code: de.Code, Message: journal.RedactString(de.Message), Terminal: true}
	}
	e := mustEvent(x.RunID, x.SessionID, typ, payload)
	if _, err := x.Append(tctx, e); err != nil && !errors.Is(err, journal.ErrTerminal) {
		a.opts.Logger.Error("terminal event not journaled; retrying until the journal takes it", "run_id", x.RunID, "err", err)
		if driver.Transient(err) {
			a.retryTerminal(x, e)
		}
	}
	return cont
}

// retryTerminal journals a run's terminal event that the journal refused
// (a full disk, Redis away for longer than the append retry): the run
// stays executing here, its cancel answered as before, and the terminal
// is tried again (pauses from 1 s doubling to 10 s) until it lands, the
// journal says the run has ended or refuses it for good, or the executor
// closes (the run is then left to Recover or the reaper, which end it as
// interrupted). Without it a run outlived its failure as "running" in the
// journal until the next restart.
func (a *InProcess) retryTerminal(x *driver.Execution, e protocol.Envelope) {
	for attempt := 1; ; attempt++ {
		pause := time.NewTimer(min(time.Second<<min(attempt-1, 4), 10*time.Second))
		select {
		case <-a.ctx.Done():
			pause.Stop()
			a.opts.Logger.Warn("terminal event still not journaled at close; the run is ended as interrupted on recovery", "run_id", x.RunID)
			return
		case <-pause.C:
		}
		ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
		_, err := x.Append(ctx, e)
		cancel()
		switch {
		case err == nil:
			a.opts.Logger.Info("terminal event journaled after the journal recovered", "run_id", x.RunID, "attempts", attempt+1)
			return
		case errors.Is(err, journal.ErrTerminal), !driver.Transient(err):
			return
		}
	}
}

// afterRun continues a session whose run has ended: its next queued message
// first, else the goal's next run when the evaluation asked for one.
func (a *InProcess) afterRun(sid string, cont bool) {
	if a.refusing() {
		return // what is queued waits for the next process (StopStarting)
	}
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	if a.drain(ctx, sid) || !cont {
		return
	}
	a.startGoalRun(ctx, sid)
}

func (a *InProcess) safeExecute(ctx context.Context, x *driver.Execution, run body) (u *protocol.Usage, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.opts.Logger.Error("driver panicked", "run_id", x.RunID, "panic", fmt.Sprint(r))
			err = &driver.Error{Code: protocol.ErrorInternal, Message: "the runtime failed"}
		}
	}()
	return run(ctx, x)
}
