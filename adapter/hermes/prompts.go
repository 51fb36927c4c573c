package hermes

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/protocol"
)

// kindApproval is the kind of prompt the driver relays (it relays no
// clarify: see clarifyRequest).
const kindApproval = "approval"

// prompt is one approval Hermes asked. A worker goroutine asks it through
// the Execution (which journals the request and its one resolution) and
// posts the answer upstream, while the run goes on reading the event
// stream.
type prompt struct {
	kind     string
	id       string // runhub's approval_id
	upID     string // Hermes' request_id (servers after 0.18.x send one)
	approval protocol.ApprovalRequestedPayload
	// settled is set when Hermes resolved the prompt on its own (answered
	// by another of its clients): the answer is not posted back.
	settled atomic.Bool
}

// promptResult is a worker's end: err is fatal for the run.
type promptResult struct {
	p   *prompt
	err error
}

// approvalRequest relays an approval.request as Hermes sent it: its
// choices are Hermes' own (0.18.x always sends once, session, always and
// deny), and its risk is Hermes' when it sends one. Hermes' approval
// events carry no risk, and a server might send no choices: the prompt
// then says so (risk "" or choices [], named in unknown) rather than
// inventing them.
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
	req := protocol.ApprovalRequestedPayload{ApprovalID: fmt.Sprintf("a%d", r.promptN),
		Summary: protocol.Truncate(summary, 2000), Risk: protocol.Truncate(ev.str("risk"), 256), Choices: ev.strs("choices")}
	if req.Risk == "" {
		req.Unknown = append(req.Unknown, protocol.PromptRisk)
	}
	if len(req.Choices) == 0 {
		req.Choices = []string{}
		req.Unknown = append(req.Unknown, protocol.PromptChoices)
	}
	p := &prompt{kind: kindApproval, id: req.ApprovalID, upID: ev.str("request_id"), approval: req}
	return r.ask(ctx, p)
}

// clarifyRequest handles a clarify.request, which runhub cannot answer:
// Hermes' runs API has no clarify endpoint (0.18.x: no POST
// /v1/runs/{id}/clarify; its capabilities never report one, so a Hermes
// profile lacks clarify and a user's answer would be refused
// unsupported). Such a question is not asked of the user and nothing is
// ever posted for it: it is journaled as progress, so the transcript
// shows what Hermes asked, and Hermes settles it on its own.
func (r *run) clarifyRequest(ctx context.Context, ev event) error {
	question := ev.str("question")
	if question == "" { // the form variant: {questions: [{prompt|question}]}
		var qs []struct {
			Prompt   string `json:"prompt"`
			Question string `json:"question"`
		}
		if err := json.Unmarshal(ev["questions"], &qs); err == nil && len(qs) > 0 {
			question = cmp.Or(qs[0].Prompt, qs[0].Question)
		}
	}
	r.log.Warn("Hermes asked a clarify question, which its runs API gives no way to answer; it is not relayed")
	r.newMessage = true
	return r.progress(ctx, "Hermes asked a question this server gives no way to answer, so it was not relayed: "+
		protocol.Truncate(cmp.Or(question, "(no question text)"), 2000))
}

// ask journals p's request and starts a worker waiting for its answer, or
// queues p behind the prompt being asked: Hermes 0.18.x resolves the
// oldest pending approval of a run when an answer names no request_id
// (resolve_gateway_approval), so its approvals are answered one at a time,
// in the order Hermes asked them. The request is journaled before ask
// returns, so Hermes settling the prompt in its next event (see
// upstreamResolved) finds it pending.
func (r *run) ask(ctx context.Context, p *prompt) error {
	if r.active != nil {
		r.waiting = append(r.waiting, p)
		return nil
	}
	a, err := r.x.AskApproval(ctx, p.approval)
	if err != nil {
		return err
	}
	r.work(p, func() error { return r.awaitApproval(p, a) })
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

// upstreamResolved handles approval.responded. For a prompt runhub
// answered this is the echo of its own POST; for one still waiting on the
// user, Hermes settled it on its own, so the runhub prompt is resolved
// with Hermes' choice as Hermes made it, offered or not (exactly one
// resolution either way: the Execution takes the first answer only), and
// the run waits for it to be journaled before it maps what follows.
func (r *run) upstreamResolved(ctx context.Context, upID, choice string) outcome {
	for i, p := range r.waiting { // never asked: drop it
		if upID != "" && p.upID == upID {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			return outcome{}
		}
	}
	p := r.active
	if p == nil || (upID != "" && p.upID != "" && upID != p.upID) {
		return outcome{}
	}
	p.settled.Store(true)
	status, err := r.x.Settle(true, p.id, protocol.Truncate(choice, 256))
	r.log.Debug("Hermes settled a prompt", "kind", p.kind, "status", status, "err", err)
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
	case s == http.StatusBadRequest && p.kind == kindApproval:
		// A choice Hermes does not take (a prompt whose choices Hermes did
		// not say): the run goes on; Hermes' own approval timeout ends the
		// wait (as denied).
		_, err := r.x.Emit(r.bgCtx, protocol.EventProgress, protocol.ProgressPayload{
			Text: "Hermes refused this approval answer: " + protocol.Truncate(r.c.scrub(err.Error()), 300)})
		if r.bgCtx.Err() != nil {
			return nil
		}
		return err
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return &driver.Error{Code: CodeAuth, Message: fmt.Sprintf("Hermes refused the API key for the %s answer (%v)", p.kind, err)}
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: fmt.Sprintf("could not deliver the %s answer to Hermes: %v", p.kind, err)}
}
