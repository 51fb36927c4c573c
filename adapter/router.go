package adapter

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Router is the RuntimeAdapter the hub uses: starts and session changes go
// to the local executor; each control of a run reads the run's meta once
// and goes to the executor of this process when the run executes here,
// else to the Remote (when the run executes in another process), else to
// Unowned, which answers for a run no executor holds.
type Router struct {
	store  journal.Store
	local  Local
	remote Remote
}

// NewRouter routes over store to local, the executor of this process, and
// to remote for runs executing elsewhere (nil: no other process executes
// runs of this journal).
func NewRouter(store journal.Store, local Local, remote Remote) *Router {
	return &Router{store: store, local: local, remote: remote}
}

// StartRun implements RuntimeAdapter: the local executor starts the run
// (or hands it to the run queue).
func (r *Router) StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error) {
	return r.local.StartRun(ctx, owner, req)
}

// ObserveRun implements RuntimeAdapter from the journal: replay then live.
// An unknown run yields ErrNotFound (which also matches journal.ErrNotFound).
func (r *Router) ObserveRun(ctx context.Context, runID string, afterSeq uint64) iter.Seq2[protocol.Envelope, error] {
	return func(yield func(protocol.Envelope, error) bool) {
		for e, err := range Observe(ctx, r.store, runID, afterSeq) {
			if errors.Is(err, journal.ErrNotFound) {
				err = fmt.Errorf("%w: run %s: %w", ErrNotFound, runID, err)
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// GetRun implements RuntimeAdapter.
func (r *Router) GetRun(ctx context.Context, runID string) (protocol.RunStatus, error) {
	meta, err := r.store.Run(ctx, runID)
	if err != nil {
		return protocol.RunStatus{}, notFound(err, "run "+runID)
	}
	f, err := journal.FoldRun(ctx, r.store, runID, meta.SessionID)
	if err != nil {
		return protocol.RunStatus{}, err
	}
	return f.RunStatus(), nil
}

// CancelRun implements RuntimeAdapter: the run moves to cancelling, its
// executor stops and writes one terminal cancelled event.
func (r *Router) CancelRun(ctx context.Context, runID string) (protocol.ControlResult, error) {
	return r.runControl(ctx, runID, RemoteControl{Op: protocol.OpCancel})
}

// RespondApproval implements RuntimeAdapter.
func (r *Router) RespondApproval(ctx context.Context, runID, approvalID, choice string) (protocol.ControlResult, error) {
	return r.runControl(ctx, runID, RemoteControl{Op: protocol.OpApprove, PromptID: approvalID, Answer: choice})
}

// RespondClarify implements RuntimeAdapter.
func (r *Router) RespondClarify(ctx context.Context, runID, clarifyID, response string) (protocol.ControlResult, error) {
	return r.runControl(ctx, runID, RemoteControl{Op: protocol.OpClarify, PromptID: clarifyID, Answer: response})
}

// runControl reads the run's meta, once, and routes c.
func (r *Router) runControl(ctx context.Context, runID string, c RemoteControl) (protocol.ControlResult, error) {
	meta, err := r.store.Run(ctx, runID)
	if err != nil {
		return protocol.ControlResult{}, notFound(err, "run "+runID)
	}
	return r.control(ctx, meta, c)
}

// control picks who answers c for run: the local executor when the run
// executes here, else the remote one, else Unowned. A cancel of a started
// run whose executor is gone (no lease holds it) is left to the reaper.
func (r *Router) control(ctx context.Context, run journal.RunMeta, c RemoteControl) (protocol.ControlResult, error) {
	if !run.Terminal {
		if res, executing, err := r.local.Control(ctx, run, c); executing || err != nil {
			return res, err
		}
		if r.remote != nil {
			res, owned, err := r.remote.Control(ctx, run.ID, c)
			if err != nil || owned {
				return res, err
			}
			if c.Op == protocol.OpCancel && run.LastSeq > 0 {
				// Started, and no executor holds it: it ended meanwhile (its
				// executor let go of the lease after its terminal event), or
				// its executor is gone and the lease reaper ends it. Only
				// here is the meta read again, to tell the two apart.
				if now, err := r.store.Run(ctx, run.ID); err == nil && now.Terminal {
					return Result(protocol.ResultNotActive, "the run has already ended", run.ID, run.SessionID, ""), nil
				}
				return Result(protocol.ResultNotActive, "the run's executor is gone; it will end as interrupted", run.ID, run.SessionID, ""), nil
			}
		}
	}
	return Unowned(ctx, r.store, run, c)
}

// steer routes guidance to run like any control, delivering it at most
// once per key whichever executor runs it: the key is remembered in the
// session before the steer is routed, and forgotten when the steer was
// answered but not delivered (not-active, unsupported, conflict), so that
// its retry is answered afresh. On an error the key stays used: the steer
// may have been delivered.
func (r *Router) steer(ctx context.Context, run journal.RunMeta, text, key string) (protocol.ControlResult, error) {
	c := RemoteControl{Op: protocol.ModeSteer, Answer: text}
	if key == "" {
		return r.control(ctx, run, c)
	}
	u := r.store
	if _, err := u.UpdateSession(ctx, run.SessionID, func(m *journal.SessionMeta) error { return RememberKey(m, key) }); errors.Is(err, ErrDuplicate) {
		return Result(protocol.ResultNotActive, "duplicate request: already delivered", run.ID, run.SessionID, ""), nil
	} else if err != nil {
		return protocol.ControlResult{}, err
	}
	res, err := r.control(ctx, run, c)
	if err == nil && !res.Accepted {
		// Should the key stay (the journal failed), the retry is answered
		// as a duplicate, which is what a lost answer would get: the answer
		// given here is still the right one.
		_ = forgetKey(ctx, u, run.SessionID, key)
	}
	return res, err
}

// Unowned answers c for a run that no executor holds (not started, ended,
// or between its executor's claim and start): a cancel of a run not ended
// ends it directly with one cancelled event; anything else is not-active.
// The runner's control listener uses it for a control of a run it leases
// but does not (or no longer) execute.
func Unowned(ctx context.Context, log journal.Log, run journal.RunMeta, c RemoteControl) (protocol.ControlResult, error) {
	switch c.Op {
	case protocol.OpCancel:
		if run.Terminal {
			return Result(protocol.ResultNotActive, "the run has already ended", run.ID, run.SessionID, ""), nil
		}
		e, err := protocol.NewEvent(run.ID, run.SessionID, protocol.EventCancelled, protocol.CancelledPayload{Reason: "cancelled by user", Partial: false})
		if err != nil {
			return protocol.ControlResult{}, err
		}
		out, err := log.Append(ctx, e, run.ID+"/cancel")
		if errors.Is(err, journal.ErrTerminal) {
			return Result(protocol.ResultNotActive, "the run has already ended", run.ID, run.SessionID, ""), nil
		}
		if err != nil {
			return protocol.ControlResult{}, err
		}
		return Result(protocol.ResultAccepted, "cancelled", run.ID, run.SessionID, out.EventID), nil
	case protocol.OpApprove, protocol.OpClarify:
		return Result(protocol.ResultNotActive, "the run is not active", run.ID, run.SessionID, ""), nil
	case protocol.ModeSteer:
		return Result(protocol.ResultNotActive, "no active run to steer", "", run.SessionID, ""), nil
	}
	return Result(protocol.ResultUnsupported, "unknown control", run.ID, run.SessionID, ""), nil
}

// QueueMessage implements RuntimeAdapter. Mode queue goes to the local
// executor, which owns the session's queue. Mode steer reads the session
// once and routes the text to its active run's executor, as a run's
// control; a repeated key is not delivered twice.
func (r *Router) QueueMessage(ctx context.Context, owner, sid string, req protocol.QueueRequest, key string) (protocol.ControlResult, error) {
	if req.Mode != protocol.ModeSteer {
		return r.local.Enqueue(ctx, sid, req.Message, key)
	}
	meta, err := r.store.Session(ctx, sid)
	if err != nil {
		return protocol.ControlResult{}, notFound(err, "session "+sid)
	}
	if meta.ActiveRun == "" {
		return Result(protocol.ResultNotActive, "no active run to steer", "", sid, ""), nil
	}
	return r.steer(ctx, journal.RunMeta{ID: meta.ActiveRun, SessionID: sid}, req.Message, key)
}

// UpdateGoal implements RuntimeAdapter: the local executor, which starts
// the goal's runs, changes the session's goal.
func (r *Router) UpdateGoal(ctx context.Context, sid string, req protocol.GoalRequest) (protocol.ControlResult, error) {
	return r.local.UpdateGoal(ctx, sid, req)
}

// maxRecentKeys bounds the idempotency keys a session remembers.
const maxRecentKeys = 64

// ErrDuplicate reports a control whose idempotency key the session has
// seen (RememberKey).
var ErrDuplicate = errors.New("adapter: duplicate request")

// RememberKey records a session-level control's idempotency key in m (the
// most recent 64 are kept); a key seen before is ErrDuplicate, and an empty
// key is no key. Call it inside journal.SessionUpdater.UpdateSession.
func RememberKey(m *journal.SessionMeta, key string) error {
	if key == "" {
		return nil
	}
	if slices.Contains(m.RecentKeys, key) {
		return ErrDuplicate
	}
	m.RecentKeys = append(m.RecentKeys, key)
	if n := len(m.RecentKeys); n > maxRecentKeys {
		m.RecentKeys = slices.Clone(m.RecentKeys[n-maxRecentKeys:])
	}
	return nil
}

// errNoKey makes forgetKey's update a no-op: the key is not remembered.
var errNoKey = errors.New("adapter: no such key")

// forgetKey drops key from the session's remembered keys: a steer that was
// definitely not delivered (answered not-active, unsupported or conflict)
// must not use up its key, so that its retry is answered afresh. It goes on
// when ctx has ended: the key was recorded under the same request.
func forgetKey(ctx context.Context, u journal.SessionUpdater, sid, key string) error {
	if key == "" {
		return nil
	}
	_, err := u.UpdateSession(context.WithoutCancel(ctx), sid, func(m *journal.SessionMeta) error {
		i := slices.Index(m.RecentKeys, key)
		if i < 0 {
			return errNoKey
		}
		m.RecentKeys = slices.Delete(slices.Clone(m.RecentKeys), i, i+1)
		return nil
	})
	if errors.Is(err, errNoKey) {
		return nil
	}
	return err
}

func notFound(err error, what string) error {
	if errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return err
}
