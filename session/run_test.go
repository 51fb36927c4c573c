package session_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// step is one event of a scripted run.
type step struct {
	typ     protocol.EventType
	payload any
}

// ev builds event seq of run rid in session sid, created at seq seconds
// after a fixed epoch.
func ev(t *testing.T, rid string, seq uint64, typ protocol.EventType, payload any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent(rid, "s1", typ, payload)
	if err != nil {
		t.Fatalf("NewEvent(%s): %v", typ, err)
	}
	if err := protocol.ValidateEvent(&e); err != nil {
		t.Fatalf("test event %s %s is invalid: %v", typ, e.Payload, err)
	}
	e.Seq = seq
	e.EventID = protocol.EventID(rid, seq)
	e.CreatedAt = 1778750000 + float64(seq)
	return e
}

// play applies steps to a fresh run r1 and fails on any error.
func play(t *testing.T, steps ...step) session.Run {
	t.Helper()
	r := session.NewRun("r1", "s1")
	for _, s := range steps {
		apply(t, &r, s)
	}
	return r
}

func apply(t *testing.T, r *session.Run, s step) {
	t.Helper()
	e := ev(t, r.RunID, r.LastSeq+1, s.typ, s.payload)
	if err := r.Apply(&e); err != nil {
		t.Fatalf("Apply(%s %s): %v", e.Type, e.Payload, err)
	}
}

// Event steps with the minimum payloads of protocol.md.
var (
	started = step{protocol.EventRunStarted, protocol.RunStartedPayload{Message: "fix the build", Profile: "default",
		Model: "m", Provider: "p", Workspace: "/w", Toolsets: []string{"shell"}, Source: "user"}}
	token     = step{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "w0 "}}
	reasoning = step{protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b1", Text: "hmm"}}
	toolStart = step{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "shell", Args: json.RawMessage(`{"cmd":"make"}`)}}
	toolOut   = step{protocol.EventToolUpdated, protocol.ToolUpdatedPayload{ToolCallID: "t1", Stream: "stdout", Text: "ok\n"}}
	toolDone  = step{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t1", Status: "ok", DurationMS: 5, Result: json.RawMessage(`"ok"`)}}
	toolFail  = step{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t1", Status: "error", DurationMS: 5, Error: true, Result: json.RawMessage(`"exit 2"`)}}
	askA1     = step{protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a1", Summary: "run make", Risk: "low",
		Choices: []string{"once", "session", "always", "deny"}}}
	resolveA1 = step{protocol.EventApprovalRes, protocol.ApprovalResolvedPayload{ApprovalID: "a1", Choice: "once", Status: "resolved"}}
	askQ1     = step{protocol.EventClarifyReq, protocol.ClarifyRequestedPayload{ClarifyID: "q1", Question: "Which target?",
		Choices: []string{"all", "test"}, InputMode: "choice"}}
	resolveQ1 = step{protocol.EventClarifyRes, protocol.ClarifyResolvedPayload{ClarifyID: "q1", Status: "resolved", Response: "all"}}
	done      = step{protocol.EventDone, protocol.DonePayload{Status: "completed", Usage: &protocol.Usage{InputTokens: 10, OutputTokens: 3, Model: "m", Provider: "p", DurationMS: 900}}}
	cancelled = step{protocol.EventCancelled, protocol.CancelledPayload{Reason: "user", Partial: true}}
)

func status(s protocol.Status, controls ...string) step {
	if controls == nil {
		controls = []string{}
	}
	return step{protocol.EventStatus, protocol.StatusPayload{Status: s, Controls: controls}}
}

func errorEvent(code, msg string, terminal bool) step {
	return step{protocol.EventError, protocol.ErrorPayload{Code: code, Message: msg, Terminal: terminal}}
}

func TestNewRun(t *testing.T) {
	r := session.NewRun("r1", "s1")
	if r.Status != protocol.StatusQueued || r.Terminal || r.LastSeq != 0 || r.RunID != "r1" || r.SessionID != "s1" {
		t.Errorf("NewRun = %+v", r)
	}
	if got := r.Controls(); !slices.Equal(got, []string{"cancel"}) {
		t.Errorf("Controls() of a queued run = %v, want [cancel]", got)
	}
}

