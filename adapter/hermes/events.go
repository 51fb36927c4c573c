package hermes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

type openTool struct {
	id    string
	start time.Time
}

// event is one decoded upstream event: its JSON fields.
type event map[string]json.RawMessage

func (e event) str(k string) string {
	var s string
	if json.Unmarshal(e[k], &s) != nil {
		return ""
	}
	return s
}

func (e event) num(k string) (float64, bool) {
	var f float64
	if json.Unmarshal(e[k], &f) != nil {
		return 0, false
	}
	return f, true
}

func (e event) flag(k string) bool {
	var b bool
	return json.Unmarshal(e[k], &b) == nil && b
}

func (e event) strs(k string) []string {
	var raw []any
	if json.Unmarshal(e[k], &raw) != nil {
		return nil
	}
	out := make([]string, 0, len(raw))
	for _, v := range raw {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// handle maps one upstream event. A final outcome ends the run.
func (r *run) handle(ctx context.Context, it item) outcome {
	var ev event
	if err := json.Unmarshal(it.data, &ev); err != nil || ev == nil {
		r.dropMalformed(1)
		return outcome{}
	}
	name := ev.str("event")
	if name == "" {
		name = it.name
	}
	if rid := ev.str("run_id"); rid != "" && rid != r.id {
		r.log.Debug("ignored an event of another Hermes run", "event", name)
		return outcome{}
	}
	var err error
	if name != "reasoning.available" && name != "run.completed" {
		if err := r.flushThought(ctx, ""); err != nil {
			return finalErr(err)
		}
	}
	switch name {
	case "message.delta":
		err = r.message(ctx, ev.str("delta"))
	case "reasoning.available":
		// Held until the next event: it repeats the assistant message's
		// own text, which that event may show streamed already.
		if err := r.flushThought(ctx, ""); err != nil {
			return finalErr(err)
		}
		r.thought = ev.str("text")
		return outcome{}
	case "reasoning.delta":
		text := ev.str("text")
		if text == "" {
			text = ev.str("delta")
		}
		err = r.reasoning(ctx, text)
	case "tool.started":
		err = r.toolStarted(ctx, ev)
	case "tool.completed":
		err = r.toolCompleted(ctx, ev)
	case "approval.request":
		err = r.approvalRequest(ctx, ev)
	case "approval.responded":
		return r.upstreamResolved(ctx, ev.str("request_id"), ev.str("choice"))
	case "clarify.request":
		err = r.clarifyRequest(ctx, ev)
	case "clarify.retired", "clarify.responded":
		// The end of a question runhub did not relay (clarifyRequest).
	case "run.steered":
		text := "guidance delivered to Hermes"
		if b, ok := ev["accepted"]; ok && string(b) == "false" {
			text = "Hermes did not accept the guidance"
		}
		err = r.progress(ctx, text)
	case "subagent.start", "subagent.complete":
		err = r.subagent(ctx, name, ev)
	case "run.completed":
		if err := r.flushThought(ctx, ev.str("output")); err != nil {
			return finalErr(err)
		}
		if err := r.closeReasoning(ctx); err != nil {
			return finalErr(err)
		}
		if s := ev.str("pending_steer"); s != "" {
			if err := r.progress(ctx, "guidance Hermes did not use before the run ended: "+protocol.Truncate(s, 200)); err != nil {
				return finalErr(err)
			}
		}
		u, err := r.completed(ctx, ev.str("output"), ev["usage"])
		return outcome{final: true, usage: u, err: err}
	case "run.failed":
		return finalErr(r.failed(ev["error"]))
	case "run.cancelled":
		if ctx.Err() != nil {
			return finalErr(ctx.Err())
		}
		return finalErr(&driver.Cancelled{Reason: "the run was stopped in Hermes"})
	default:
		r.log.Debug("ignored a Hermes event", "event", protocol.Truncate(name, 64))
	}
	if err != nil {
		return finalErr(err)
	}
	return outcome{}
}

func (r *run) emit(ctx context.Context, typ protocol.EventType, payload any) error {
	_, err := r.x.Emit(ctx, typ, payload)
	return err
}

func (r *run) progress(ctx context.Context, text string) error {
	return r.emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: text})
}

