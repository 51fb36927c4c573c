// Package sim is the scripted simulator driver (protocol.md §4): a run whose
// every event is decided by metadata.sim on the start request, so tests,
// demos and load tests can verify content ("w0 w1 …") end to end.
package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/protocol"
)

// Script is metadata.sim. Every field is optional.
type Script struct {
	Tokens    *int   `json:"tokens"`    // token.delta events (default 40)
	TokenMS   *int   `json:"token_ms"`  // pause between tokens in ms (default 20)
	Reasoning int    `json:"reasoning"` // reasoning.delta events before the answer
	Tools     *int   `json:"tools"`     // tool calls (default 1)
	Approval  bool   `json:"approval"`  // ask one approval before the tools
	Clarify   bool   `json:"clarify"`   // ask one clarify question before the answer
	Fail      string `json:"fail"`      // "error": terminal provider_error halfway
	Title     string `json:"title"`     // title.updated text (default: from the message)
	Markdown  bool   `json:"markdown"`  // stream MarkdownSample, a chunk per token, instead of "w<i> " (tokens is ignored)
	// MarkdownKB, with Markdown, streams LongMarkdown(MarkdownKB) instead
	// of MarkdownSample (0: the sample; at most MaxMarkdownKB).
	MarkdownKB int `json:"markdown_kb"`
}

// Bounds keep a script from asking for unbounded work.
const (
	MaxTokens = 1_000_000
	MaxTools  = 1000
	MaxPause  = 60_000
	// MaxMarkdownKB bounds markdown_kb.
	MaxMarkdownKB = 1024
)

// ParseScript reads metadata.sim from a start request's metadata and applies
// the defaults.
func ParseScript(metadata json.RawMessage) (Script, error) {
	var md struct {
		Sim *Script `json:"sim"`
	}
	s := Script{}
	if len(metadata) > 0 && string(metadata) != "null" {
		if err := json.Unmarshal(metadata, &md); err != nil {
			return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim: %v", err)
		}
		if md.Sim != nil {
			s = *md.Sim
		}
	}
	def := func(p **int, v int) {
		if *p == nil {
			*p = &v
		}
	}
	def(&s.Tokens, 40)
	def(&s.TokenMS, 20)
	def(&s.Tools, 1)
	switch {
	case *s.Tokens < 0 || *s.Tokens > MaxTokens:
		return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim.tokens: must be 0..%d", MaxTokens)
	case *s.TokenMS < 0 || *s.TokenMS > MaxPause:
		return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim.token_ms: must be 0..%d", MaxPause)
	case *s.Tools < 0 || *s.Tools > MaxTools:
		return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim.tools: must be 0..%d", MaxTools)
	case s.MarkdownKB < 0 || s.MarkdownKB > MaxMarkdownKB:
		return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim.markdown_kb: must be 0..%d", MaxMarkdownKB)
	case s.Reasoning < 0 || s.Reasoning > MaxTokens:
		return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim.reasoning: must be 0..%d", MaxTokens)
	case s.Fail != "" && s.Fail != "error":
		return s, protocol.Errorf(protocol.CodeBadRequest, "metadata.sim.fail: must be \"\" or \"error\"")
	}
	return s, nil
}

// TokenText is the text of token i: "w<i> ".
func TokenText(i int) string { return "w" + strconv.Itoa(i) + " " }

// Text is the full answer of a run with n tokens.
func Text(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(TokenText(i))
	}
	return b.String()
}

// Kind is the simulator's driver kind: the built-in profile's
// (profile.BuiltinSim) and the provider a start names without a profile.
const Kind = "sim"

// Registration declares the simulator to a profile.Registry. It plays every
// control, judges the goals of its own runs (JudgeGoal: turns=N), streams
// reasoning, tool calls and usage, and takes attachments: it names them in
// a progress event (AttachmentsText), so a client's attachments can be
// tested end to end.
func Registration() profile.Registration {
	return profile.NewRegistration(Kind, []string{
		protocol.CapCancel, protocol.CapApproval, protocol.CapClarify, protocol.CapSteer, protocol.CapQueue,
		protocol.CapGoal, protocol.CapAttachments, protocol.CapReasoning, protocol.CapUsage, protocol.CapTools,
	}, func(_ profile.Profile, _ *Settings, env profile.Env) (driver.Driver, error) {
		return &Driver{ClarifyTimeout: env.ClarifyTimeout}, nil
	})
}