// Every run status of protocol.md, reached through Apply.
func TestRun_ApplyStatuses(t *testing.T) {
	tests := []struct {
		name          string
		steps         []step
		status        protocol.Status
		terminal      bool
		errorCode     string
		controls      []string
		progress      string
		approval      string // pending approval id
		clarify       string // pending clarify id
		streamedWants bool
	}{
		{name: "queued (no events)", status: "queued", controls: []string{"cancel"}},
		{name: "queued (status event)", steps: []step{status("queued", "cancel")}, status: "queued", controls: []string{"cancel"}},
		{name: "running", steps: []step{started}, status: "running", controls: []string{"cancel"}, progress: "started"},
		{name: "running after queued", steps: []step{status("queued"), started, token}, status: "running", controls: []string{"cancel"}, progress: "writing", streamedWants: true},
		{name: "running (status event)", steps: []step{status("running", "cancel")}, status: "running", controls: []string{"cancel"}},
		{name: "awaiting_approval", steps: []step{started, askA1}, status: "awaiting_approval",
			controls: []string{"cancel", "approve"}, progress: "approval: run make", approval: "a1"},
		{name: "awaiting_clarify", steps: []step{started, askQ1}, status: "awaiting_clarify",
			controls: []string{"cancel", "clarify"}, progress: "question: Which target?", clarify: "q1"},
		{name: "paused", steps: []step{started, status("paused", "cancel")}, status: "paused", controls: []string{"cancel"}, progress: "started"},
		{name: "cancelling", steps: []step{started, token, status("cancelling")}, status: "cancelling", controls: []string{},
			progress: "writing", streamedWants: true},
		{name: "cancelled", steps: []step{started, token, status("cancelling"), cancelled}, status: "cancelled", terminal: true,
			controls: []string{}, progress: "cancelled: user", streamedWants: true},
		{name: "cancelled while queued", steps: []step{cancelled}, status: "cancelled", terminal: true, controls: []string{}, progress: "cancelled: user"},
		{name: "failed", steps: []step{started, errorEvent("provider_error", "upstream 502", true)}, status: "failed", terminal: true,
			errorCode: "provider_error", controls: []string{}, progress: "failed: upstream 502"},
		{name: "failed (internal)", steps: []step{started, errorEvent("internal", "boom", true)}, status: "failed", terminal: true,
			errorCode: "internal", controls: []string{}, progress: "failed: boom"},
		{name: "completed", steps: []step{started, token, token, done}, status: "completed", terminal: true,
			controls: []string{}, progress: "completed", streamedWants: true},
		{name: "expired", steps: []step{started, askA1, errorEvent("timeout", "no answer", true)}, status: "expired", terminal: true,
			errorCode: "timeout", controls: []string{}, progress: "timed out: no answer"},
		{name: "interrupted", steps: []step{started, token, errorEvent("interrupted", "hub restarted", true)}, status: "interrupted", terminal: true,
			errorCode: "interrupted", controls: []string{}, progress: "interrupted: hub restarted", streamedWants: true},
		{name: "interrupted while queued", steps: []step{errorEvent("interrupted", "runner lease expired", true)}, status: "interrupted", terminal: true,
			errorCode: "interrupted", controls: []string{}, progress: "interrupted: runner lease expired"},
		{name: "non-terminal error", steps: []step{started, errorEvent("provider_error", "retrying", false)}, status: "running",
			controls: []string{"cancel"}, progress: "error: retrying"},
	}
	seen := map[protocol.Status]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := play(t, tt.steps...)
			seen[r.Status] = true
			if r.Status != tt.status {
				t.Errorf("Status = %q, want %q", r.Status, tt.status)
			}
			if r.Terminal != tt.terminal {
				t.Errorf("Terminal = %v, want %v", r.Terminal, tt.terminal)
			}
			wantTS := protocol.Status("")
			if tt.terminal {
				wantTS = tt.status
			}
			if r.TerminalState != wantTS {
				t.Errorf("TerminalState = %q, want %q", r.TerminalState, wantTS)
			}
			if r.ErrorCode != tt.errorCode {
				t.Errorf("ErrorCode = %q, want %q", r.ErrorCode, tt.errorCode)
			}
			if got := r.Controls(); !slices.Equal(got, tt.controls) || got == nil {
				t.Errorf("Controls() = %#v, want %#v", got, tt.controls)
			}
			if r.Progress != tt.progress {
				t.Errorf("Progress = %q, want %q", r.Progress, tt.progress)
			}
			if got := pendingApproval(r); got != tt.approval {
				t.Errorf("pending approval = %q, want %q", got, tt.approval)
			}
			if got := pendingClarify(r); got != tt.clarify {
				t.Errorf("pending clarify = %q, want %q", got, tt.clarify)
			}
			if r.Streamed != tt.streamedWants {
				t.Errorf("Streamed = %v, want %v", r.Streamed, tt.streamedWants)
			}
			if r.LastSeq != uint64(len(tt.steps)) {
				t.Errorf("LastSeq = %d, want %d", r.LastSeq, len(tt.steps))
			}
			rs := r.RunStatus()
			if rs.Status != r.Status || rs.Terminal != r.Terminal || rs.TerminalState != r.TerminalState ||
				rs.PendingApprovalID != tt.approval || rs.PendingClarifyID != tt.clarify || !slices.Equal(rs.ActiveControls, tt.controls) {
				t.Errorf("RunStatus() = %+v disagrees with the run", rs)
			}
		})
	}
	for _, s := range protocol.Statuses() {
		if !seen[s] {
			t.Errorf("no case reaches status %q", s)
		}
	}
}

