package executor

import (
	"context"
	"errors"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var _ adapter.Local = (*InProcess)(nil)

// Control implements adapter.Local: it delivers c to the run when the run
// executes in this process, and reports executing false, having done
// nothing, when it does not. It reads no meta: run is the caller's (for a
// steer, only ID and SessionID are used), and the caller answers a run that
// has ended (adapter.Unowned). A control that came from another process
// reaches the executor here, so it is never sent back out.
func (a *InProcess) Control(ctx context.Context, run journal.RunMeta, c adapter.RemoteControl) (protocol.ControlResult, bool, error) {
	a.mu.Lock()
	l := a.live[run.ID]
	a.mu.Unlock()
	if l == nil {
		return protocol.ControlResult{}, false, nil
	}
	var res protocol.ControlResult
	var err error
	switch c.Op {
	case protocol.OpCancel:
		res, err = a.cancelRun(ctx, l, run)
	case protocol.OpApprove, protocol.OpClarify:
		res, err = a.respond(l, run, c.PromptID, c.Answer, c.Op == protocol.OpApprove)
	case protocol.ModeSteer:
		res, err = a.steer(ctx, l, run, c.Answer)
	default:
		res = adapter.Result(protocol.ResultUnsupported, "unknown control", run.ID, run.SessionID, "")
	}
	return res, true, err
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
	if !l.x.Steer(text) {
		return adapter.Result(protocol.ResultConflict, "the run has too much guidance waiting", run.ID, run.SessionID, ""), nil
	}
	// The guidance is the user's word in the run: journal it, so every tab
	// shows it in the transcript, now and after a reload.
	e, err := l.x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: "guidance: " + text, Steer: text})
	if err != nil {
		a.opts.Logger.Warn("could not journal the steer message", "run_id", run.ID, "err", journal.RedactString(err.Error()))
	}
	return adapter.Result(protocol.ResultAccepted, "delivered", run.ID, run.SessionID, e.EventID), nil
}
