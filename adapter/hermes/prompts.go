package hermes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/protocol"
)

// Prompt kinds.
const (
	kindApproval = "approval"
	kindClarify  = "clarify"
)

// defaultChoices are offered when an approval.request names none.
var defaultChoices = []string{"once", "session", "always", "deny"}

// prompt is one approval or clarify question Hermes asked. A worker
// goroutine asks it through the Execution (which journals the request and
// its one resolution) and posts the answer upstream, while the run goes on
// reading the event stream.
type prompt struct {
	kind     string
	id       string // runhub's approval_id / clarify_id
	upID     string // Hermes' request_id / clarify_id
	multi    bool   // a clarify form (questions): answered as responses
	approval protocol.ApprovalRequestedPayload
	clarify  protocol.ClarifyRequestedPayload
	// settled is set when Hermes resolved the prompt on its own (answered
	// by another of its clients, timed out): the answer is not posted back.
	settled atomic.Bool
}

// promptResult is a worker's end: err is fatal for the run.
type promptResult struct {
	p   *prompt
	err error
}

func (r *run) approvalRequest(ctx context.Context, ev event) error {
	if err := r.closeReasoning(ctx); err != nil {
		return err
	}
	r.promptN++
	r.newMessage = true
	summary := ev.str("description")
	if cmd := ev.str("command"); cmd != "" {
		if summary != "" {
			summary += ": "
		}
		summary += cmd
	}
	if summary == "" {
		summary = "Hermes asks for approval"
	}
	choices := ev.strs("choices")
	if len(choices) == 0 {
		choices = defaultChoices
	}
	p := &prompt{kind: kindApproval, id: fmt.Sprintf("a%d", r.promptN), upID: ev.str("request_id"),
		approval: protocol.ApprovalRequestedPayload{Summary: protocol.Truncate(summary, 2000), Risk: "high", Choices: choices}}
	p.approval.ApprovalID = p.id
	return r.ask(ctx, p)
}

func (r *run) clarifyRequest(ctx context.Context, ev event) error {
	if err := r.closeReasoning(ctx); err != nil {
		return err
	}
	r.promptN++
	r.newMessage = true
	question, choices, multi := ev.str("question"), ev.strs("choices"), false
	if question == "" { // the form variant: {questions: [{prompt|question, choices}]}
		var qs []struct {
			Prompt   string `json:"prompt"`
			Question string `json:"question"`
			Choices  []any  `json:"choices"`
		}
		if err := json.Unmarshal(ev["questions"], &qs); err == nil && len(qs) > 0 {
			question, multi = qs[0].Prompt, true
			if question == "" {
				question = qs[0].Question
			}
			for _, c := range qs[0].Choices {
				if s, ok := c.(string); ok && s != "" {
					choices = append(choices, s)
				}
			}
		}
	}
	if question == "" {
		question = "Hermes has a question"
	}
	mode := "text"
	if len(choices) > 0 {
		mode = "choice"
	} else {
		choices = []string{}
	}
	p := &prompt{kind: kindClarify, id: fmt.Sprintf("c%d", r.promptN), upID: ev.str("clarify_id"), multi: multi,
		clarify: protocol.ClarifyRequestedPayload{Question: protocol.Truncate(question, 2000), Choices: choices, InputMode: mode}}
	p.clarify.ClarifyID = p.id
	if p.upID == "" {
		r.log.Warn("a Hermes clarify.request without clarify_id; its answer cannot be delivered")
	}
	return r.ask(ctx, p)
}

// ask journals p's request and starts a worker waiting for its answer, or
// queues p behind the prompt being asked. The request is journaled before
// ask returns, so Hermes settling the prompt in its next event (see
// upstreamResolved) finds it pending.
func (r *run) ask(ctx context.Context, p *prompt) error {
	if r.active != nil {
		r.waiting = append(r.waiting, p)
		return nil
	}
	var wait func() error
	if p.kind == kindApproval {
		a, err := r.x.AskApproval(ctx, p.approval)
		if err != nil {
			return err
		}
		wait = func() error { return r.awaitApproval(p, a) }
	} else {
		c, err := r.x.AskClarify(ctx, p.clarify)
		if err != nil {
			return err
		}
		wait = func() error { return r.awaitClarify(p, c) }
	}
	r.work(p, wait)
	return nil
}

// work makes p the prompt being asked and starts its worker, wait.
func (r *run) work(p *prompt, wait func() error) {
	r.active = p
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		err := wait()
		select {
		case r.results <- promptResult{p: p, err: err}:
		case <-r.bgCtx.Done():
		}
	}()
}