func pendingApproval(r session.Run) string {
	if r.PendingApproval == nil {
		return ""
	}
	return r.PendingApproval.ApprovalID
}

func pendingClarify(r session.Run) string {
	if r.PendingClarify == nil {
		return ""
	}
	return r.PendingClarify.ClarifyID
}

// The controls and status at every point of a run with both prompts.
func TestRun_ApplyPromptLifecycle(t *testing.T) {
	type want struct {
		status   protocol.Status
		controls []string
		approval string
		clarify  string
	}
	script := []struct {
		step
		want
	}{
		{started, want{"running", []string{"cancel"}, "", ""}},
		{askA1, want{"awaiting_approval", []string{"cancel", "approve"}, "a1", ""}},
		{resolveA1, want{"running", []string{"cancel"}, "", ""}},
		{toolStart, want{"running", []string{"cancel"}, "", ""}},
		{toolDone, want{"running", []string{"cancel"}, "", ""}},
		{askQ1, want{"awaiting_clarify", []string{"cancel", "clarify"}, "", "q1"}},
		{resolveQ1, want{"running", []string{"cancel"}, "", ""}},
		// both prompts at once; resolving one leaves the run waiting on the other
		{askA1, want{"awaiting_approval", []string{"cancel", "approve"}, "a1", ""}},
		{askQ1, want{"awaiting_clarify", []string{"cancel", "approve", "clarify"}, "a1", "q1"}},
		{resolveQ1, want{"awaiting_approval", []string{"cancel", "approve"}, "a1", ""}},
		{askQ1, want{"awaiting_clarify", []string{"cancel", "approve", "clarify"}, "a1", "q1"}},
		{resolveA1, want{"awaiting_clarify", []string{"cancel", "clarify"}, "", "q1"}},
		{resolveQ1, want{"running", []string{"cancel"}, "", ""}},
		{token, want{"running", []string{"cancel"}, "", ""}},
		{done, want{"completed", []string{}, "", ""}},
	}
	r := session.NewRun("r1", "s1")
	for i, s := range script {
		apply(t, &r, s.step)
		got := want{r.Status, r.Controls(), pendingApproval(r), pendingClarify(r)}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("after event %d (%s): got %+v, want %+v", i+1, s.typ, got, s.want)
		}
	}
	if r.PendingApproval != nil || r.PendingClarify != nil {
		t.Errorf("prompts pending after the terminal event")
	}
}

