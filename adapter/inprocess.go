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
	switch req.Source {
	case "queue":
		// Every run of a queued message begins run.started, queue.updated
		// (the queue it leaves behind). Dispatched, it could not carry
		// startRun's before: journal the session's queue as it is now.
		before = func(x *Execution) {
			if sm, err := a.store.Session(ctx, meta.SessionID); err == nil {
				x.Emit(ctx, protocol.EventQueueUpdated, queuePayload(sm.Queue))
			}
		}
	case "goal":
		// Likewise every goal run begins run.started, goal.updated (the
		// goal with this run's turn counted, as startGoalRun left it).
		before = func(x *Execution) {
			if sm, err := a.store.Session(ctx, meta.SessionID); err == nil && sm.Goal != nil {
				x.Emit(ctx, protocol.EventGoalUpdated, *sm.Goal)
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
