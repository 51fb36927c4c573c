package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// StartRun implements adapter.Local: it begins the run and executes it
// here, or dispatches it (Options.Dispatch).
func (a *InProcess) StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error) {
	return a.startRun(ctx, owner, req, nil)
}

// startRun begins a run; before, when set, runs on the execution after
// run.started and before the driver starts (e.g. to journal what made the
// run).
func (a *InProcess) startRun(ctx context.Context, owner string, req protocol.StartRunRequest, before func(*driver.Execution)) (protocol.RunStartResult, error) {
	return a.startRunWith(ctx, owner, req, nil, before)
}

// startRunWith is startRun whose registration also applies update to the
// session in the same journal step (journal.Queues.BeginRunUpdate), when
// update is set.
func (a *InProcess) startRunWith(ctx context.Context, owner string, req protocol.StartRunRequest, update func(*journal.SessionMeta) error, before func(*driver.Execution)) (protocol.RunStartResult, error) {
	meta, drv, err := a.begin(ctx, owner, req, update)
	if err != nil {
		return protocol.RunStartResult{}, err
	}
	if a.opts.Dispatch != nil {
		if err := a.opts.Dispatch(ctx, meta); err != nil {
			a.interrupt(context.WithoutCancel(ctx), meta, "the run could not be queued")
			return protocol.RunStartResult{}, err
		}
		return protocol.RunStartResult{RunID: meta.ID, SessionID: meta.SessionID, StreamID: meta.ID,
			Status: protocol.StatusQueued, StartedAt: meta.CreatedAt, Cursor: protocol.EventID(meta.ID, 0),
			ActiveControls: []string{protocol.OpCancel}}, nil
	}
	return a.run(ctx, meta, drv, before)
}

// begin validates a start and registers the run (and a new session when
// req has none) in the journal, with update applied to the session in the
// same step when it is set.
func (a *InProcess) begin(ctx context.Context, owner string, req protocol.StartRunRequest, update func(*journal.SessionMeta) error) (journal.RunMeta, driver.Driver, error) {
	if a.refusing() {
		return journal.RunMeta{}, nil, adapter.ErrClosed // stopping: nothing is journaled
	}
	if req.Profile == "" && req.Provider == "" {
		req.Profile = a.opts.DefaultProfile
	}
	_, drv, err := a.pick(req)
	if err != nil {
		return journal.RunMeta{}, nil, err
	}
	if err := a.takesInputs(req); err != nil {
		return journal.RunMeta{}, nil, err
	}
	if v, ok := drv.(driver.Validator); ok {
		if err := v.Validate(req); err != nil {
			return journal.RunMeta{}, nil, err
		}
	}
	if req.Source == "" {
		req.Source = "user"
	}
	now := protocol.Timestamp(a.opts.Now())
	if req.SessionID == "" {
		req.SessionID = adapter.NewID("s_")
		title := firstLine(req.Message, 80)
		if err := a.store.CreateSession(ctx, journal.SessionMeta{ID: req.SessionID, Owner: owner, Title: title, CreatedAt: now}); err != nil {
			return journal.RunMeta{}, nil, err
		}
	} else {
		meta, err := a.store.Session(ctx, req.SessionID)
		if err != nil {
			return journal.RunMeta{}, nil, notFound(err, "session "+req.SessionID) // a journal fault is no "not found"
		}
		if meta.Owner != owner {
			return journal.RunMeta{}, nil, fmt.Errorf("%w: session %s", adapter.ErrNotFound, req.SessionID)
		}
	}
	a.mu.Lock()
	closed, busy := a.closed || a.stopping, len(a.live) >= a.opts.MaxRuns
	a.mu.Unlock()
	switch {
	case closed:
		return journal.RunMeta{}, nil, adapter.ErrClosed
	case busy && a.opts.Dispatch == nil:
		return journal.RunMeta{}, nil, adapter.ErrBusy
	}
	reqJSON, err := marshalRequest(req)
	if err != nil {
		return journal.RunMeta{}, nil, err
	}
	meta := journal.RunMeta{ID: adapter.NewID("r_"), SessionID: req.SessionID, Owner: owner, CreatedAt: now, Request: reqJSON}
	if update != nil {
		_, err = a.store.BeginRunUpdate(ctx, meta, update)
	} else {
		err = a.store.BeginRun(ctx, meta)
	}
	if err != nil {
		if errors.Is(err, journal.ErrConflict) {
			return meta, nil, fmt.Errorf("%w: %s", adapter.ErrConflict, req.SessionID)
		}
		return meta, nil, err
	}
	return meta, drv, nil
}

// takesInputs refuses a start with attachments, or a workspace, whose
// driver lacks protocol.CapAttachments, or protocol.CapWorkspace
// (Options.Capabilities): an unsupported error on the field, naming the
// profile (or driver) and the capability, before anything is journaled.
func (a *InProcess) takesInputs(req protocol.StartRunRequest) error {
	caps := a.capsOf(req)
	for _, in := range []struct {
		given bool
		need  string
	}{{len(req.Attachments) > 0, protocol.CapAttachments}, {req.Workspace != "", protocol.CapWorkspace}} {
		if in.given && caps.Lacks(in.need) {
			res := caps.Unsupported(in.need, "", req.SessionID)
			return &protocol.Error{Code: protocol.CodeUnsupported, Field: in.need, Message: res.Message}
		}
	}
	return nil
}