// message maps message.delta to token.delta. A message after tool activity
// or a prompt gets a new message id. A re-attached run journals none of the
// text Hermes streams (the stream has no ids, and what was sent while the
// hub was down is partly lost): it only keeps track of which message the
// text belongs to, and the final output is journaled when the run
// completes (completeReattached).
func (r *run) message(ctx context.Context, text string) error {
	if !r.reattached {
		return r.emitText(ctx, text)
	}
	if text == "" {
		return nil
	}
	if err := r.closeReasoning(ctx); err != nil {
		return err
	}
	r.nextMessage()
	r.keepAnswer(text)
	return nil
}

// nextMessage moves to a new message id when the text that comes starts
// one.
func (r *run) nextMessage() {
	if r.msgN == 0 || r.newMessage {
		r.msgN++
		r.newMessage = false
		r.msgText.Reset()
		r.msgFull = false
	}
}

// keepAnswer keeps streamed text for reconciling it with the final output.
func (r *run) keepAnswer(text string) {
	if !r.answerFull {
		if r.answer.Len()+len(text) > maxAnswer {
			r.answerFull = true
		} else {
			r.answer.WriteString(text)
		}
	}
}

// keepMessage keeps text journaled in message msgN.
func (r *run) keepMessage(text string) {
	if !r.msgFull {
		if r.msgText.Len()+len(text) > maxAnswer {
			r.msgFull = true
		} else {
			r.msgText.WriteString(text)
		}
	}
}

// emitText journals text as token.delta of the current message.
func (r *run) emitText(ctx context.Context, text string) error {
	if text == "" {
		return nil
	}
	if err := r.closeReasoning(ctx); err != nil {
		return err
	}
	r.nextMessage()
	r.keepAnswer(text)
	r.keepMessage(text)
	id := fmt.Sprintf("m%d", r.msgN)
	for _, c := range chunks(text) {
		if err := r.emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: id, Text: c}); err != nil {
			return err
		}
	}
	return nil
}

// reasoning maps reasoning.available / reasoning.delta to reasoning.delta;
// the block gets its reasoning.done when something else follows.
func (r *run) reasoning(ctx context.Context, text string) error {
	if text == "" {
		return nil
	}
	if !r.blockOpen {
		r.blockN++
		r.blockOpen = true
	}
	id := fmt.Sprintf("b%d", r.blockN)
	for _, c := range chunks(text) {
		if err := r.emit(ctx, protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: id, Text: c}); err != nil {
			return err
		}
	}
	return nil
}

// flushThought maps a held reasoning.available text. Hermes Agent (0.18.x)
// fills it with the assistant message's own content (its first 500
// characters), after that message's message.delta events: text already
// streamed (or, at the end, part of the run's output) is dropped, so the
// answer is not journaled a second time as reasoning. Anything else —
// the text of a message that was never streamed, or real reasoning from
// another server — becomes a reasoning block.
func (r *run) flushThought(ctx context.Context, output string) error {
	text := strings.TrimSpace(r.thought)
	r.thought = ""
	if text == "" || strings.Contains(r.answer.String(), text) || strings.Contains(output, text) {
		return nil
	}
	return r.reasoning(ctx, text)
}

func (r *run) closeReasoning(ctx context.Context) error {
	if !r.blockOpen {
		return nil
	}
	r.blockOpen = false
	return r.emit(ctx, protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: fmt.Sprintf("b%d", r.blockN), Text: ""})
}

// toolStarted maps tool.started {tool, preview}. Hermes has no tool call
// ids: runhub numbers the calls and pairs each completion with the oldest
// open call of the same tool.
func (r *run) toolStarted(ctx context.Context, ev event) error {
	if err := r.closeReasoning(ctx); err != nil {
		return err
	}
	name := ev.str("tool")
	if name == "" {
		name = "tool"
	}
	_, err := r.openTool(ctx, name, ev.str("preview"))
	return err
}