// promptDone takes a worker's end and asks the next waiting prompt.
func (r *run) promptDone(ctx context.Context, res promptResult) outcome {
	if res.p == r.active {
		r.active = nil
	}
	if res.err != nil {
		if ctx.Err() != nil {
			return finalErr(ctx.Err())
		}
		return finalErr(r.giveUp(ctx, res.err))
	}
	if r.active == nil && len(r.waiting) > 0 {
		next := r.waiting[0]
		r.waiting = r.waiting[1:]
		if err := r.ask(ctx, next); err != nil {
			return finalErr(err)
		}
	}
	return outcome{}
}

// upstreamResolved handles approval.responded and clarify.retired /
// clarify.responded. For a prompt runhub answered this is the echo of its
// own POST; for one still waiting on the user, Hermes settled it on its
// own, so the runhub prompt is resolved with Hermes' answer (exactly one
// resolution either way: the Execution takes the first answer only), and
// the run waits for it to be journaled before it maps what follows.
func (r *run) upstreamResolved(ctx context.Context, kind, upID, choice string) outcome {
	for i, p := range r.waiting { // never asked: drop it
		if p.kind == kind && upID != "" && p.upID == upID {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			return outcome{}
		}
	}
	p := r.active
	if p == nil || p.kind != kind || (upID != "" && p.upID != "" && upID != p.upID) {
		return outcome{}
	}
	p.settled.Store(true)
	if kind == kindApproval && choice == "" {
		choice = "deny"
	}
	if kind == kindApproval && !slices.Contains(p.approval.Choices, choice) {
		// Hermes took a choice runhub did not offer: record the nearest one.
		switch {
		case choice != "deny" && slices.Contains(p.approval.Choices, "once"):
			choice = "once"
		case slices.Contains(p.approval.Choices, "deny"):
			choice = "deny"
		default:
			choice = p.approval.Choices[0]
		}
	}
	status, err := r.x.Resolve(kind == kindApproval, p.id, choice)
	r.log.Debug("Hermes settled a prompt", "kind", kind, "status", status, "err", err)
	if status != protocol.ResultAccepted {
		return outcome{} // the user's answer came first; its worker goes on
	}
	for {
		select {
		case <-ctx.Done():
			return finalErr(ctx.Err())
		case res := <-r.results:
			if o := r.promptDone(ctx, res); o.final || res.p == p {
				return o
			}
		}
	}
}

// awaitApproval waits for the user's choice and posts it to Hermes.
func (r *run) awaitApproval(p *prompt, a *driver.PendingApproval) error {
	choice, err := a.Wait(r.bgCtx)
	if err != nil {
		if r.bgCtx.Err() != nil {
			return nil // the run is ending
		}
		return err
	}
	if p.settled.Load() {
		return nil
	}
	body := map[string]string{"choice": choice}
	if p.upID != "" {
		body["request_id"] = p.upID
	}
	return r.deliver(p, "/approval", body)
}

// awaitClarify waits for the user (at most ClarifyTimeout) and posts the
// response to Hermes; an expired question is answered with an empty
// response so the Hermes agent goes on.
func (r *run) awaitClarify(p *prompt, c *driver.PendingClarify) error {
	resp, _, err := c.Wait(r.bgCtx, r.cfg.ClarifyTimeout)
	if err != nil {
		if r.bgCtx.Err() != nil {
			return nil
		}
		return err
	}
	if p.settled.Load() || p.upID == "" {
		return nil
	}
	body := map[string]any{"clarify_id": p.upID, "response": resp}
	if p.multi {
		body["responses"] = []string{resp}
	}
	return r.deliver(p, "/clarify", body)
}

// deliver posts an answer to Hermes, retrying transient failures. A 409
// (Hermes no longer waits for it) is journaled as progress; other failures
// end the run, since the Hermes agent would wait forever.
func (r *run) deliver(p *prompt, suffix string, body any) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			if err := ctxsleep.Sleep(r.bgCtx, time.Duration(250<<attempt)*time.Millisecond); err != nil {
				return nil
			}
		}
		err = r.c.call(r.bgCtx, http.MethodPost, r.runPath(suffix), body, nil, nil)
		if err == nil || r.bgCtx.Err() != nil {
			return nil
		}
		if !retryable(err) && statusOf(err) < 500 {
			break
		}
	}
	r.log.Warn("deliver an answer to Hermes", "kind", p.kind, "err", err)
	switch s := statusOf(err); {
	case s == http.StatusConflict:
		_, err := r.x.Emit(r.bgCtx, protocol.EventProgress, protocol.ProgressPayload{
			Text: fmt.Sprintf("Hermes no longer waits for this %s (it was answered elsewhere or timed out)", p.kind)})
		if r.bgCtx.Err() != nil {
			return nil
		}
		return err
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return &driver.Error{Code: CodeAuth, Message: fmt.Sprintf("Hermes refused the API key for the %s answer (%v)", p.kind, err)}
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: fmt.Sprintf("could not deliver the %s answer to Hermes: %v", p.kind, err)}
}
