package adapter

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
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
	caps   Capabilities // what each profile's runs can do (nil: not known)
}

// NewRouter routes over store to local, the executor of this process, and
// to remote for runs executing elsewhere (nil: no other process executes
// runs of this journal).
func NewRouter(store journal.Store, local Local, remote Remote) *Router {
	return &Router{store: store, local: local, remote: remote}
}

// WithCapabilities makes GetRun offer in active_controls only what the
// run's driver can do (caps resolves its profile, else provider); call it
// before the Router is used. It returns r.
func (r *Router) WithCapabilities(caps Capabilities) *Router {
	r.caps = caps
	return r
}

// StartRun implements RuntimeAdapter: the local executor starts the run
// (or hands it to the run queue). The answer's active_controls offer only
// what the driver of the start's profile (else provider, else the
// default) can do, as GetRun's do.
func (r *Router) StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error) {
	res, err := r.local.StartRun(ctx, owner, req)
	if c := r.caps.Resolve(req.Profile, req.Provider); err == nil && c.Known {
		res.ActiveControls = protocol.OfferedControls(res.ActiveControls, c.Caps)
	}
	return res, err
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
	return OfferedRunStatus(&f, r.caps), nil
}

// OfferedRunStatus is run's status with active_controls narrowed to what
// caps says its driver can do (all of them when caps does not know it).
func OfferedRunStatus(run *session.Run, caps Capabilities) protocol.RunStatus {
	st := run.RunStatus()
	if c := caps.Resolve(run.Profile, run.Provider); c.Known {
		st.ActiveControls = protocol.OfferedControls(st.ActiveControls, c.Caps)
	}
	return st
}

// Control implements RuntimeAdapter. A control of a session (start,
// queue, goal) goes to the local executor, which owns the session's queue
// and goal and starts runs. A control of a run reads one meta, once, and
// checks the owner on it: the run's, or for a control naming only its
// session (a steer, a cancel without run id), the session's, whose active
// run it goes to. It then goes to the executor of this process when the
// run executes here, else to the Remote, else to Unowned. A steer's key is
// remembered in the session before it is routed, so that a repeat is not
// delivered twice whichever executor runs it.
func (r *Router) Control(ctx context.Context, c Control) (protocol.ControlResult, error) {
	if !c.OfRun() {
		res, _, err := r.local.Control(ctx, journal.RunMeta{}, c)
		return res, err
	}
	if c.RunID != "" {
		run, err := r.store.Run(ctx, c.RunID)
		if err == nil && run.Owner != c.Owner {
			err = journal.ErrNotFound
		}
		if err != nil {
			return protocol.ControlResult{}, notFound(err, "run "+c.RunID)
		}
		return r.route(ctx, run, c, true)
	}
	meta, err := r.store.Session(ctx, c.SessionID)
	if err == nil && meta.Owner != c.Owner {
		err = journal.ErrNotFound
	}
	if err != nil {
		return protocol.ControlResult{}, notFound(err, "session "+c.SessionID)
	}
	if meta.ActiveRun == "" {
		switch latest := meta.LatestRun(); {
		case c.Steers():
			return Result(protocol.ResultNotActive, "no active run to steer", "", c.SessionID, ""), nil
		case latest != "":
			// A session without an active run: its runs have ended.
			return Result(protocol.ResultNotActive, "the run has already ended", latest, c.SessionID, ""), nil
		}
		return protocol.ControlResult{}, protocol.Errorf(protocol.CodeNotActive, "the session has no run")
	}
	run := journal.RunMeta{ID: meta.ActiveRun, SessionID: meta.ID, Owner: meta.Owner}
	if !c.Steers() || c.Key == "" {
		return r.route(ctx, run, c, false)
	}
	return r.steer(ctx, run, c)
}

// route picks who answers c for run: the local executor when the run
// executes here, else the remote one, else Unowned. A cancel of a started
// run whose executor is gone (no lease holds it) is left to the reaper.
// known says run is the run's own meta; else it was taken from its
// session (ID, SessionID and Owner alone).
func (r *Router) route(ctx context.Context, run journal.RunMeta, c Control, known bool) (protocol.ControlResult, error) {
	if !run.Terminal {
		if res, executing, err := r.local.Control(ctx, run, c); executing || err != nil {
			return res, err
		}
		if r.remote != nil {
			res, owned, err := r.remote.Control(ctx, run, c)
			if err != nil || owned {
				return res, err
			}
			if c.Op == protocol.OpCancel && (run.LastSeq > 0 || !known) {
				// No executor holds it: it ended meanwhile (its executor let
				// go of the lease after its terminal event), its executor is
				// gone and the lease reaper ends it, or it never started.
				// Only here, off the common path, is the run's meta read
				// (again), to tell these apart.
				now, err := r.store.Run(ctx, run.ID)
				switch {
				case err == nil && now.Terminal:
					return Result(protocol.ResultNotActive, "the run has already ended", run.ID, run.SessionID, ""), nil
				case err == nil && now.LastSeq == 0:
					return Unowned(ctx, r.store, now, c)
				}
				return Result(protocol.ResultNotActive, "the run's executor is gone; it will end as interrupted", run.ID, run.SessionID, ""), nil
			}
		}
	}
	return Unowned(ctx, r.store, run, c)
}

// steer routes a steer with a key to run, delivering it at most once per
// key whichever executor runs it: the key is remembered in the session
// before the steer is routed, and forgotten when the steer was answered
// but not delivered (not-active, unsupported, conflict), so that its
// retry is answered afresh. On an error the key stays used: the steer may
// have been delivered.
func (r *Router) steer(ctx context.Context, run journal.RunMeta, c Control) (protocol.ControlResult, error) {
	if _, err := r.store.UpdateSession(ctx, run.SessionID, func(m *journal.SessionMeta) error { return RememberKey(m, c.Key) }); errors.Is(err, ErrDuplicate) {
		return Result(protocol.ResultNotActive, "duplicate request: already delivered", run.ID, run.SessionID, ""), nil
	} else if err != nil {
		return protocol.ControlResult{}, err
	}
	res, err := r.route(ctx, run, c, false)
	if err == nil && !res.Accepted {
		// Should the key stay (the journal failed), the retry is answered
		// as a duplicate, which is what a lost answer would get: the answer
		// given here is still the right one.
		_ = forgetKey(ctx, r.store, run.SessionID, c.Key)
	}
	return res, err
}

func notFound(err error, what string) error {
	if errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return err
}