func (r *run) openTool(ctx context.Context, name, preview string) (string, error) {
	r.toolN++
	r.newMessage = true
	id := fmt.Sprintf("t%d", r.toolN)
	args := map[string]string{}
	if preview != "" {
		args["preview"] = protocol.Truncate(preview, 4096)
	}
	raw, _ := json.Marshal(args)
	r.tools[name] = append(r.tools[name], openTool{id: id, start: time.Now()})
	return id, r.emit(ctx, protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: id, Name: protocol.Truncate(name, 200), Args: raw})
}

// toolCompleted maps tool.completed {tool, duration (s), error (bool)}.
func (r *run) toolCompleted(ctx context.Context, ev event) error {
	if err := r.closeReasoning(ctx); err != nil {
		return err
	}
	name := ev.str("tool")
	if name == "" {
		name = "tool"
	}
	if len(r.tools[name]) == 0 { // a completion without a start: show both
		if _, err := r.openTool(ctx, name, ""); err != nil {
			return err
		}
	}
	t := r.tools[name][0]
	r.tools[name] = r.tools[name][1:]
	if len(r.tools[name]) == 0 {
		delete(r.tools, name)
	}
	ms := time.Since(t.start).Milliseconds()
	if s, ok := ev.num("duration"); ok && s >= 0 {
		ms = int64(s*1000 + 0.5)
	}
	failed := ev.flag("error")
	status := "ok"
	if failed {
		status = "error"
	}
	return r.emit(ctx, protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: t.id, Status: status,
		DurationMS: ms, Error: failed, Result: json.RawMessage("null")})
}

func (r *run) subagent(ctx context.Context, name string, ev event) error {
	text := ev.str("goal")
	verb := "subagent started"
	if name == "subagent.complete" {
		verb = "subagent finished"
		if s := ev.str("summary"); s != "" {
			text = s
		}
	}
	if text == "" {
		text = ev.str("preview")
	}
	if text != "" {
		verb += ": " + protocol.Truncate(text, 200)
	}
	return r.progress(ctx, verb)
}

// completed ends a run Hermes completed: the part of the final output that
// was not streamed (all of it when nothing was) as token.delta, then
// usage.final.
func (r *run) completed(ctx context.Context, output string, rawUsage json.RawMessage) (*protocol.Usage, error) {
	if r.reattached {
		if err := r.completeReattached(ctx, output); err != nil {
			return nil, err
		}
	} else if streamed := r.answer.String(); output != "" && !r.answerFull && strings.HasPrefix(output, streamed) && len(output) > len(streamed) {
		if err := r.emitText(ctx, output[len(streamed):]); err != nil {
			return nil, err
		}
	}
	var u struct {
		InputTokens  float64 `json:"input_tokens"`
		OutputTokens float64 `json:"output_tokens"`
	}
	if len(rawUsage) > 0 {
		json.Unmarshal(rawUsage, &u)
	}
	usage := &protocol.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens),
		Model: r.model, Provider: Provider, DurationMS: time.Since(r.begin).Milliseconds()}
	if err := r.emit(ctx, protocol.EventUsageFinal, usage); err != nil {
		return nil, err
	}
	return usage, nil
}

// failed is the terminal error of a run Hermes failed.
func (r *run) failed(raw json.RawMessage) error {
	var msg string
	if json.Unmarshal(raw, &msg) != nil {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &obj) == nil {
			msg = obj.Message
		}
	}
	msg = r.c.scrub(msg)
	if msg == "" {
		msg = "no reason given"
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: "the Hermes run failed: " + msg}
}

// chunks splits text into pieces of at most maxChunk bytes on rune
// boundaries.
func chunks(text string) []string {
	var out []string
	for len(text) > maxChunk {
		i := maxChunk
		for i > 0 && text[i]&0xC0 == 0x80 {
			i--
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	return append(out, text)
}
