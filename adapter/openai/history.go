package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/runhub/runhub/adapter/driver"
)

// ToolCall is a tool call of an assistant message, as the chat
// completions API takes it.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is a ToolCall's function: its name and its arguments as
// JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// noResult is the tool message of a call its run never ended: the API
// refuses an assistant message's tool_calls unless a tool message answers
// each.
const noResult = "no result: the run ended before the tool did"

// turnMessages is one earlier turn as chat messages. A turn without tool
// calls is one message, as it always was. A turn whose run called tools
// (driver.AttachedTurn.ToolCalls) is cut where they happened: an assistant
// message with the text streamed before them (content null when there is
// none) and their tool_calls, a tool message per call with its
// tool_call_id and result, and so on, then an assistant message with the
// rest of the text. A user turn with tool calls (its run streamed no text)
// is its message, then those calls. ids gives each call the id it goes by
// (uniqueIDs).
func turnMessages(t driver.AttachedTurn, ids func(string) string) []Message {
	var out []Message
	text := t.Content
	if t.Role == "user" {
		out = append(out, userMessage(t.Content, t.Attachments))
		text = ""
	} else if len(t.ToolCalls) == 0 {
		return []Message{{Role: t.Role, Content: t.Content}}
	}
	pos := 0
	for calls := t.ToolCalls; len(calls) > 0; {
		at := min(max(calls[0].At, pos), len(text))
		n := 1
		for n < len(calls) && min(max(calls[n].At, pos), len(text)) == at {
			n++
		}
		var content any // null: tool calls only
		if at > pos {
			content = text[pos:at]
		}
		m := Message{Role: "assistant", Content: content}
		callIDs := make([]string, n)
		for i, c := range calls[:n] {
			callIDs[i] = ids(c.ToolCallID)
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: callIDs[i], Type: "function",
				Function: FunctionCall{Name: toolName(c.Name), Arguments: arguments(c.Args)}})
		}
		out = append(out, m)
		for i, c := range calls[:n] {
			out = append(out, Message{Role: "tool", ToolCallID: callIDs[i], Content: toolResult(c.Done)})
		}
		pos, calls = at, calls[n:]
	}
	if pos < len(text) {
		out = append(out, Message{Role: "assistant", Content: text[pos:]})
	}
	return out
}

// uniqueIDs returns the ids the calls of one conversation go by: a run's
// tool_call_id as it came, unless an earlier call of the conversation had
// it (each run numbers its own calls: t1, t2…), then with _2, _3… added,
// so that every tool message answers one call; a call without an id is
// call_1, call_2….
func uniqueIDs() func(string) string {
	seen := map[string]int{}
	return func(id string) string {
		if id == "" {
			id = "call"
		}
		seen[id]++
		if n := seen[id]; n > 1 || id == "call" {
			return id + "_" + strconv.Itoa(n)
		}
		return id
	}
}

// toolName is a tool's name as the API takes a function's: letters,
// digits, _ and - (anything else becomes _), at most 64 bytes.
func toolName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, name)
	if name == "" {
		return "tool"
	}
	return name[:min(len(name), 64)]
}

// arguments is a call's args as the JSON text the API takes ("{}" when
// there are none).
func arguments(args json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, args) != nil || b.String() == "null" {
		return "{}"
	}
	return b.String()
}

// toolResult is a tool message's content: the call's result as text, led
// by its status when it failed, or its status alone when it gave none.
func toolResult(d *driver.ToolDone) string {
	if d == nil {
		return noResult
	}
	text := driver.JSONText(d.Result)
	switch {
	case text == "" || text == "null" || text == "{}":
		return cmp.Or(d.Status, "done")
	case d.Error:
		return d.Status + ": " + text
	}
	return text
}
