package driver

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Execution is a run as its driver sees it: the request, an emitter that
// journals events, and the prompts that wait on a user.
//
// A few methods are the executor's, not a driver's (NewExecution, Append,
// Flush, BeginCancel, LastSeq, Steer): the executor builds the Execution,
// journals the run's first and terminal events through it and delivers
// the user's controls to it.
type Execution struct {
	RunID     string
	SessionID string
	Request   protocol.StartRunRequest

	log      journal.Log
	keyBase  string // the idempotency keys' prefix: the run id, and the key scope
	now      func() time.Time
	retryFor time.Duration // how long a transient append error is retried
	keySeq   atomic.Uint64
	streamed atomic.Bool

	approvalTimeout time.Duration // expires an approval prompt (ExecutionOptions.ApprovalTimeout; 0: never)

	emitMu sync.Mutex // orders Emit's appends with the held-back text
	held   *heldText  // the end of a text stream not yet journaled (holdback.go); guarded by emitMu
	// heldTimer lets held text out after holdFor; heldGen tells its firing
	// whether it is stale. Guarded by emitMu.
	heldTimer *time.Timer
	heldGen   uint64
	answer    answer // the last assistant message's text (result.go); guarded by emitMu

	mu         sync.Mutex
	approval   *prompt
	clarify    *prompt
	closed     []*prompt // recently finished prompts, newest last
	cancelling bool
	lastSeq    uint64

	steer   chan string // guidance for the running driver (queue mode steer)
	steerMu sync.Mutex  // one Steer at a time: its record, then its hand-off

	// titled, when set, is told the title of each title.updated journaled
	// (the runtime names an untitled session after it).
	titled func(ctx context.Context, title string)
}

// ExecutionOptions are how an Execution journals, for the executor that
// builds it.
type ExecutionOptions struct {
	// Log journals the run's events.
	Log journal.Log
	// Now is the clock of the events' created_at (default time.Now).
	Now func() time.Time
	// AppendRetry is how long a transient append error is retried with
	// the same idempotency key (default DefaultAppendRetry).
	AppendRetry time.Duration
	// ApprovalTimeout, when positive, expires an approval prompt nobody
	// answers in time (PendingApproval.Wait).
	ApprovalTimeout time.Duration
	// Titled, when set, is told the title of each title.updated journaled.
	Titled func(ctx context.Context, title string)
	// KeyScope, when set, sets the idempotency keys of this execution's
	// appends apart from those of the run's earlier executions (a run
	// re-attached after a restart): keys are numbered from 1 in each
	// execution, and the journal takes a key it has seen as a retry.
	KeyScope string
}

// steerBuffer bounds the guidance waiting for a driver.
const steerBuffer = 16

// NewExecution is the executor's: the execution of run runID in sessionID
// for req, journaling as o says.
func NewExecution(runID, sessionID string, req protocol.StartRunRequest, o ExecutionOptions) *Execution {
	if o.Now == nil {
		o.Now = time.Now
	}
	keyBase := runID + "/"
	if o.KeyScope != "" {
		keyBase += o.KeyScope + "/"
	}
	return &Execution{RunID: runID, SessionID: sessionID, Request: req, log: o.Log, keyBase: keyBase, now: o.Now, retryFor: o.AppendRetry,
		approvalTimeout: o.ApprovalTimeout, steer: make(chan string, steerBuffer), titled: o.Titled}
}

// Steering delivers guidance sent to the running run (queue mode steer) to
// drivers that declare the Steerer capability.
func (x *Execution) Steering() <-chan string { return x.steer }

// Steer is the executor's: it calls record (which journals the guidance)
// and then hands the guidance to the driver (Steering), so that the record
// comes before anything the driver emits in answer to it; it reports
// false, recording and delivering nothing, when too much guidance is
// waiting.
func (x *Execution) Steer(text string, record func()) bool {
	x.steerMu.Lock()
	defer x.steerMu.Unlock()
	if len(x.steer) == cap(x.steer) {
		return false
	}
	record()
	x.steer <- text // room: only Steer sends, under steerMu
	return true
}