func TestRun_ApplyPendingPromptContents(t *testing.T) {
	r := play(t, started, askA1, askQ1)
	wantA := &protocol.PendingApproval{ApprovalID: "a1", Summary: "run make", Risk: "low", Choices: []string{"once", "session", "always", "deny"}}
	wantQ := &protocol.PendingClarify{ClarifyID: "q1", Question: "Which target?", Choices: []string{"all", "test"}, InputMode: "choice"}
	if !reflect.DeepEqual(r.PendingApproval, wantA) {
		t.Errorf("PendingApproval = %+v, want %+v", r.PendingApproval, wantA)
	}
	if !reflect.DeepEqual(r.PendingClarify, wantQ) {
		t.Errorf("PendingClarify = %+v, want %+v", r.PendingClarify, wantQ)
	}
}

// A terminal event clears pending prompts (an expired approval, a cancel
// while a question waits).
func TestRun_ApplyTerminalClearsPrompts(t *testing.T) {
	for _, end := range []step{done, cancelled, errorEvent("timeout", "t", true), errorEvent("interrupted", "i", true), errorEvent("provider_error", "p", true)} {
		r := play(t, started, askA1, askQ1, end)
		if r.PendingApproval != nil || r.PendingClarify != nil || !r.Terminal {
			t.Errorf("after %s: approval %v clarify %v terminal %v", end.typ, r.PendingApproval, r.PendingClarify, r.Terminal)
		}
		if rs := r.RunStatus(); rs.PendingApprovalID != "" || rs.PendingClarifyID != "" {
			t.Errorf("after %s: RunStatus keeps prompt ids: %+v", end.typ, rs)
		}
	}
}

// Prompts asked while the run is being cancelled do not take it out of
// cancelling; neither do their resolutions.
func TestRun_ApplyPromptWhileCancelling(t *testing.T) {
	r := play(t, started, status("cancelling"), askA1)
	if r.Status != protocol.StatusCancelling || pendingApproval(r) != "a1" {
		t.Fatalf("got %q pending %q, want cancelling with a1 pending", r.Status, pendingApproval(r))
	}
	apply(t, &r, askQ1)
	apply(t, &r, resolveA1)
	apply(t, &r, resolveQ1)
	if r.Status != protocol.StatusCancelling {
		t.Errorf("Status = %q after resolutions, want cancelling", r.Status)
	}
	if got := r.Controls(); len(got) != 0 {
		t.Errorf("Controls() while cancelling = %v, want none", got)
	}
	apply(t, &r, cancelled)
	if r.Status != protocol.StatusCancelled {
		t.Errorf("Status = %q, want cancelled", r.Status)
	}
}

func TestRun_ApplyProgress(t *testing.T) {
	tests := []struct {
		step step
		want string
	}{
		{started, "started"},
		{token, "writing"},
		{reasoning, "thinking"},
		{step{protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: "b1", Text: "ok"}}, "thinking"},
		{step{protocol.EventProgress, protocol.ProgressPayload{Text: "reading main.go", ToolCallID: "t1"}}, "reading main.go"},
		{toolStart, "tool shell"},
		{toolDone, "tool done"},
		{toolFail, "tool failed"},
		{askA1, "approval: run make"},
		{askQ1, "question: Which target?"},
		{errorEvent("provider_error", "rate limited", false), "error: rate limited"},
	}
	for _, tt := range tests {
		r := play(t, status("running"), tt.step)
		if r.Progress != tt.want {
			t.Errorf("progress after %s = %q, want %q", tt.step.typ, r.Progress, tt.want)
		}
	}
	if r := play(t, started, askA1, resolveA1); r.Progress != "approval once" {
		t.Errorf("progress after approval.resolved = %q", r.Progress)
	}
	if r := play(t, started, askQ1, resolveQ1); r.Progress != "clarify resolved" {
		t.Errorf("progress after clarify.resolved = %q", r.Progress)
	}
	// Events that are not activity leave the progress text alone.
	for _, s := range []step{toolOut, status("paused"),
		{protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: "t", Source: "model"}},
		{protocol.EventUsageUpdated, protocol.Usage{InputTokens: 1}},
		{protocol.EventQueueUpdated, protocol.QueueUpdatedPayload{Depth: 1, Items: []protocol.QueueItem{{ID: "q", Preview: "p"}}}},
		{protocol.EventGoalUpdated, protocol.GoalUpdatedPayload{State: "active", Text: "g"}},
	} {
		if r := play(t, started, s); r.Progress != "started" {
			t.Errorf("progress after %s = %q, want it unchanged", s.typ, r.Progress)
		}
	}
}

