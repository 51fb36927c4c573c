package driver

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
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

	mu         sync.Mutex
	approval   *prompt
	clarify    *prompt
	closed     []*prompt // recently finished prompts, newest last
	cancelling bool
	lastSeq    uint64

	steer chan string // guidance for the running driver (queue mode steer)

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
}

// steerBuffer bounds the guidance waiting for a driver.
const steerBuffer = 16

// NewExecution is the executor's: the execution of run runID in sessionID
// for req, journaling as o says.
func NewExecution(runID, sessionID string, req protocol.StartRunRequest, o ExecutionOptions) *Execution {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Execution{RunID: runID, SessionID: sessionID, Request: req, log: o.Log, now: o.Now, retryFor: o.AppendRetry,
		approvalTimeout: o.ApprovalTimeout, steer: make(chan string, steerBuffer), titled: o.Titled}
}

// Steering delivers guidance sent to the running run (queue mode steer) to
// drivers that declare the Steerer capability.
func (x *Execution) Steering() <-chan string { return x.steer }

// Steer is the executor's: it hands guidance to the driver (Steering) and
// reports false, delivering nothing, when too much guidance is waiting.
func (x *Execution) Steer(text string) bool {
	select {
	case x.steer <- text:
		return true
	default:
		return false
	}
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
	key := x.RunID + "/" + strconv.FormatUint(x.keySeq.Add(1), 10)
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

// prompt is the one pending approval or clarify of an execution: the driver
// waits on answer; the first response wins, later ones are not-active.
type prompt struct {
	id      string
	answer  chan string // capacity 1; written once
	done    bool        // answered, expired or abandoned
	expired bool
	choices []string // the answers an approval accepts (empty: any)
}

// maxClosedPrompts bounds the memory of finished prompt ids per execution.
const maxClosedPrompts = 32

// Approval journals approval.requested, waits for the user's choice (or ctx),
// journals approval.resolved once and returns the choice.
func (x *Execution) Approval(ctx context.Context, req protocol.ApprovalRequestedPayload) (string, error) {
	a, err := x.AskApproval(ctx, req)
	if err != nil {
		return "", err
	}
	return a.Wait(ctx)
}

// AskApproval journals approval.requested and returns once the prompt is
// pending, so an answer (a user's, or Resolve) given after it returns is
// never not-active. The caller must call Wait on the result.
func (x *Execution) AskApproval(ctx context.Context, req protocol.ApprovalRequestedPayload) (*PendingApproval, error) {
	p := &prompt{id: req.ApprovalID, answer: make(chan string, 1), choices: req.Choices}
	if err := x.open(ctx, &x.approval, p, protocol.EventApprovalReq, req); err != nil {
		return nil, err
	}
	return &PendingApproval{x: x, p: p, req: req}, nil
}

// open makes p the pending prompt of slot and journals its request.
func (x *Execution) open(ctx context.Context, slot **prompt, p *prompt, typ protocol.EventType, req any) error {
	x.mu.Lock()
	*slot = p
	x.mu.Unlock()
	if _, err := x.Emit(ctx, typ, req); err != nil {
		x.clearPrompt(slot, p)
		return err
	}
	return nil
}

// PendingApproval is an approval prompt AskApproval journaled.
type PendingApproval struct {
	x   *Execution
	p   *prompt
	req protocol.ApprovalRequestedPayload
}

// Wait waits for the choice (or ctx), journals approval.resolved once and
// returns the choice. The prompt is closed when Wait returns. With an
// approval timeout (ExecutionOptions.ApprovalTimeout) a prompt nobody answers in
// time expires: approval.resolved is journaled with status expired and
// choice ApprovalExpiredChoice, which Wait returns (the driver goes on as
// denied); an answer after that is answered expired.
func (a *PendingApproval) Wait(ctx context.Context) (string, error) {
	x, p, id := a.x, a.p, a.req.ApprovalID
	defer x.clearPrompt(&x.approval, p)
	var expire <-chan time.Time
	if x.approvalTimeout > 0 {
		t := time.NewTimer(x.approvalTimeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case choice := <-p.answer:
		_, err := x.Emit(ctx, protocol.EventApprovalRes, protocol.ApprovalResolvedPayload{ApprovalID: id, Choice: choice, Status: "resolved"})
		return choice, err
	case <-expire:
		if !x.expire(p) {
			choice := <-p.answer // an answer accepted just before the expiry won
			_, err := x.Emit(ctx, protocol.EventApprovalRes, protocol.ApprovalResolvedPayload{ApprovalID: id, Choice: choice, Status: "resolved"})
			return choice, err
		}
		_, err := x.Emit(ctx, protocol.EventApprovalRes, protocol.ApprovalResolvedPayload{ApprovalID: id, Choice: ApprovalExpiredChoice, Status: "expired"})
		return ApprovalExpiredChoice, err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// ApprovalExpiredChoice is the choice of an approval that expired: deny.
const ApprovalExpiredChoice = "deny"

// expire marks p expired unless an answer was accepted first; it reports
// whether p expired. An answer after it is answered expired.
func (x *Execution) expire(p *prompt) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p.done {
		return false
	}
	p.done, p.expired = true, true
	return true
}

// Clarify journals clarify.requested and waits for the user's response, at
// most timeout (0: no limit). On expiry it journals clarify.resolved with
// status expired and returns ("", false, nil); the driver decides how to go
// on.
func (x *Execution) Clarify(ctx context.Context, req protocol.ClarifyRequestedPayload, timeout time.Duration) (string, bool, error) {
	c, err := x.AskClarify(ctx, req)
	if err != nil {
		return "", false, err
	}
	return c.Wait(ctx, timeout)
}

// AskClarify journals clarify.requested and returns once the prompt is
// pending (see AskApproval). The caller must call Wait on the result.
func (x *Execution) AskClarify(ctx context.Context, req protocol.ClarifyRequestedPayload) (*PendingClarify, error) {
	p := &prompt{id: req.ClarifyID, answer: make(chan string, 1)}
	if err := x.open(ctx, &x.clarify, p, protocol.EventClarifyReq, req); err != nil {
		return nil, err
	}
	return &PendingClarify{x: x, p: p, req: req}, nil
}

// PendingClarify is a clarify prompt AskClarify journaled.
type PendingClarify struct {
	x   *Execution
	p   *prompt
	req protocol.ClarifyRequestedPayload
}

// Wait waits for the response, at most timeout (0: no limit), as Clarify
// does. The prompt is closed when Wait returns.
func (c *PendingClarify) Wait(ctx context.Context, timeout time.Duration) (string, bool, error) {
	x, p, id := c.x, c.p, c.req.ClarifyID
	defer x.clearPrompt(&x.clarify, p)
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case resp := <-p.answer:
		_, err := x.Emit(ctx, protocol.EventClarifyRes, protocol.ClarifyResolvedPayload{ClarifyID: id, Status: "resolved", Response: resp})
		return resp, true, err
	case <-expire:
		if !x.expire(p) { // a response accepted just before the expiry won
			resp := <-p.answer
			_, err := x.Emit(ctx, protocol.EventClarifyRes, protocol.ClarifyResolvedPayload{ClarifyID: id, Status: "resolved", Response: resp})
			return resp, true, err
		}
		_, err := x.Emit(ctx, protocol.EventClarifyRes, protocol.ClarifyResolvedPayload{ClarifyID: id, Status: "expired"})
		return "", false, err
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
}

// Resolve answers the pending approval (approval true) or clarify prompt
// with id on the runtime's behalf, for drivers whose runtime settled the
// prompt itself (answered from another of its clients, say). It is
// delivered like a user's answer: the first answer wins and the waiting
// Approval or Clarify journals the prompt's one resolution. It returns the
// control status (accepted, not-active, expired; not-active too once the
// run is cancelling). The executor delivers a user's answer through it.
func (x *Execution) Resolve(approval bool, id, answer string) (string, error) {
	slot := &x.clarify
	if approval {
		slot = &x.approval
	}
	return x.respond(slot, id, answer)
}

func (x *Execution) clearPrompt(slot **prompt, p *prompt) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p.done = true
	if *slot == p {
		*slot = nil
	}
	x.closed = append(x.closed, p)
	if len(x.closed) > maxClosedPrompts {
		x.closed = x.closed[1:]
	}
}

// respond delivers a response to the pending prompt with id: accepted once,
// then not-active (or expired when it timed out).
// An approval answer outside the prompt's choices is a bad_request.
func (x *Execution) respond(slot **prompt, id, answer string) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p := *slot
	if p == nil || p.id != id {
		for _, c := range x.closed {
			if c.id == id && c.expired {
				return protocol.ResultExpired, nil
			}
		}
		return protocol.ResultNotActive, nil
	}
	if p.expired {
		return protocol.ResultExpired, nil
	}
	if p.done || x.cancelling {
		return protocol.ResultNotActive, nil
	}
	if len(p.choices) > 0 && !slices.Contains(p.choices, answer) {
		return "", &protocol.Error{Code: protocol.CodeBadRequest, Field: "choice",
			Message: "choice: must be one of " + strings.Join(p.choices, ", ")}
	}
	p.done = true
	p.answer <- answer
	return protocol.ResultAccepted, nil
}
