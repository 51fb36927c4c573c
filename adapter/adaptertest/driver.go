package adaptertest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// The scripts of the suite's driver: the first word of a run's message.
const (
	ScriptDone     = "done"     // one token.delta "ok", then success
	ScriptFail     = "fail"     // a *driver.Error provider_error
	ScriptBlock    = "block"    // waits until cancelled; each steer is written as progress "steered: <text>"
	ScriptDeaf     = "deaf"     // waits until cancelled and reads no steer
	ScriptApproval = "approval" // asks one approval (allow, deny), then a token "approval: <choice>" and success
	ScriptClarify  = "clarify"  // asks one clarify question (no timeout), then a token "clarify: <response>" and success
	ScriptExpire   = "expire"   // asks one clarify question that expires at once, then waits until cancelled
)

// Driver names under which a harness registers the suite's drivers.
const (
	DriverName        = "conformance"         // the default driver: steers
	DriverNameNoSteer = "conformance-nosteer" // the same scripts, without the Steerer capability
)

// Ready is the text of the progress event every script writes first, once
// its executor runs it: controls sent after it reach a live executor.
const Ready = "script: ready"

// Approval choices the approval script offers.
var approvalChoices = []string{"allow", "deny"}

// expireAfter is the expire script's clarify timeout.
const expireAfter = 10 * time.Millisecond

// Started is a run the suite's driver began executing.
type Started struct {
	RunID, SessionID, Message, Source string
}

// Driver is the suite's scripted driver (see the Script constants). It
// records each run it executes, so the suite can find runs the adapter
// started on its own (a drained queue, a goal). It is safe for concurrent
// use; one Driver serves every executor of a harness.
type Driver struct {
	steers bool
	runs   *record
}

// record is the runs the suite's drivers executed; changed is closed and
// replaced on every addition.
type record struct {
	mu      sync.Mutex
	runs    []Started
	changed chan struct{}
}

func newDrivers() (map[string]driver.Driver, *record) {
	rec := &record{changed: make(chan struct{})}
	return map[string]driver.Driver{
		DriverName:        &Driver{steers: true, runs: rec},
		DriverNameNoSteer: &Driver{runs: rec},
	}, rec
}

func (r *record) add(s Started) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, s)
	close(r.changed)
	r.changed = make(chan struct{})
}

// wait returns the first recorded run for which match is true, waiting
// until ctx ends.
func (r *record) wait(ctx context.Context, match func(Started) bool) (Started, bool) {
	for {
		r.mu.Lock()
		for _, s := range r.runs {
			if match(s) {
				r.mu.Unlock()
				return s, true
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return Started{}, false
		case <-ch:
		}
	}
}

// Steers implements driver.Steerer.
func (d *Driver) Steers() bool { return d.steers }

// Validate implements driver.Validator: the message must name a script.
func (d *Driver) Validate(req protocol.StartRunRequest) error {
	switch script(req.Message) {
	case ScriptDone, ScriptFail, ScriptBlock, ScriptDeaf, ScriptApproval, ScriptClarify, ScriptExpire:
		return nil
	}
	return protocol.Errorf(protocol.CodeBadRequest, "message: no conformance script %q", script(req.Message))
}

// JudgeGoal implements driver.GoalJudge: a goal whose text holds
// "goal-once" continues for one run and is then done; any other goal gets
// no decision (it does not continue on its own).
func (d *Driver) JudgeGoal(_ context.Context, g protocol.GoalUpdatedPayload, _ string) (driver.Verdict, error) {
	switch {
	case !strings.Contains(g.Text, "goal-once"):
		return driver.Verdict{Kind: driver.VerdictHold}, nil
	case g.Turns >= 1:
		return driver.Verdict{Kind: driver.VerdictDone, Reason: "one run made"}, nil
	}
	return driver.Verdict{Kind: driver.VerdictContinue, Reason: "no run made yet"}, nil
}

func script(message string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(message), " ")
	return w
}

// Execute implements driver.Driver.
func (d *Driver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	d.runs.add(Started{RunID: x.RunID, SessionID: x.SessionID, Message: x.Request.Message, Source: x.Request.Source})
	if _, err := x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: Ready}); err != nil {
		return nil, err
	}
	answer := ""
	switch script(x.Request.Message) {
	case ScriptDone:
		answer = "ok"
	case ScriptFail:
		return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: "scripted failure"}
	case ScriptBlock:
		return nil, d.block(ctx, x, true)
	case ScriptDeaf:
		return nil, d.block(ctx, x, false)
	case ScriptApproval:
		choice, err := x.Approval(ctx, protocol.ApprovalRequestedPayload{ApprovalID: "a_" + x.RunID,
			Summary: "a scripted approval", Choices: approvalChoices})
		if err != nil {
			return nil, err
		}
		answer = "approval: " + choice
	case ScriptClarify:
		resp, _, err := x.Clarify(ctx, protocol.ClarifyRequestedPayload{ClarifyID: "c_" + x.RunID,
			Question: "a scripted question", Choices: []string{}}, 0)
		if err != nil {
			return nil, err
		}
		answer = "clarify: " + resp
	case ScriptExpire:
		if _, _, err := x.Clarify(ctx, protocol.ClarifyRequestedPayload{ClarifyID: "c_" + x.RunID,
			Question: "a question that expires", Choices: []string{}}, expireAfter); err != nil {
			return nil, err
		}
		return nil, d.block(ctx, x, false)
	}
	if _, err := x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: answer}); err != nil {
		return nil, err
	}
	return &protocol.Usage{OutputTokens: 1, Model: "conformance", Provider: DriverName}, nil
}

// block waits until ctx ends, writing each steer as progress when read is
// set.
func (d *Driver) block(ctx context.Context, x *driver.Execution, read bool) error {
	steer := x.Steering()
	if !read {
		steer = nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case text := <-steer:
			if _, err := x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: "steered: " + text}); err != nil {
				return err
			}
		}
	}
}
