package driver

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/runhub/runhub/protocol"
)

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
	return x.respond(x.slot(approval), id, answer, true)
}

// Settle resolves the pending prompt with id with the answer the runtime
// itself took (another of its clients answered it): as Resolve, but an
// approval's choice is recorded as made even when the prompt did not
// offer it.
func (x *Execution) Settle(approval bool, id, answer string) (string, error) {
	return x.respond(x.slot(approval), id, answer, false)
}

func (x *Execution) slot(approval bool) **prompt {
	if approval {
		return &x.approval
	}
	return &x.clarify
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
// With offered, an approval answer outside the prompt's choices is a
// bad_request.
func (x *Execution) respond(slot **prompt, id, answer string, offered bool) (string, error) {
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
	if offered && len(p.choices) > 0 && !slices.Contains(p.choices, answer) {
		return "", &protocol.Error{Code: protocol.CodeBadRequest, Field: "choice",
			Message: "choice: must be one of " + strings.Join(p.choices, ", ")}
	}
	p.done = true
	p.answer <- answer
	return protocol.ResultAccepted, nil
}
