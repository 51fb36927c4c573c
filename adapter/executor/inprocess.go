package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Options configure an InProcess executor.
type Options struct {
	// Drivers by name; a start picks req.Provider, else DefaultDriver.
	Drivers map[string]driver.Driver
	// DefaultDriver names the driver of a start without a provider
	// (default "sim").
	DefaultDriver string
	// Profiles are drivers by profile name (adapter/profile builds them):
	// a start's profile picks one (before its provider), and an unknown
	// profile is a bad_request.
	Profiles map[string]driver.Profile
	// DefaultProfile, when set, is the profile of a start that names
	// neither a profile nor a provider; begin writes it into the request.
	DefaultProfile string
	// Capabilities tells what the runs of each profile and provider can
	// do (adapter/profile's Config.Capabilities). A control the driver of
	// its run cannot do (cancel, approve, clarify, steer), or of its
	// session's next run (queue, goal: the latest run's profile, which
	// follow-up runs inherit, else the default), is answered unsupported
	// and journals nothing. Nil: nothing is refused.
	Capabilities adapter.Capabilities
	// ClarifyTimeout is how long a clarify prompt waits before it expires
	// (default 120 s).
	ClarifyTimeout time.Duration
	// ApprovalTimeout, when positive, is how long an approval prompt waits
	// for a user: then it expires, journaled once as approval.resolved
	// with status expired and choice deny, and the driver goes on as
	// denied (0: approvals wait as long as the run).
	ApprovalTimeout time.Duration
	// MaxRuns bounds the runs executing at once in this process (default
	// 10,000); a start past it answers adapter.ErrBusy.
	MaxRuns int
	// MaxQueue bounds the messages queued per session (default 50).
	MaxQueue int
	// MaxGoalContinuations is the turn budget of a goal on a profile that
	// sets none (driver.Profile.GoalMaxTurns), and on runs without a
	// profile: after this many runs it started, a goal the judge would
	// continue is paused with a reason, so a runaway goal cannot loop
	// forever (default 20, Hermes Agent's).
	MaxGoalContinuations int
	// GoalJudgeTimeout bounds a goal judge's answer (default 60 s; a
	// judge's own timeout is usually shorter). A judge past it fails open.
	GoalJudgeTimeout time.Duration
	// Dispatch, when set, hands every begun run to another process (the
	// runner queue) instead of executing it here; starts then answer status
	// queued.
	Dispatch func(ctx context.Context, run journal.RunMeta) error
	// Claim is called before a run starts executing here (e.g. to take its
	// lease); an error keeps the run from starting. Release is called once
	// the run's terminal event is journaled (or its start failed).
	Claim   func(ctx context.Context, runID string) error
	Release func(runID string)
	// AppendRetry is how long an executing run keeps retrying an append
	// that failed for a passing reason (journal unreachable), with the same
	// idempotency key, before the run fails (default
	// driver.DefaultAppendRetry).
	// With a shared journal whose runs are leased (Redis), use the lease
	// TTL: a journal outage shorter than the lease then only pauses runs.
	AppendRetry time.Duration
	// Detach makes Close leave the runs whose driver can re-attach them
	// (driver.Reattacher) going upstream, without a terminal event, for
	// the next process's Recover to re-attach. Set it only where the next
	// process recovers this journal's runs (the embedded journal); with
	// leases (Redis) a run left so would be reaped as interrupted while
	// its upstream work goes on.
	Detach bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// InProcess executes runs in goroutines it owns. Close cancels them, writes
// each one terminal error (interrupted) and waits for them.
type InProcess struct {
	store journal.Store
	opts  Options

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	live     map[string]*live // executing runs
	closed   bool
	stopping bool // StopStarting: no new run starts (stop.go)

	orphans chan struct{} // a slot per orphan stop under way (orphans.go)
}

type live struct {
	x      *driver.Execution
	drv    driver.Driver
	owner  string
	cancel context.CancelCauseFunc
}

var errUserCancel = errors.New("cancelled by user")

// New returns an executor of runs in this process over store.
func New(store journal.Store, opts Options) *InProcess {
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
		opts.MaxGoalContinuations = 20
	}
	if opts.GoalJudgeTimeout == 0 {
		opts.GoalJudgeTimeout = time.Minute
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

// Recover ends every run a previous process left without a terminal event:
// each gets exactly one terminal error with code interrupted and the last
// journaled seq. Call it once at start-up, before serving. The journal's
// single-terminal rule makes it exactly-once across restarts. A run whose
// driver is a driver.OrphanStopper then has its upstream work stopped, in
// the background (Close stops and waits for that).
//
// A run whose driver can re-attach it (driver.Reattacher: its work goes on
// upstream, as a Hermes run does) is not ended: it executes here again,
// its driver following the upstream run from where the journal left it,
// and ends as the upstream run ends (reattach.go).
//
// A run the runtime made from a queued message (or a goal) that was
// registered but never started is started instead, and every idle session
// that still has queued messages is drained (DrainIdle): an accepted
// queued message is never lost nor left waiting by a crash. It returns
// the number of runs it ended.
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
		if a.reattach(ctx, r) {
			continue
		}
		started, err := a.recoverRun(ctx, r)
		if err != nil {
			return n, err
		}
		if started {
			continue
		}
		n++
		a.stopOrphan(r)
		a.drain(ctx, r.SessionID) // what was queued behind it goes on
	}
	if _, err := a.DrainIdle(ctx); err != nil {
		// The hub can serve all the same; what stays queued is drained by
		// the next start or the next enqueue on the session.
		a.opts.Logger.Warn("could not list the sessions with queued messages to start them", "err", err)
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
// error) and waits for the executors. With Options.Detach, the runs a
// driver can re-attach are left going upstream instead, without a
// terminal event (the next Recover re-attaches them).
func (a *InProcess) Close() error {
	a.mu.Lock()
	a.closed = true
	var runs []*live
	if a.opts.Detach {
		for _, l := range a.live {
			runs = append(runs, l)
		}
	}
	a.mu.Unlock()
	a.detach(runs)
	a.cancel()
	a.wg.Wait()
	return nil
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

func notFound(err error, what string) error {
	if errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("%w: %s", adapter.ErrNotFound, what)
	}
	return err
}