// Progress is short: a long text is cut on a rune boundary.
func TestRun_ApplyProgressIsShort(t *testing.T) {
	for _, text := range []string{strings.Repeat("é", 200), strings.Repeat("a", 119) + "€€€", strings.Repeat("x", 500)} {
		r := play(t, step{protocol.EventProgress, protocol.ProgressPayload{Text: text}})
		if !utf8.ValidString(r.Progress) {
			t.Errorf("progress %q is not valid UTF-8", r.Progress)
		}
		if len(r.Progress) > 120+len("…") || !strings.HasSuffix(r.Progress, "…") {
			t.Errorf("progress of %d bytes = %q", len(text), r.Progress)
		}
		if !strings.HasPrefix(text, strings.TrimSuffix(r.Progress, "…")) {
			t.Errorf("progress %q is not a prefix of the text", r.Progress)
		}
	}
	exact := strings.Repeat("b", 120)
	if r := play(t, step{protocol.EventProgress, protocol.ProgressPayload{Text: exact}}); r.Progress != exact {
		t.Errorf("a 120-byte progress was cut: %q", r.Progress)
	}
}

func TestRun_ApplyTokens(t *testing.T) {
	r := play(t, started, reasoning, token, toolStart, toolOut, toolDone, token, token)
	if r.Tokens != 3 {
		t.Errorf("Tokens = %d, want 3 (token.delta events only)", r.Tokens)
	}
	r = play(t, started, reasoning)
	if r.Tokens != 0 || !r.Streamed {
		t.Errorf("reasoning only: Tokens %d Streamed %v", r.Tokens, r.Streamed)
	}
	r = play(t, started, toolOut)
	if !r.Streamed {
		t.Errorf("tool output did not count as streamed")
	}
	r = play(t, started, status("running"), step{protocol.EventProgress, protocol.ProgressPayload{Text: "x"}})
	if r.Streamed {
		t.Errorf("a run with no output counts as streamed")
	}
}

func TestRun_ApplyUsage(t *testing.T) {
	u1 := protocol.Usage{InputTokens: 10, OutputTokens: 1, Model: "m", Provider: "p", DurationMS: 100}
	u2 := protocol.Usage{InputTokens: 10, OutputTokens: 7, Model: "m", Provider: "p", DurationMS: 800}
	r := play(t, started)
	if r.Usage != nil {
		t.Errorf("Usage = %+v before any usage event", r.Usage)
	}
	apply(t, &r, step{protocol.EventUsageUpdated, u1})
	if r.Usage == nil || *r.Usage != u1 {
		t.Errorf("after usage.updated: %+v", r.Usage)
	}
	apply(t, &r, step{protocol.EventUsageFinal, u2})
	if r.Usage == nil || *r.Usage != u2 {
		t.Errorf("after usage.final: %+v", r.Usage)
	}
	apply(t, &r, step{protocol.EventDone, protocol.DonePayload{Status: "completed"}})
	if r.Usage == nil || *r.Usage != u2 {
		t.Errorf("done without usage replaced the usage: %+v", r.Usage)
	}

	r = play(t, started, step{protocol.EventUsageUpdated, u1}, done)
	if want := *done.payload.(protocol.DonePayload).Usage; r.Usage == nil || *r.Usage != want {
		t.Errorf("done's usage = %+v, want %+v", r.Usage, want)
	}
}