// pick picks the driver of a request: its profile, else its provider,
// else the default. The name is the provider run.started records.
func (a *InProcess) pick(req protocol.StartRunRequest) (string, driver.Driver, error) {
	if req.Profile != "" {
		pd, ok := a.opts.Profiles[req.Profile]
		if !ok || pd.Driver == nil {
			return "", nil, protocol.Errorf(protocol.CodeBadRequest, "profile: unknown profile %q", req.Profile)
		}
		return pd.Kind, pd.Driver, nil
	}
	name := req.Provider
	if name == "" {
		name = a.opts.DefaultDriver
	}
	drv, ok := a.opts.Drivers[name]
	if !ok {
		return name, nil, protocol.Errorf(protocol.CodeBadRequest, "provider: unknown runtime driver %q", name)
	}
	return name, drv, nil
}

// ErrClaimed reports a run another executor already owns.
var ErrClaimed = errors.New("executor: run already claimed by another executor")

// Adopt executes a run that was begun elsewhere (a runner taking it from the
// run queue). It claims the run first; a run that is already claimed,
// started or ended is ErrClaimed. A closed (or stopping) executor answers
// adapter.ErrClosed and leaves the run untouched.
func (a *InProcess) Adopt(ctx context.Context, meta journal.RunMeta) error {
	if meta.Terminal || meta.LastSeq > 0 {
		return ErrClaimed
	}
	if a.refusing() {
		return adapter.ErrClosed // not started: the run stays queued for another executor
	}
	var req protocol.StartRunRequest
	if err := json.Unmarshal(meta.Request, &req); err != nil {
		a.interrupt(ctx, meta, "the run's request could not be read")
		return fmt.Errorf("executor: run %s request: %w", meta.ID, err)
	}
	_, drv, err := a.pick(req)
	if err != nil {
		a.interrupt(ctx, meta, "no runtime driver for the run's provider")
		return err
	}
	var before func(*driver.Execution)
	switch req.Source {
	case "queue":
		// Every run of a queued message begins run.started, queue.updated
		// (the queue it leaves behind). Dispatched, it could not carry
		// startRun's before: journal the session's queue as it is now.
		before = func(x *driver.Execution) {
			if sm, err := a.store.Session(ctx, meta.SessionID); err == nil {
				x.Emit(ctx, protocol.EventQueueUpdated, queuePayload(sm.Queue))
			}
		}
	case "goal":
		// Likewise every goal run begins run.started, goal.updated (the
		// goal with this run's turn counted, as startGoalRun left it).
		before = func(x *driver.Execution) {
			if sm, err := a.store.Session(ctx, meta.SessionID); err == nil && sm.Goal != nil {
				x.Emit(ctx, protocol.EventGoalUpdated, *sm.Goal)
			}
		}
	}
	_, err = a.run(ctx, meta, drv, before)
	return err
}

// run claims a begun run, journals run.started and launches its executor.
func (a *InProcess) run(ctx context.Context, meta journal.RunMeta, drv driver.Driver, before func(*driver.Execution)) (protocol.RunStartResult, error) {
	var req protocol.StartRunRequest
	if err := json.Unmarshal(meta.Request, &req); err != nil {
		return protocol.RunStartResult{}, err
	}
	if a.opts.Claim != nil {
		if err := a.opts.Claim(ctx, meta.ID); err != nil {
			return protocol.RunStartResult{}, err
		}
	}
	driverName, _, _ := a.pick(req)
	x := driver.NewExecution(meta.ID, meta.SessionID, req, driver.ExecutionOptions{Log: a.store, Now: a.opts.Now,
		AppendRetry: a.opts.AppendRetry, ApprovalTimeout: a.opts.ApprovalTimeout,
		Titled: func(ctx context.Context, title string) { a.adoptTitle(ctx, meta.SessionID, title) }})
	started, err := x.Append(ctx, mustEvent(meta.ID, meta.SessionID, protocol.EventRunStarted, protocol.RunStartedPayload{
		Message: req.Message, Profile: req.Profile, Model: cmp.Or(req.Model, a.opts.Profiles[req.Profile].Model), Provider: driverName,
		Workspace: req.Workspace, Toolsets: nonNil(req.Toolsets), Source: req.Source}))
	if err != nil {
		a.release(meta.ID)
		if errors.Is(err, journal.ErrTerminal) {
			return protocol.RunStartResult{}, ErrClaimed // cancelled while it waited
		}
		a.interrupt(context.WithoutCancel(ctx), meta, "the run could not start")
		return protocol.RunStartResult{}, err
	}
	if before != nil {
		before(x)
	}
	if !a.launch(x, drv, meta.Owner, nil, nil) {
		meta.LastSeq = started.Seq
		a.interrupt(context.WithoutCancel(ctx), meta, "the hub is shutting down")
		a.release(meta.ID)
		return protocol.RunStartResult{}, adapter.ErrClosed
	}
	return protocol.RunStartResult{RunID: meta.ID, SessionID: meta.SessionID, StreamID: meta.ID,
		Status: protocol.StatusRunning, StartedAt: started.CreatedAt, Cursor: started.EventID,
		ActiveControls: []string{protocol.OpCancel}}, nil
}

func marshalRequest(req protocol.StartRunRequest) (json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return journal.RedactJSON(b), nil
}
