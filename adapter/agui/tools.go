package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/runhub/runhub/protocol"
)

// toolCall is a tool call the agent opened.
type toolCall struct {
	id, name string
	args     strings.Builder
	started  bool   // tool.started journaled
	chunked  bool   // opened by TOOL_CALL_CHUNK: the next event of another type ends it
	up       string // the upstream id
	parent   string // parentMessageId, if any
}

func (m *mapper) openTool(ctx context.Context, id, name, parent string) error {
	if t, ok := m.tools[id]; ok && !t.started {
		return &MalformedError{N: m.n, Type: ToolCallStart, Reason: "tool call " + protocol.Truncate(id, 40) + " is already open"}
	}
	if len(m.tools) >= maxOpenTools {
		// The oldest ended calls are forgotten first: their results
		// still map (by id), with no name.
		for k, t := range m.tools {
			if t.started {
				delete(m.tools, k)
				break
			}
		}
		if len(m.tools) >= maxOpenTools {
			return &MalformedError{N: m.n, Type: ToolCallStart, Reason: fmt.Sprintf("more than %d tool calls open", maxOpenTools)}
		}
	}
	m.tools[id] = &toolCall{id: m.localID("t", id), name: name, up: id, parent: parent}
	m.lastTool = id
	return nil
}

func (m *mapper) toolArgs(id, delta string) error {
	t, ok := m.tools[id]
	if !ok || t.started {
		return &MalformedError{N: m.n, Type: ToolCallArgs, Reason: "tool call " + protocol.Truncate(id, 40) + " is not open"}
	}
	if t.args.Len()+len(delta) > maxArgs {
		return &MalformedError{N: m.n, Type: ToolCallArgs, Reason: fmt.Sprintf("a tool call's arguments are over %d bytes", maxArgs)}
	}
	t.args.WriteString(delta)
	return nil
}

// endTool journals tool.started for a call whose arguments are complete.
func (m *mapper) endTool(ctx context.Context, id string) error {
	t, ok := m.tools[id]
	if !ok || t.started {
		return &MalformedError{N: m.n, Type: ToolCallEnd, Reason: "tool call " + protocol.Truncate(id, 40) + " is not open"}
	}
	return m.startTool(ctx, t)
}

func (m *mapper) startTool(ctx context.Context, t *toolCall) error {
	t.started = true
	args := json.RawMessage(t.args.String())
	if strings.TrimSpace(string(args)) == "" {
		args = json.RawMessage(`{}`)
	} else if !json.Valid(args) {
		args, _ = json.Marshal(strings.ToValidUTF8(t.args.String(), "?")) // as the agent sent it
	}
	t.args.Reset()
	journaled := args
	if len(journaled) > maxAGUI {
		journaled, _ = json.Marshal(fmt.Sprintf("(arguments of %d bytes, over the journal's limit)", len(args)))
	}
	parent := t.parent
	if parent == "" {
		parent = m.textUp
		for i := len(m.conv) - 1; parent == "" && i >= 0; i-- {
			if m.conv[i].Role == "assistant" && m.conv[i].raw == nil {
				parent = m.conv[i].ID
			}
		}
		if parent == "" {
			parent = t.up + "-message"
		}
	}
	c := m.convMessage(parent, "assistant")
	c.ToolCalls = append(c.ToolCalls, toolSpec{ID: t.up, Type: "function", Function: function{Name: t.name, Arguments: string(args)}})
	_, err := m.x.Emit(ctx, protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: t.id, Name: t.name, Args: journaled})
	return err
}

// toolChunk is TOOL_CALL_CHUNK as @ag-ui/client expands it: a chunk with a
// new toolCallId (and a toolCallName) starts a call, ending the open one;
// a chunk without continues the open call; delta appends arguments.
func (m *mapper) toolChunk(ctx context.Context, e *event) error {
	open := ""
	if t, ok := m.tools[m.lastTool]; ok && !t.started {
		open = m.lastTool
	}
	if e.ToolCallID == nil || *e.ToolCallID == open {
		if open == "" {
			return &MalformedError{N: m.n, Type: e.Type, Reason: "the first TOOL_CALL_CHUNK must have a toolCallId"}
		}
	} else {
		if e.ToolCallName == nil {
			return &MalformedError{N: m.n, Type: e.Type, Reason: "the first TOOL_CALL_CHUNK must have a toolCallName"}
		}
		if open != "" {
			if err := m.endTool(ctx, open); err != nil {
				return err
			}
		}
		if err := m.openTool(ctx, *e.ToolCallID, *e.ToolCallName, deref(e.ParentMessageID, "")); err != nil {
			return err
		}
		open = *e.ToolCallID
		m.tools[open].chunked = true
	}
	if len(e.Delta) > 0 {
		return m.toolArgs(open, jsonString(e.Delta))
	}
	return nil
}

// endChunks ends what chunks opened when an event of another type comes,
// as @ag-ui/client's transformChunks does: the text message of
// TEXT_MESSAGE_CHUNKs, the reasoning message of REASONING_MESSAGE_CHUNKs,
// the tool call of TOOL_CALL_CHUNKs.
func (m *mapper) endChunks(ctx context.Context, typ string) error {
	if m.textChunked && typ != TextMessageChunk {
		m.textChunked = false
		if err := m.closeText(ctx); err != nil {
			return err
		}
	}
	if m.reasoningChunked && typ != ReasoningMessageChunk {
		m.reasoningChunked = false
		if err := m.closeReasoning(ctx); err != nil {
			return err
		}
	}
	if t, ok := m.tools[m.lastTool]; ok && t.chunked && !t.started && typ != ToolCallChunk {
		return m.startTool(ctx, t)
	}
	return nil
}

func (m *mapper) toolResult(ctx context.Context, id, msgID string, content json.RawMessage) error {
	c := m.convMessage(msgID, "tool")
	c.ToolCallID = id
	if len(content) <= convSize {
		c.Content = content
	}
	t, ok := m.tools[id]
	if ok && !t.started {
		if err := m.startTool(ctx, t); err != nil {
			return err
		}
	}
	local := m.localID("t", id)
	if ok {
		local = t.id
		delete(m.tools, id)
	}
	result := content
	if len(result) > maxAGUI {
		result, _ = json.Marshal(fmt.Sprintf("(a result of %d bytes, over the journal's limit)", len(content)))
	}
	_, err := m.x.Emit(ctx, protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: local, Status: "ok", Result: result})
	return err
}