func TestRun_ApplyTitleQueueGoal(t *testing.T) {
	r := play(t, started,
		step{protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: "Fix the build", Source: "model"}},
		step{protocol.EventQueueUpdated, protocol.QueueUpdatedPayload{Depth: 2, Items: []protocol.QueueItem{{ID: "q1", Preview: "a"}, {ID: "q2", Preview: "b"}}}},
		step{protocol.EventGoalUpdated, protocol.GoalUpdatedPayload{State: "active", Text: "green CI", Turns: 2}},
	)
	if r.Title != "Fix the build" {
		t.Errorf("Title = %q", r.Title)
	}
	if r.QueueDepth != 2 {
		t.Errorf("QueueDepth = %d", r.QueueDepth)
	}
	if want := (protocol.GoalUpdatedPayload{State: "active", Text: "green CI", Turns: 2}); r.Goal == nil || *r.Goal != want {
		t.Errorf("Goal = %+v", r.Goal)
	}
	if r.Message != "fix the build" || r.Source != "user" {
		t.Errorf("Message %q Source %q from run.started", r.Message, r.Source)
	}
	apply(t, &r, step{protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: "Fixed", Source: "user"}})
	apply(t, &r, step{protocol.EventQueueUpdated, protocol.QueueUpdatedPayload{Depth: 0, Items: []protocol.QueueItem{}}})
	apply(t, &r, step{protocol.EventGoalUpdated, protocol.GoalUpdatedPayload{State: "done", Text: "green CI"}})
	if r.Title != "Fixed" || r.QueueDepth != 0 || r.Goal.State != "done" {
		t.Errorf("after updates: title %q depth %d goal %+v", r.Title, r.QueueDepth, r.Goal)
	}
}

func TestRun_ApplyTimes(t *testing.T) {
	r := play(t, started, token, token)
	if r.StartedAt != 1778750001 || r.UpdatedAt != 1778750003 {
		t.Errorf("StartedAt %f UpdatedAt %f", r.StartedAt, r.UpdatedAt)
	}
}

// terminalEnds are the ways a run ends.
var terminalEnds = []step{done, cancelled, errorEvent("provider_error", "p", true),
	errorEvent("timeout", "t", true), errorEvent("interrupted", "i", true)}

func TestRun_ApplyAfterTerminal(t *testing.T) {
	after := []step{started, token, status("running"), askA1, resolveA1, errorEvent("provider_error", "late", false),
		{protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: "late", Source: "model"}}}
	for _, end := range terminalEnds {
		for _, s := range after {
			r := play(t, started, token, end)
			before := r
			e := ev(t, "r1", r.LastSeq+1, s.typ, s.payload)
			err := r.Apply(&e)
			if !errors.Is(err, session.ErrAfterTerminal) {
				t.Errorf("%s after %s: err = %v, want ErrAfterTerminal", s.typ, end.typ, err)
			}
			if !reflect.DeepEqual(r, before) {
				t.Errorf("%s after %s changed the state:\n got %+v\nwant %+v", s.typ, end.typ, r, before)
			}
		}
	}
}

func TestRun_ApplySecondTerminal(t *testing.T) {
	for _, first := range terminalEnds {
		for _, second := range terminalEnds {
			r := play(t, started, first)
			before := r
			e := ev(t, "r1", r.LastSeq+1, second.typ, second.payload)
			if err := r.Apply(&e); !errors.Is(err, session.ErrAfterTerminal) {
				t.Errorf("%s after %s: err = %v, want ErrAfterTerminal", second.typ, first.typ, err)
			}
			if !reflect.DeepEqual(r, before) || r.TerminalState != before.TerminalState {
				t.Errorf("%s after %s changed the state", second.typ, first.typ)
			}
		}
	}
}

// applyFails applies s to the state reached by steps and wants target
// without any change to the state.
func applyFails(t *testing.T, target error, s step, steps ...step) {
	t.Helper()
	r := play(t, steps...)
	before := r
	e := ev(t, "r1", r.LastSeq+1, s.typ, s.payload)
	err := r.Apply(&e)
	if !errors.Is(err, target) {
		t.Errorf("Apply(%s %s): err = %v, want %v", e.Type, e.Payload, err, target)
	}
	if !reflect.DeepEqual(r, before) {
		t.Errorf("Apply(%s) changed the state:\n got %+v\nwant %+v", e.Type, r, before)
	}
}