// Settings are a sim profile's own settings: none (a run's script is its
// start's metadata.sim).
type Settings struct{}

// Validate implements profile.Settings.
func (*Settings) Validate(profile.Profile) error { return nil }

// Driver is the simulator. Its zero value is ready; ClarifyTimeout bounds
// clarify prompts (0: wait until cancelled).
type Driver struct {
	ClarifyTimeout time.Duration
}

// Steers reports that the simulator takes guidance while it runs: each
// steer message is journaled as a progress event.
func (d *Driver) Steers() bool { return true }

// JudgeGoal is the simulator's goal judge, deterministic: a goal whose
// text holds "turns=N" continues until N runs were made for it, then it is
// done; any other goal gets no decision (it does not continue on its own).
// It judges only on profiles whose driver is the simulator.
func (d *Driver) JudgeGoal(_ context.Context, g protocol.GoalUpdatedPayload, _ string) (driver.Verdict, error) {
	n, ok := goalTurns(g.Text)
	switch {
	case !ok:
		return driver.Verdict{Kind: driver.VerdictHold}, nil
	case g.Turns >= n:
		return driver.Verdict{Kind: driver.VerdictDone, Reason: fmt.Sprintf("made %d of %d runs", g.Turns, n)}, nil
	}
	return driver.Verdict{Kind: driver.VerdictContinue, Reason: fmt.Sprintf("made %d of %d runs", g.Turns, n)}, nil
}

// goalTurns reads "turns=N" from a goal text.
func goalTurns(text string) (int, bool) {
	i := strings.Index(text, "turns=")
	if i < 0 {
		return 0, false
	}
	rest := text[i+len("turns="):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// Validate checks a start request's script before the run begins.
func (d *Driver) Validate(req protocol.StartRunRequest) error {
	_, err := ParseScript(req.Metadata)
	return err
}

// Execute implements driver.Driver.
func (d *Driver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	s, err := ParseScript(x.Request.Metadata)
	if err != nil {
		return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: err.Error()}
	}
	begin := time.Now()
	pause := time.Duration(*s.TokenMS) * time.Millisecond
	title := s.Title
	if title == "" {
		title = titleOf(x.Request.Message)
	}
	if _, err := x.Emit(ctx, protocol.EventTitleUpdated, protocol.TitleUpdatedPayload{Title: title, Source: "sim"}); err != nil {
		return nil, err
	}
	if len(x.Request.Attachments) > 0 {
		if _, err := x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: AttachmentsText(x.Request.Attachments)}); err != nil {
			return nil, err
		}
	}
	for i := 0; i < s.Reasoning; i++ {
		if _, err := x.Emit(ctx, protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b1", Text: "r" + strconv.Itoa(i) + " "}); err != nil {
			return nil, err
		}
		if err := ctxsleep.Sleep(ctx, pause); err != nil {
			return nil, err
		}
	}
	if s.Reasoning > 0 {
		if _, err := x.Emit(ctx, protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: "b1", Text: ""}); err != nil {
			return nil, err
		}
	}
	denied := false
	if s.Approval {
		choice, err := x.Approval(ctx, protocol.ApprovalRequestedPayload{
			ApprovalID: "a_" + x.RunID[len(x.RunID)-8:], Summary: fmt.Sprintf("run %d simulated tool call(s)", *s.Tools),
			Risk: "medium", Choices: []string{"once", "session", "always", "deny"}})
		if err != nil {
			return nil, err
		}
		denied = choice == "deny"
	}
	for i := 0; i < *s.Tools; i++ {
		if err := d.tool(ctx, x, i, denied, pause); err != nil {
			return nil, err
		}
	}
	if s.Clarify {
		if _, _, err := x.Clarify(ctx, protocol.ClarifyRequestedPayload{
			ClarifyID: "c_" + x.RunID[len(x.RunID)-8:], Question: "Which format should the answer use?",
			Choices: []string{"short", "detailed"}, InputMode: "choice"}, d.ClarifyTimeout); err != nil {
			return nil, err
		}
	}
	n, text := *s.Tokens, TokenText
	if s.Markdown {
		chunks := MarkdownChunks()
		if s.MarkdownKB > 0 {
			chunks = WordChunks(LongMarkdown(s.MarkdownKB))
		}
		n, text = len(chunks), func(i int) string { return chunks[i] }
	}
	pace := newPacer(time.Now(), pause)
	var sleep ctxsleep.Sleeper // one timer for the run's tokens
	defer sleep.Stop()
	for i := 0; i < n; i++ {
		if s.Fail == "error" && i == n/2 {
			return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: "simulated provider failure"}
		}
		if err := steered(ctx, x); err != nil {
			return nil, err
		}
		if _, err := x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: text(i)}); err != nil {
			return nil, err
		}
		if i < n-1 {
			if err := sleep.Sleep(ctx, pace.next(time.Now())); err != nil {
				return nil, err
			}
		}
	}
	if s.Fail == "error" {
		return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: "simulated provider failure"}
	}
	if err := steered(ctx, x); err != nil { // guidance that came after the last token
		return nil, err
	}
	u := &protocol.Usage{InputTokens: int64(len(strings.Fields(x.Request.Message))), OutputTokens: int64(n),
		Model: "sim-1", Provider: "sim", DurationMS: time.Since(begin).Milliseconds()}
	if _, err := x.Emit(ctx, protocol.EventUsageFinal, u); err != nil {
		return nil, err
	}
	return u, nil
}

