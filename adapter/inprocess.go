package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Store is what the in-process executor and the hub need of the journal:
// the one definition both use (the hub imports it from here).
type Store interface {
	journal.Log
	journal.Registry
	journal.Bus
}

// Options configure an InProcess adapter.
type Options struct {
	// Drivers by name; a start picks req.Provider, else DefaultDriver.
	Drivers map[string]Driver
	// DefaultDriver names the driver of a start without a provider
	// (default "sim").
	DefaultDriver string
	// Profiles are drivers by profile name (adapter/profile builds them):
	// a start's profile picks one (before its provider), and an unknown
	// profile is a bad_request.
	Profiles map[string]ProfileDriver
	// DefaultProfile, when set, is the profile of a start that names
	// neither a profile nor a provider; begin writes it into the request.
	DefaultProfile string
	// ClarifyTimeout is how long a clarify prompt waits before it expires
	// (default 120 s).
	ClarifyTimeout time.Duration
	// ApprovalTimeout, when positive, is how long an approval prompt waits
	// for a user: then it expires, journaled once as approval.resolved
	// with status expired and choice deny, and the driver goes on as
	// denied (0: approvals wait as long as the run).
	ApprovalTimeout time.Duration
	// MaxRuns bounds the runs executing at once in this process (default
	// 10,000); a start past it answers ErrBusy.
	MaxRuns int
	// MaxQueue bounds the messages queued per session (default 50).
	MaxQueue int
	// MaxGoalContinuations stops a goal after this many runs it started
	// (default 10): the goal is paused with a reason, so a runaway goal
	// cannot loop forever.
	MaxGoalContinuations int
	// Dispatch, when set, hands every begun run to another process (the
	// runner queue) instead of executing it here; starts then answer status
	// queued.
	Dispatch func(ctx context.Context, run journal.RunMeta) error
	// Remote routes controls of runs that do not execute in this process to
	// their executor. Nil: such runs are treated as having no executor.
	Remote Remote
	// Claim is called before a run starts executing here (e.g. to take its
	// lease); an error keeps the run from starting. Release is called once
	// the run's terminal event is journaled (or its start failed).
	Claim   func(ctx context.Context, runID string) error
	Release func(runID string)
	// AppendRetry is how long an executing run keeps retrying an append
	// that failed for a passing reason (journal unreachable), with the same
	// idempotency key, before the run fails (default DefaultAppendRetry).
	// With a shared journal whose runs are leased (Redis), use the lease
	// TTL: a journal outage shorter than the lease then only pauses runs.
	AppendRetry time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// ProfileDriver is the driver of one profile.
type ProfileDriver struct {
	Driver Driver
	Kind   string // the driver kind, journaled as run.started provider
	Model  string // run.started model of a start that names none
}

// ErrBusy answers a start when MaxRuns runs are executing.
var ErrBusy = errors.New("adapter: too many runs executing")

// InProcess executes runs in goroutines it owns. Close cancels them, writes
// each one terminal error (interrupted) and waits for them.
type InProcess struct {
	store Store
	opts  Options

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	live   map[string]*live // executing runs
	closed bool

	orphans chan struct{} // a slot per orphan stop under way (orphans.go)
}

type live struct {
	x      *Execution
	drv    Driver
	owner  string
	cancel context.CancelCauseFunc
}

var errUserCancel = errors.New("cancelled by user")

// NewInProcess returns an adapter executing runs in this process.
func NewInProcess(store Store, opts Options) *InProcess {
	if opts.DefaultDriver == "" {
		opts.DefaultDriver = "sim"
	}
	if opts.ClarifyTimeout == 0 {
		opts.ClarifyTimeout = 120 * time.Second
	}
	if opts.MaxRuns == 0 {
		opts.MaxRuns = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxQueue == 0 {
		opts.MaxQueue = 50
	}
	if opts.MaxGoalContinuations == 0 {
		opts.MaxGoalContinuations = 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &InProcess{store: store, opts: opts, ctx: ctx, cancel: cancel, live: map[string]*live{},
		orphans: make(chan struct{}, maxOrphanStops)}
}

// ClarifyTimeout is the configured clarify expiry, for drivers.
func (a *InProcess) ClarifyTimeout() time.Duration { return a.opts.ClarifyTimeout }

// NewID returns a new time-ordered identifier with the given prefix.
func NewID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
}

// Recover ends every run a previous process left without a terminal event:
// each gets exactly one terminal error with code interrupted and the last
// journaled seq. Call it once at start-up, before serving. The journal's
// single-terminal rule makes it exactly-once across restarts. A run whose
// driver is an OrphanStopper then has its upstream work stopped, in the
// background (Close stops and waits for that).
func (a *InProcess) Recover(ctx context.Context) (int, error) {
	runs, err := a.store.ActiveRuns(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range runs {
		a.mu.Lock()
		_, mine := a.live[r.ID]
		a.mu.Unlock()
		if mine {
			continue
		}
		if err := a.interrupt(ctx, r, "the hub restarted while the run was active"); err != nil {
			return n, err
		}
		n++
		a.stopOrphan(r)
		a.drain(ctx, r.SessionID) // what was queued behind it goes on
	}
	return n, nil
}

func (a *InProcess) interrupt(ctx context.Context, r journal.RunMeta, why string) error {
	e, err := protocol.NewEvent(r.ID, r.SessionID, protocol.EventError, protocol.ErrorPayload{
		Code: protocol.ErrorInterrupted, Message: why, Terminal: true, LastSeq: r.LastSeq})
	if err != nil {
		return err
	}
	_, err = a.store.Append(ctx, e, r.ID+"/interrupted")
	if errors.Is(err, journal.ErrTerminal) {
		return nil
	}
	return err
}

// StartRun implements RuntimeAdapter.
func (a *InProcess) StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error) {
	return a.startRun(ctx, owner, req, nil)
}

// startRun begins a run; before, when set, runs on the execution after
// run.started and before the driver starts (e.g. to journal what made the
// run).
func (a *InProcess) startRun(ctx context.Context, owner string, req protocol.StartRunRequest, before func(*Execution)) (protocol.RunStartResult, error) {
	meta, drv, err := a.begin(ctx, owner, req)
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
// req has none) in the journal.
func (a *InProcess) begin(ctx context.Context, owner string, req protocol.StartRunRequest) (journal.RunMeta, Driver, error) {
	if req.Profile == "" && req.Provider == "" {
		req.Profile = a.opts.DefaultProfile
	}
	_, drv, err := a.driver(req)
	if err != nil {
		return journal.RunMeta{}, nil, err
	}
	if v, ok := drv.(Validator); ok {
		if err := v.Validate(req); err != nil {
			return journal.RunMeta{}, nil, err
		}
	}
	if req.Source == "" {
		req.Source = "user"
	}
	now := protocol.Timestamp(a.opts.Now())
	if req.SessionID == "" {
		req.SessionID = NewID("s_")
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
			return journal.RunMeta{}, nil, fmt.Errorf("%w: session %s", ErrNotFound, req.SessionID)
		}
	}
	a.mu.Lock()
	closed, busy := a.closed, len(a.live) >= a.opts.MaxRuns
	a.mu.Unlock()
	switch {
	case closed:
		return journal.RunMeta{}, nil, ErrClosed
	case busy && a.opts.Dispatch == nil:
		return journal.RunMeta{}, nil, ErrBusy
	}
	reqJSON, err := marshalRequest(req)
	if err != nil {
		return journal.RunMeta{}, nil, err
	}
	meta := journal.RunMeta{ID: NewID("r_"), SessionID: req.SessionID, Owner: owner, CreatedAt: now, Request: reqJSON}
	if err := a.store.BeginRun(ctx, meta); err != nil {
		if errors.Is(err, journal.ErrConflict) {
			return meta, nil, fmt.Errorf("%w: %s", ErrConflict, req.SessionID)
		}
		return meta, nil, err
	}
	return meta, drv, nil
}

// driver picks the driver of a request: its profile, else its provider,
// else the default. The name is the provider run.started records.
func (a *InProcess) driver(req protocol.StartRunRequest) (string, Driver, error) {
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
var ErrClaimed = errors.New("adapter: run already claimed by another executor")

// Adopt executes a run that was begun elsewhere (a runner taking it from the
// run queue). It claims the run first; a run that is already claimed,
// started or ended is ErrClaimed. A closed adapter answers ErrClosed and
// leaves the run untouched.
func (a *InProcess) Adopt(ctx context.Context, meta journal.RunMeta) error {
	if meta.Terminal || meta.LastSeq > 0 {
		return ErrClaimed
	}
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return ErrClosed // not started: the run stays queued for another executor
	}
	var req protocol.StartRunRequest
	if err := json.Unmarshal(meta.Request, &req); err != nil {
		a.interrupt(ctx, meta, "the run's request could not be read")
		return fmt.Errorf("adapter: run %s request: %w", meta.ID, err)
	}
	_, drv, err := a.driver(req)
	if err != nil {
		a.interrupt(ctx, meta, "no runtime driver for the run's provider")
		return err
	}
	var before func(*Execution)
	if req.Source == "queue" {
		// Every run of a queued message begins run.started, queue.updated
		// (the queue it leaves behind). Dispatched, it could not carry
		// startRun's before: journal the session's queue as it is now.
		before = func(x *Execution) {
			if sm, err := a.store.Session(ctx, meta.SessionID); err == nil {
				x.Emit(ctx, protocol.EventQueueUpdated, queuePayload(sm.Queue))
			}
		}
	}
	_, err = a.run(ctx, meta, drv, before)
	return err
}

// run claims a begun run, journals run.started and launches its executor.
func (a *InProcess) run(ctx context.Context, meta journal.RunMeta, drv Driver, before func(*Execution)) (protocol.RunStartResult, error) {
	var req protocol.StartRunRequest
	if err := json.Unmarshal(meta.Request, &req); err != nil {
		return protocol.RunStartResult{}, err
	}
	if a.opts.Claim != nil {
		if err := a.opts.Claim(ctx, meta.ID); err != nil {
			return protocol.RunStartResult{}, err
		}
	}
	driverName, _, _ := a.driver(req)
	x := &Execution{RunID: meta.ID, SessionID: meta.SessionID, Request: req, log: a.store, now: a.opts.Now, retryFor: a.opts.AppendRetry,
		approvalTimeout: a.opts.ApprovalTimeout, steer: make(chan string, 16),
		titled: func(ctx context.Context, title string) { a.adoptTitle(ctx, meta.SessionID, title) }}
	started, err := x.append(ctx, mustEvent(meta.ID, meta.SessionID, protocol.EventRunStarted, protocol.RunStartedPayload{
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
	if !a.launch(x, drv, meta.Owner) {
		meta.LastSeq = started.Seq
		a.interrupt(context.WithoutCancel(ctx), meta, "the hub is shutting down")
		a.release(meta.ID)
		return protocol.RunStartResult{}, ErrClosed
	}
	return protocol.RunStartResult{RunID: meta.ID, SessionID: meta.SessionID, StreamID: meta.ID,
		Status: protocol.StatusRunning, StartedAt: started.CreatedAt, Cursor: started.EventID,
		ActiveControls: []string{protocol.OpCancel}}, nil
}

// release tells the Release hook a run no longer executes here.
func (a *InProcess) release(runID string) {
	if a.opts.Release != nil {
		a.opts.Release(runID)
	}
}

// launch starts the executor goroutine; false when the adapter is closed.
func (a *InProcess) launch(x *Execution, drv Driver, owner string) bool {
	ctx, cancel := context.WithCancelCause(a.ctx)
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
		cont := a.execute(ctx, x, drv)
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
func (a *InProcess) execute(ctx context.Context, x *Execution, drv Driver) (cont bool) {
	usage, err := a.safeExecute(ctx, x, drv)
	// The terminal append must happen even though ctx is cancelled.
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Text a stream held back (a word not finished) goes out first.
	if ferr := x.Flush(tctx); ferr != nil && err == nil {
		err = ferr
	}
	var typ protocol.EventType
	var payload any
	var runtimeCancel *Cancelled
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errUserCancel):
		typ, payload = protocol.EventCancelled, protocol.CancelledPayload{Reason: "cancelled by user", Partial: x.Streamed()}
	case ctx.Err() != nil:
		// An append cut short by the stop may still have been journaled:
		// the journal, not x, knows the last seq.
		last := x.last()
		if meta, err := a.store.Run(tctx, x.RunID); err == nil && meta.LastSeq > last {
			last = meta.LastSeq
		}
		typ, payload = protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted,
			Message: "the executor stopped while the run was active", Terminal: true, LastSeq: last}
	case errors.As(err, &runtimeCancel):
		typ, payload = protocol.EventCancelled, protocol.CancelledPayload{Reason: journal.RedactString(runtimeCancel.Reason), Partial: x.Streamed()}
	case err == nil:
		cont = a.postTurn(tctx, x, drv)
		typ, payload = protocol.EventDone, protocol.DonePayload{Status: string(protocol.StatusCompleted), Usage: usage}
	default:
		var de *DriverError
		if !errors.As(err, &de) {
			a.opts.Logger.Error("run failed", "run_id", x.RunID, "session_id", x.SessionID, "err", journal.RedactString(err.Error()))
			de = &DriverError{Code: protocol.ErrorInternal, Message: "the runtime failed"}
		}
		typ, payload = protocol.EventError, protocol.ErrorPayload{Code: de.Code, Message: journal.RedactString(de.Message), Terminal: true}
	}
	e := mustEvent(x.RunID, x.SessionID, typ, payload)
	if _, err := x.append(tctx, e); err != nil && !errors.Is(err, journal.ErrTerminal) {
		a.opts.Logger.Error("terminal event not journaled; retrying until the journal takes it", "run_id", x.RunID, "err", err)
		if transient(err) {
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
func (a *InProcess) retryTerminal(x *Execution, e protocol.Envelope) {
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
		_, err := x.append(ctx, e)
		cancel()
		switch {
		case err == nil:
			a.opts.Logger.Info("terminal event journaled after the journal recovered", "run_id", x.RunID, "attempts", attempt+1)
			return
		case errors.Is(err, journal.ErrTerminal), !transient(err):
			return
		}
	}
}

// afterRun continues a session whose run has ended: its next queued message
// first, else the goal's next run when the evaluation asked for one.
func (a *InProcess) afterRun(sid string, cont bool) {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	if a.drain(ctx, sid) || !cont {
		return
	}
	a.startGoalRun(ctx, sid)
}

func (a *InProcess) safeExecute(ctx context.Context, x *Execution, drv Driver) (u *protocol.Usage, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.opts.Logger.Error("driver panicked", "run_id", x.RunID, "panic", fmt.Sprint(r))
			err = &DriverError{Code: protocol.ErrorInternal, Message: "the runtime failed"}
		}
	}()
	return drv.Execute(ctx, x)
}

func (x *Execution) last() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastSeq
}

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

// Abandon stops a run executing here that this process no longer owns (its
// lease lapsed, so a reaper ends it as interrupted): the executor stops and
// its terminal append, interrupted, lands only if no one ended the run
// first. It reports whether the run was executing here.
func (a *InProcess) Abandon(runID string) bool {
	a.mu.Lock()
	l := a.live[runID]
	a.mu.Unlock()
	if l == nil {
		return false
	}
	l.cancel(errAbandoned)
	return true
}

var errAbandoned = errors.New("the executor lost the run")

// Live returns the number of runs executing in this process.
func (a *InProcess) Live() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.live)
}

// Wait blocks until no run executes in this process or ctx ends.
func (a *InProcess) Wait(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for a.Live() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Close stops every executing run (each ends with one terminal interrupted
// error) and waits for the executors.
func (a *InProcess) Close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	return nil
}

// ObserveRun implements RuntimeAdapter from the journal: replay then live.
func (a *InProcess) ObserveRun(ctx context.Context, runID string, afterSeq uint64) iter.Seq2[protocol.Envelope, error] {
	return Observe(ctx, a.store, runID, afterSeq)
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

func mustEvent(runID, sessionID string, typ protocol.EventType, p any) protocol.Envelope {
	e, err := protocol.NewEvent(runID, sessionID, typ, p)
	if err != nil {
		panic(err) // only fixed payload types reach here
	}
	return e
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return protocol.Truncate(strings.TrimSpace(s), n)
}