func TestRun_ApplyUnknownPrompt(t *testing.T) {
	resolveA2 := step{protocol.EventApprovalRes, protocol.ApprovalResolvedPayload{ApprovalID: "a2", Choice: "once", Status: "resolved"}}
	resolveQ2 := step{protocol.EventClarifyRes, protocol.ClarifyResolvedPayload{ClarifyID: "q2", Status: "resolved"}}
	applyFails(t, session.ErrUnknownPrompt, resolveA1, started)
	applyFails(t, session.ErrUnknownPrompt, resolveA2, started, askA1)
	applyFails(t, session.ErrUnknownPrompt, resolveA1, started, askA1, resolveA1) // twice
	applyFails(t, session.ErrUnknownPrompt, resolveA1, started, askQ1)            // the other kind
	applyFails(t, session.ErrUnknownPrompt, resolveQ1, started)
	applyFails(t, session.ErrUnknownPrompt, resolveQ2, started, askQ1)
	applyFails(t, session.ErrUnknownPrompt, resolveQ1, started, askQ1, resolveQ1)
	applyFails(t, session.ErrUnknownPrompt, resolveQ1, started, askA1)
}

func TestRun_ApplySeq(t *testing.T) {
	for _, seq := range []uint64{0, 1, 2, 4, 100} {
		r := play(t, started, token) // LastSeq 2
		before := r
		e := ev(t, "r1", seq, token.typ, token.payload)
		if seq == 3 {
			continue
		}
		err := r.Apply(&e)
		if !errors.Is(err, session.ErrSeq) {
			t.Errorf("seq %d after 2: err = %v, want ErrSeq", seq, err)
		}
		if !reflect.DeepEqual(r, before) {
			t.Errorf("seq %d after 2 changed the state", seq)
		}
	}
	r := session.NewRun("r1", "s1")
	e := ev(t, "r1", 2, started.typ, started.payload)
	if err := r.Apply(&e); !errors.Is(err, session.ErrSeq) {
		t.Errorf("first event with seq 2: err = %v, want ErrSeq", err)
	}
}

func TestRun_ApplyWrongRun(t *testing.T) {
	r := play(t, started)
	before := r
	e := ev(t, "r2", 2, token.typ, token.payload)
	if err := r.Apply(&e); !errors.Is(err, session.ErrWrongRun) {
		t.Errorf("event of r2 applied to r1: err = %v, want ErrWrongRun", err)
	}
	e = ev(t, "r1", 2, token.typ, token.payload)
	e.SessionID = "s2"
	if err := r.Apply(&e); !errors.Is(err, session.ErrWrongRun) {
		t.Errorf("event of session s2 applied to a run of s1: err = %v, want ErrWrongRun", err)
	}
	if !reflect.DeepEqual(r, before) {
		t.Errorf("state changed")
	}
}

func TestRun_ApplyBadStatus(t *testing.T) {
	for _, s := range []protocol.Status{"completed", "cancelled", "failed", "expired", "interrupted", "dancing", ""} {
		r := play(t, started)
		before := r
		e := protocol.Envelope{EventID: "r1:2", Seq: 2, RunID: "r1", SessionID: "s1", Type: protocol.EventStatus,
			Payload: json.RawMessage(`{"status":"` + string(s) + `","controls":[]}`)}
		if err := r.Apply(&e); !errors.Is(err, session.ErrBadStatus) {
			t.Errorf("status %q: err = %v, want ErrBadStatus", s, err)
		}
		if !reflect.DeepEqual(r, before) {
			t.Errorf("status %q changed the state", s)
		}
	}
}