func (d *Driver) tool(ctx context.Context, x *driver.Execution, i int, denied bool, pause time.Duration) error {
	id := "t" + strconv.Itoa(i+1)
	start := time.Now()
	args, _ := json.Marshal(map[string]any{"step": i + 1})
	if _, err := x.Emit(ctx, protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: id, Name: "sim.echo", Args: args}); err != nil {
		return err
	}
	out := fmt.Sprintf("step %d\n", i+1)
	if denied {
		out = "denied by user\n"
	}
	if _, err := x.Emit(ctx, protocol.EventToolUpdated, protocol.ToolUpdatedPayload{ToolCallID: id, Stream: "stdout", Text: out}); err != nil {
		return err
	}
	if err := ctxsleep.Sleep(ctx, pause); err != nil {
		return err
	}
	status, result := "ok", json.RawMessage(`{"ok":true}`)
	if denied {
		status, result = "denied", json.RawMessage(`{"ok":false,"reason":"denied"}`)
	}
	_, err := x.Emit(ctx, protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: id, Status: status,
		DurationMS: time.Since(start).Milliseconds(), Error: denied, Result: result})
	return err
}

// steered journals every guidance message waiting for the run.
func steered(ctx context.Context, x *driver.Execution) error {
	for {
		select {
		case text := <-x.Steering():
			if _, err := x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: "steered: " + text}); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// pacer spaces tokens on a schedule: token i is due at start + i×pause, so
// the time each token's append takes (its journal commit) does not lower the
// rate, as a model streaming at a fixed rate would not slow down for it. A
// token more than one pause late restarts the schedule from now instead of
// bursting to catch up.
type pacer struct {
	due   time.Time
	pause time.Duration
}

func newPacer(start time.Time, pause time.Duration) pacer {
	return pacer{due: start, pause: pause}
}

// next returns how long to wait, at now, before the next token.
func (p *pacer) next(now time.Time) time.Duration {
	p.due = p.due.Add(p.pause)
	if now.Sub(p.due) > p.pause {
		p.due = now // too far behind: do not burst
	}
	return max(p.due.Sub(now), 0)
}

// AttachmentsText is the progress text by which the simulator shows that
// a start's attachments reached it, right after its title: "received 2
// attachments: cat.png (image/png, 2048 bytes), notes.txt". It reads no
// URL; its answer is the same with attachments or without.
func AttachmentsText(atts []protocol.Attachment) string {
	names := make([]string, len(atts))
	for i, a := range atts {
		var meta []string
		if a.MediaType != "" {
			meta = append(meta, a.MediaType)
		}
		if a.Size > 0 {
			meta = append(meta, strconv.FormatInt(a.Size, 10)+" bytes")
		}
		names[i] = cmp.Or(a.Name, "unnamed")
		if len(meta) > 0 {
			names[i] += " (" + strings.Join(meta, ", ") + ")"
		}
	}
	noun := "attachments"
	if len(atts) == 1 {
		noun = "attachment"
	}
	return fmt.Sprintf("received %d %s: %s", len(atts), noun, strings.Join(names, ", "))
}

func titleOf(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = protocol.Truncate(msg, 60)
	if msg == "" {
		return "Simulated run"
	}
	return msg
}