// BeginCancel is the executor's: it marks the run cancelling, so that a
// pending prompt answers not-active from then on, and reports false when
// the run already was.
func (x *Execution) BeginCancel() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancelling {
		return false
	}
	x.cancelling = true
	return true
}

// LastSeq is the executor's: the highest seq journaled through x.
func (x *Execution) LastSeq() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastSeq
}

// Streamed reports whether any output (tokens, reasoning, tool activity)
// was emitted.
func (x *Execution) Streamed() bool { return x.streamed.Load() }

// Emit journals one event of the run. Transient journal errors are retried
// with the same idempotency key, so a retry never duplicates an event.
//
// Streamed text (token.delta, reasoning.delta, tool.updated text) may be
// held back in part, so that a secret split over several deltas is
// redacted whole (holdback.go): its events are re-cut at word boundaries,
// their concatenated text unchanged but for redactions. An event wholly
// held back is returned with no seq.
func (x *Execution) Emit(ctx context.Context, typ protocol.EventType, payload any) (protocol.Envelope, error) {
	e, err := protocol.NewEvent(x.RunID, x.SessionID, typ, payload)
	if err != nil {
		return e, err
	}
	if e.Terminal {
		return e, protocol.Errorf(protocol.CodeBadRequest, "drivers must not emit terminal events (%s)", typ)
	}
	switch typ {
	case protocol.EventTokenDelta, protocol.EventReasoningDelta, protocol.EventToolStarted, protocol.EventToolUpdated, protocol.EventToolDone:
		x.streamed.Store(true)
	}
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	if id, stream, text, ok := streamKey(&e, payload); ok {
		if typ == protocol.EventTokenDelta {
			x.answer.add(id, text)
		}
		return x.emitStreamed(ctx, e, id, stream, text)
	}
	if err := x.flushHeld(ctx); err != nil {
		return protocol.Envelope{}, err
	}
	out, err := x.Append(ctx, e)
	if err == nil && typ == protocol.EventTitleUpdated && x.titled != nil {
		if p, perr := protocol.DecodePayload[protocol.TitleUpdatedPayload](&out); perr == nil && p.Title != "" {
			x.titled(ctx, p.Title)
		}
	}
	return out, err
}

// Append is the executor's: it journals e as it is (terminal events
// included, nothing held back), retrying a transient error with the same
// idempotency key (pauses from 50 ms doubling to 800 ms) for up to
// ExecutionOptions.AppendRetry. Drivers use Emit.
func (x *Execution) Append(ctx context.Context, e protocol.Envelope) (protocol.Envelope, error) {
	e.CreatedAt = protocol.Timestamp(x.now())
	key := x.keyBase + strconv.FormatUint(x.keySeq.Add(1), 10)
	retryFor := x.retryFor
	if retryFor <= 0 {
		retryFor = DefaultAppendRetry
	}
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		out, err := x.log.Append(ctx, e, key)
		if err == nil {
			x.mu.Lock()
			if out.Seq > x.lastSeq {
				x.lastSeq = out.Seq
			}
			x.mu.Unlock()
			return out, nil
		}
		pause := time.Duration(50<<min(attempt, 4)) * time.Millisecond
		if !Transient(err) || time.Now().Add(pause).After(deadline) {
			return out, err
		}
		if ctxsleep.Sleep(ctx, pause) != nil {
			return out, err
		}
	}
}

// DefaultAppendRetry is ExecutionOptions.AppendRetry's default.
const DefaultAppendRetry = 1600 * time.Millisecond

// Transient reports whether an append error may go away on retry (Append
// retries those for a while; the executor retries a terminal event's for
// longer).
func Transient(err error) bool {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe), errors.Is(err, journal.ErrTerminal), errors.Is(err, journal.ErrNotFound),
		errors.Is(err, journal.ErrClosed), errors.Is(err, context.Canceled):
		return false
	}
	return true
}