func TestRun_ApplyInvalidPayload(t *testing.T) {
	tests := []struct {
		typ      protocol.EventType
		payload  string
		terminal bool
	}{
		{protocol.EventRunStarted, `{"message":7}`, false},
		{protocol.EventStatus, `{"status":5}`, false},
		{protocol.EventProgress, `[]`, false},
		{protocol.EventToolStarted, `{"name":{}}`, false},
		{protocol.EventToolDone, `{"error":"yes"}`, false},
		{protocol.EventApprovalReq, `{"choices":"once"}`, false},
		{protocol.EventApprovalRes, `{"approval_id":1}`, false},
		{protocol.EventClarifyReq, `{"question":[]}`, false},
		{protocol.EventClarifyRes, `{"clarify_id":true}`, false},
		{protocol.EventTitleUpdated, `{"title":1}`, false},
		{protocol.EventUsageUpdated, `{"input_tokens":"1"}`, false},
		{protocol.EventQueueUpdated, `{"depth":"1"}`, false},
		{protocol.EventGoalUpdated, `{"state":1}`, false},
		{protocol.EventDone, `{"usage":"x"}`, true},
		{protocol.EventCancelled, `{"partial":"x"}`, true},
		{protocol.EventError, `{"code":1,"terminal":true}`, true},
		{"token.deleted", `{}`, false},
		// the envelope's terminal flag disagrees with type and payload
		{protocol.EventDone, `{"status":"completed","usage":null}`, false},
		{protocol.EventTokenDelta, `{"message_id":"m","text":"x"}`, true},
		{protocol.EventError, `{"code":"timeout","message":"m","terminal":true}`, false},
		{protocol.EventError, `{"code":"provider_error","message":"m","terminal":false}`, true},
	}
	for _, tt := range tests {
		r := play(t, started, askA1, askQ1)
		before := r
		e := protocol.Envelope{EventID: "r1:4", Seq: 4, RunID: "r1", SessionID: "s1", Type: tt.typ,
			Terminal: tt.terminal, Payload: json.RawMessage(tt.payload)}
		if err := r.Apply(&e); !errors.Is(err, session.ErrInvalidPayload) {
			t.Errorf("%s %s terminal=%v: err = %v, want ErrInvalidPayload", tt.typ, tt.payload, tt.terminal, err)
		}
		if !reflect.DeepEqual(r, before) {
			t.Errorf("%s %s changed the state", tt.typ, tt.payload)
		}
	}
}

func TestRun_RunStatus(t *testing.T) {
	r := session.NewRun("r1", "s1")
	rs := r.RunStatus()
	if rs.LastEventID != "" || rs.LastSeq != 0 || rs.Status != "queued" || rs.RunID != "r1" || rs.SessionID != "s1" {
		t.Errorf("RunStatus of a new run = %+v", rs)
	}
	r = play(t, started, askA1)
	rs = r.RunStatus()
	want := protocol.RunStatus{RunID: "r1", SessionID: "s1", Status: "awaiting_approval", LastSeq: 2, LastEventID: "r1:2",
		ActiveControls: []string{"cancel", "approve"}, PendingApprovalID: "a1"}
	if !reflect.DeepEqual(rs, want) {
		t.Errorf("RunStatus = %+v\nwant %+v", rs, want)
	}
	apply(t, &r, done)
	b, _ := json.Marshal(r.RunStatus())
	if !strings.Contains(string(b), `"active_controls":[]`) || !strings.Contains(string(b), `"terminal_state":"completed"`) {
		t.Errorf("RunStatus JSON of a completed run = %s", b)
	}
}

func TestFold(t *testing.T) {
	steps := []step{started, askA1, resolveA1, token, token, done}
	var events []protocol.Envelope
	want := session.NewRun("r1", "s1")
	for i, s := range steps {
		e := ev(t, "r1", uint64(i+1), s.typ, s.payload)
		events = append(events, e)
		if err := want.Apply(&e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := session.Fold("r1", "s1", events)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Fold = %+v, %v\nwant %+v", got, err, want)
	}

	// A fold stops at the first illegal event and returns the state before it.
	events = append(events[:3:3], events[4:]...) // drop seq 4
	got, err = session.Fold("r1", "s1", events)
	if !errors.Is(err, session.ErrSeq) || got.LastSeq != 3 {
		t.Errorf("Fold with a gap = LastSeq %d, %v; want 3, ErrSeq", got.LastSeq, err)
	}
}
