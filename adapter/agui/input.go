package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// runInput is AG-UI's RunAgentInput, as @ag-ui/client's HttpAgent sends
// it.
type runInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ProtocolVersion string          `json:"protocolVersion"`
	State           json.RawMessage `json:"state"`
	Messages        []message       `json:"messages"`
	Tools           json.RawMessage `json:"tools"`
	Context         json.RawMessage `json:"context"`
	ForwardedProps  json.RawMessage `json:"forwardedProps"`
	Resume          []resumeEntry   `json:"resume,omitempty"`
}

// ProtocolVersion is the AG-UI protocol version the driver speaks.
const ProtocolVersion = "1.0"

// message is an AG-UI message (user, assistant or tool); Content is a
// string or content parts.
type message struct {
	ID         string     `json:"id"`
	Role       string     `json:"role"`
	Content    any        `json:"content,omitempty"`
	ToolCalls  []toolSpec `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	// raw, when set, is the message as a MESSAGES_SNAPSHOT gave it.
	raw json.RawMessage
}

// MarshalJSON writes a snapshot's message as it came.
func (m message) MarshalJSON() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	type plain message
	return json.Marshal(plain(m))
}

type toolSpec struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// resumeEntry answers one interrupt.
type resumeEntry struct {
	InterruptID string `json:"interruptId"`
	Status      string `json:"status"` // resolved, cancelled
	Payload     any    `json:"payload,omitempty"`
}

// history is the session's earlier turns as AG-UI messages: each user
// turn, and each run's text as an assistant message with its tool calls,
// followed by their results as tool messages. Ids are the turn's place
// ("h3-user"): stable for a session, unique within the request.
func history(turns []driver.AttachedTurn) []message {
	var out []message
	for i, t := range turns {
		base := "h" + strconv.Itoa(i)
		switch t.Role {
		case "user":
			out = append(out, message{ID: base + "-user", Role: "user", Content: userContent(t.Content, t.Attachments)})
			if len(t.ToolCalls) > 0 { // a run that streamed no text: its calls are on its user turn
				out = append(out, toolMessages(base, "", t.ToolCalls)...)
			}
		case "assistant":
			out = append(out, toolMessages(base, t.Content, t.ToolCalls)...)
		}
	}
	return out
}

// toolMessages is an assistant message with its calls, then a tool
// message for each call that ended.
func toolMessages(base, text string, calls []driver.ToolCall) []message {
	a := message{ID: base + "-assistant", Role: "assistant"}
	if text != "" {
		a.Content = text
	}
	var results []message
	for j, c := range calls {
		id := c.ToolCallID + "." + base // a run's ids are unique within it only
		args := string(c.Args)
		if args == "" || args == "null" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, toolSpec{ID: id, Type: "function", Function: function{Name: c.Name, Arguments: args}})
		if c.Done != nil {
			results = append(results, message{ID: base + "-tool" + strconv.Itoa(j), Role: "tool", ToolCallID: id,
				Content: resultContent(c.Done.Result)})
		}
	}
	return append([]message{a}, results...)
}

// resultContent is a tool result as a tool message's content: a JSON
// string as its text, anything else as its JSON text.
func resultContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 {
		return "null"
	}
	return string(raw)
}

// userContent is a user message's content: its text, or with attachments
// AG-UI content parts: the text, then a part per attachment by its media
// type (image, audio, video, else document) with the attachment's URL as
// its source; an attachment without a URL is named in a text part.
func userContent(text string, atts []protocol.Attachment) any {
	if len(atts) == 0 {
		return text
	}
	parts := []map[string]any{{"type": "text", "text": text}}
	for _, a := range atts {
		if a.URL == "" {
			parts = append(parts, map[string]any{"type": "text", "text": fmt.Sprintf("(attachment %s, not sent)", a.Name)})
			continue
		}
		kind := "document"
		for _, k := range []string{"image", "audio", "video"} {
			if strings.HasPrefix(a.MediaType, k+"/") {
				kind = k
			}
		}
		src := map[string]any{"type": "url", "value": a.URL}
		if a.MediaType != "" {
			src["mimeType"] = a.MediaType
		}
		parts = append(parts, map[string]any{"type": kind, "source": src, "metadata": map[string]any{"name": a.Name}})
	}
	return parts
}

// messages is the run's first input messages: the session's history
// (unless the agent owns it) and the run's user message.
func (d *Driver) messages(ctx context.Context, x *driver.Execution) ([]message, error) {
	var msgs []message
	if !d.cfg.OwnsHistory {
		turns, err := x.AttachedTranscript(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("agui: transcript: %w", err)
		}
		msgs = history(turns)
	}
	return append(msgs, message{ID: x.RunID + "-user", Role: "user", Content: userContent(x.Request.Message, x.Request.Attachments)}), nil
}
