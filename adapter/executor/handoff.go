package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// startedByRuntime reports whether a run was made by the runtime, not by a
// request that waits for its answer: a queued message's (source "queue")
// or a goal's next turn (source "goal"). Such a run, registered but never
// started (a process stopped in between), is started later rather than
// ended: nobody else would ask again.
func startedByRuntime(r journal.RunMeta) bool {
	var req struct {
		Source string `json:"source"`
	}
	if json.Unmarshal(r.Request, &req) != nil {
		return false
	}
	return req.Source == "queue" || req.Source == "goal"
}

// Dispatching reports whether this executor hands its runs to other
// processes (Options.Dispatch) instead of executing them.
func (a *InProcess) Dispatching() bool { return a.opts.Dispatch != nil }

// Stranded reports whether r is a run ResumeStranded would start: made by
// the runtime, registered at least grace ago and never started.
func Stranded(r journal.RunMeta, now time.Time, grace time.Duration) bool {
	return !r.Terminal && r.LastSeq == 0 && now.Sub(protocol.Time(r.CreatedAt)) >= grace && startedByRuntime(r)
}

// ResumeStranded executes here a run the runtime made (a queued message's,
// a goal's) that was registered but never started because the process
// that registered it stopped in between: the caller (a node's reaper)
// found it so, unleased, for longer than a start takes. It is Adopt: the
// claim (the lease) makes it exactly once across processes, and a run
// that started or ended meanwhile is ErrClaimed.
func (a *InProcess) ResumeStranded(ctx context.Context, r journal.RunMeta) error {
	if !startedByRuntime(r) {
		return ErrClaimed
	}
	err := a.Adopt(ctx, r)
	if err == nil {
		a.opts.Logger.Info("started a queued run its process registered but never started", "run_id", r.ID, "session_id", r.SessionID)
	}
	return err
}

// recoverRun handles one run a previous process left without a terminal
// event: a run the runtime made and never started is started now (its
// message was accepted; it leaves the queue only as its run begins), any
// other ends interrupted. It reports whether it started the run.
func (a *InProcess) recoverRun(ctx context.Context, r journal.RunMeta) (bool, error) {
	if r.LastSeq == 0 && startedByRuntime(r) && a.opts.Dispatch == nil {
		err := a.Adopt(ctx, r)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrClaimed):
			return false, nil
		}
		a.opts.Logger.Warn("could not start a queued run left registered by the previous process; ending it", "run_id", r.ID, "err", err)
	}
	return false, a.interrupt(ctx, r, "the hub restarted while the run was active")
}
