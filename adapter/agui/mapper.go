package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/runhub/runhub/protocol"
)

// Bounds of what one run's mapping keeps.
const (
	maxArgs      = 1 << 20 // one tool call's arguments
	maxOpenTools = 256     // tool calls started and not yet ended
	maxIDs       = 4096    // upstream ids that needed a local name
	maxProgress  = 200     // a progress text, in bytes
	maxAGUI      = 192 << 10
	maxMessage   = 300 // an error message, in bytes
)

// emitter is what the mapping journals into: the run's *driver.Execution
// (a recorder in tests and the fuzzer).
type emitter interface {
	Emit(ctx context.Context, typ protocol.EventType, payload any) (protocol.Envelope, error)
}

// mapper folds one AG-UI stream (and the continuing runs of its
// interrupts: one mapper per runhub run) into runhub events.
type mapper struct {
	x emitter
	n int // events read

	ids   map[string]string // upstream id → local id, for ids that are no runhub id
	seqID int

	text        string // local id of the open text message ("" none)
	textRole    string // its role: assistant, or another role journaled as progress
	textChunked bool   // opened by TEXT_MESSAGE_CHUNK
	otherText   strings.Builder

	reasoning        string // local id of the open reasoning message ("" none)
	reasoningChunked bool   // opened by REASONING_MESSAGE_CHUNK

	tools    map[string]*toolCall // by upstream id, open or ended, until its result
	lastTool string               // upstream id of the call a field-less TOOL_CALL_CHUNK continues

	state json.RawMessage // the last STATE_SNAPSHOT
	usage protocol.Usage

	// conv is what the agent said in this runhub run, as @ag-ui/client
	// would hold it: the continuing run of an interrupt sends it back.
	// convSnap: a MESSAGES_SNAPSHOT replaced the whole conversation.
	conv     []message
	convIdx  map[string]int // upstream message id → index in conv
	convSnap bool
	textUp   string // upstream id of the open text message

	upstreamRunID string
	outcome       *Outcome
	runErr        *event // a RUN_ERROR
}

func newMapper(x emitter) *mapper {
	return &mapper{x: x, ids: map[string]string{}, tools: map[string]*toolCall{}, convIdx: map[string]int{}}
}

// localID names upstream id (a message, reasoning or tool call id) in
// runhub's journal: the id itself when it is a valid runhub id, else
// prefix and a number, the same for the same id.
func (m *mapper) localID(prefix, id string) string {
	if id != "" && len(id) <= 128 && protocol.ValidID(id) == nil {
		return id
	}
	if l, ok := m.ids[id]; ok {
		return l
	}
	m.seqID++
	l := prefix + "-" + strconv.Itoa(m.seqID)
	if len(m.ids) < maxIDs {
		m.ids[id] = l
	}
	return l
}

// begin readies the mapper for the next AG-UI run of the same runhub run
// (a resume): the previous run's outcome is forgotten; ids, tool calls and
// state carry over.
func (m *mapper) begin() {
	m.outcome, m.runErr, m.upstreamRunID = nil, nil, ""
}

// apply maps one frame's data. A malformed event is a *MalformedError.
func (m *mapper) apply(ctx context.Context, data []byte) error {
	m.n++
	var e event
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		if !json.Valid(data) {
			return &MalformedError{N: m.n, Reason: "not JSON"}
		}
		return &MalformedError{N: m.n, Reason: "the frame is not a JSON object"}
	}
	if err := json.Unmarshal(data, &e); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok {
			return &MalformedError{N: m.n, Type: e.Type, Reason: fmt.Sprintf("%s must be %s", te.Field, te.Type.Kind())}
		}
		if !json.Valid(data) {
			return &MalformedError{N: m.n, Reason: "not JSON"}
		}
		return &MalformedError{N: m.n, Type: e.Type, Reason: protocol.Truncate(err.Error(), 120)}
	}
	if e.Type == "" {
		return &MalformedError{N: m.n, Reason: "the event carries no type"}
	}
	if miss := missing(&e); miss != "" {
		return &MalformedError{N: m.n, Type: e.Type, Reason: miss + " is required"}
	}
	return m.dispatch(ctx, &e, data)
}

func (m *mapper) dispatch(ctx context.Context, e *event, data []byte) error {
	if err := m.endChunks(ctx, e.Type); err != nil {
		return err
	}
	switch e.Type {
	case TextMessageStart:
		return m.openText(ctx, *e.MessageID, deref(e.Role, "assistant"))
	case TextMessageContent:
		if m.text != m.localID("m", *e.MessageID) {
			if err := m.openText(ctx, *e.MessageID, "assistant"); err != nil {
				return err
			}
		}
		return m.textDelta(ctx, jsonString(e.Delta))
	case TextMessageEnd:
		return m.closeText(ctx)
	case TextMessageChunk:
		if e.MessageID != nil && (m.localID("m", *e.MessageID) != m.text || !m.textChunked) || e.MessageID == nil && !m.textChunked {
			if e.MessageID == nil {
				return &MalformedError{N: m.n, Type: e.Type, Reason: "the first TEXT_MESSAGE_CHUNK must have a messageId"}
			}
			if err := m.openText(ctx, *e.MessageID, deref(e.Role, "assistant")); err != nil {
				return err
			}
			m.textChunked = true
		}
		return m.textDelta(ctx, jsonString(e.Delta))
	case ToolCallStart:
		return m.openTool(ctx, *e.ToolCallID, *e.ToolCallName, deref(e.ParentMessageID, ""))
	case ToolCallArgs:
		return m.toolArgs(*e.ToolCallID, jsonString(e.Delta))
	case ToolCallEnd:
		return m.endTool(ctx, *e.ToolCallID)
	case ToolCallChunk:
		return m.toolChunk(ctx, e)
	case ToolCallResult:
		return m.toolResult(ctx, *e.ToolCallID, *e.MessageID, e.Content)
	case ReasoningStart:
		return nil // a span: its messages carry the text
	case ReasoningMessageStart:
		return m.openReasoning(ctx, *e.MessageID)
	case ReasoningMessageContent:
		if m.reasoning != m.localID("b", *e.MessageID) {
			if err := m.openReasoning(ctx, *e.MessageID); err != nil {
				return err
			}
		}
		return m.reasoningDelta(ctx, jsonString(e.Delta))
	case ReasoningMessageChunk:
		if e.MessageID != nil && (m.localID("b", *e.MessageID) != m.reasoning || !m.reasoningChunked) || e.MessageID == nil && !m.reasoningChunked {
			if e.MessageID == nil {
				return &MalformedError{N: m.n, Type: e.Type, Reason: "the first REASONING_MESSAGE_CHUNK must have a messageId"}
			}
			if err := m.openReasoning(ctx, *e.MessageID); err != nil {
				return err
			}
			m.reasoningChunked = true
		}
		return m.reasoningDelta(ctx, jsonString(e.Delta))
	case ReasoningMessageEnd, ReasoningEnd:
		return m.closeReasoning(ctx)
	case RunStarted:
		m.upstreamRunID = *e.RunID
		return m.progress(ctx, "agent run "+*e.RunID+" started", e.Type, data)
	case RunFinished:
		if err := m.closeAll(ctx); err != nil {
			return err
		}
		m.addUsage(e.Usage)
		o := Outcome{Type: "success"}
		if len(e.Outcome) > 0 && string(e.Outcome) != "null" {
			if err := json.Unmarshal(e.Outcome, &o); err != nil {
				return &MalformedError{N: m.n, Type: e.Type, Reason: "outcome is not an outcome object"}
			}
			switch o.Type {
			case "success", "cancelled":
			case "interrupt":
				if len(o.Interrupts) == 0 {
					return &MalformedError{N: m.n, Type: e.Type, Reason: "an interrupt outcome needs interrupts"}
				}
				for _, in := range o.Interrupts {
					if in.ID == "" || in.Reason == "" {
						return &MalformedError{N: m.n, Type: e.Type, Reason: "an interrupt needs id and reason"}
					}
				}
			default:
				// An outcome this build does not know: @ag-ui/client
				// strips it and reads success; journaled as it came.
				if err := m.progress(ctx, "unknown run outcome "+o.Type, e.Type, data); err != nil {
					return err
				}
				o = Outcome{Type: "success"}
			}
		}
		m.outcome = &o
		// The event as it came (its outcome, result and usage): what
		// follows it is runhub's own (prompts, usage.final, done).
		return m.progress(ctx, "agent run "+*e.RunID+" finished: "+o.Type, e.Type, data)
	case RunError:
		if err := m.closeAll(ctx); err != nil {
			return err
		}
		m.addUsage(e.Usage)
		m.runErr = e
		return m.progress(ctx, "agent run failed: "+*e.Message, e.Type, data)
	case StepStarted:
		return m.progress(ctx, "step "+*e.StepName, e.Type, data)
	case StepFinished:
		return m.progress(ctx, "step "+*e.StepName+" finished", e.Type, data)
	case StateSnapshot:
		m.state = append(m.state[:0], e.Snapshot...)
		return m.progress(ctx, "state snapshot", e.Type, data)
	case StateDelta:
		return m.progress(ctx, "state delta", e.Type, data)
	case MessagesSnapshot:
		var raws []json.RawMessage
		if json.Unmarshal(e.Messages, &raws) != nil {
			return &MalformedError{N: m.n, Type: e.Type, Reason: "messages is not an array of messages"}
		}
		m.conv, m.convSnap = m.conv[:0], true
		clear(m.convIdx)
		for _, r := range raws {
			m.conv = append(m.conv, message{raw: bytes.Clone(r)})
		}
		return m.progress(ctx, "messages snapshot", e.Type, data)
	case ActivitySnapshot:
		return m.progress(ctx, "activity "+*e.ActivityType, e.Type, data)
	case ActivityDelta:
		return m.progress(ctx, "activity "+*e.ActivityType+" changed", e.Type, data)
	case Raw:
		return m.progress(ctx, "raw event"+ifSet(" from ", e.Source), e.Type, data)
	case Custom:
		return m.progress(ctx, "custom event "+*e.Name, e.Type, data)
	case ReasoningEncryptedValue:
		return m.progress(ctx, "encrypted reasoning for "+*e.Subtype+" "+*e.EntityID, e.Type, data)
	case SubagentStarted:
		return m.progress(ctx, "subagent "+*e.Name+" started", e.Type, data)
	case SubagentFinished:
		return m.progress(ctx, "subagent "+*e.SubagentRunID+" finished", e.Type, data)
	case SubagentError:
		return m.progress(ctx, "subagent "+*e.SubagentRunID+" failed: "+*e.Message, e.Type, data)
	}
	return m.progress(ctx, "unknown AG-UI event "+e.Type, e.Type, data)
}

// progress journals an AG-UI event runhub has no event of its own for:
// progress with text and the event itself under "agui".
func (m *mapper) progress(ctx context.Context, text, typ string, data []byte) error {
	_, err := m.x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{
		Text: protocol.Truncate(strings.ToValidUTF8(text, "?"), maxProgress), AGUI: aguiValue(typ, data)})
	return err
}

// aguiValue is the event as journaled: as it came but RUN_STARTED's input
// (the request, the session's history), or, over maxAGUI bytes, only its
// type and size.
func aguiValue(typ string, data []byte) json.RawMessage {
	if typ == RunStarted {
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) == nil {
			delete(obj, "input")
			if b, err := json.Marshal(obj); err == nil {
				data = b
			}
		}
	}
	if len(data) > maxAGUI || !json.Valid(data) {
		b, _ := json.Marshal(map[string]any{"type": typ, "omitted_bytes": len(data)})
		return b
	}
	return bytes.Clone(data)
}

func (m *mapper) openText(ctx context.Context, id, role string) error {
	if err := m.closeText(ctx); err != nil {
		return err
	}
	m.text, m.textRole, m.textUp = m.localID("m", id), role, id
	return nil
}

// convMessage returns the conversation's message with upstream id,
// appending it (with role) when it is new.
func (m *mapper) convMessage(id, role string) *message {
	if i, ok := m.convIdx[id]; ok && m.conv[i].raw == nil {
		return &m.conv[i]
	}
	m.conv = append(m.conv, message{ID: id, Role: role})
	if len(m.convIdx) < maxIDs {
		m.convIdx[id] = len(m.conv) - 1
	}
	return &m.conv[len(m.conv)-1]
}

// convSize bounds what the conversation keeps of one message's text.
const convSize = 1 << 20

func (m *mapper) textDelta(ctx context.Context, s string) error {
	if s == "" {
		return nil
	}
	if m.textRole != "assistant" {
		if m.otherText.Len() < maxAGUI {
			m.otherText.WriteString(s)
		}
		return nil
	}
	c := m.convMessage(m.textUp, "assistant")
	if old, _ := c.Content.(string); len(old)+len(s) <= convSize {
		c.Content = old + s
	}
	for _, part := range pieces(s) {
		if _, err := m.x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: m.text, Text: part}); err != nil {
			return err
		}
	}
	return nil
}

// maxDelta bounds the text of one journaled delta: a longer one (an
// agent may send a whole answer in one event) is journaled in pieces.
const maxDelta = 64 << 10

// pieces cuts s into pieces of at most maxDelta bytes, at character
// boundaries.
func pieces(s string) []string {
	var out []string
	for len(s) > maxDelta {
		i := maxDelta
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// closeText ends the open text message; one of another role than
// assistant (user, system, developer: not the agent's answer) is journaled
// whole as progress.
func (m *mapper) closeText(ctx context.Context) error {
	if m.text == "" {
		return nil
	}
	id, role, text := m.text, m.textRole, m.otherText.String()
	m.text, m.textRole, m.textChunked = "", "", false
	m.otherText.Reset()
	if role == "assistant" {
		return nil
	}
	b, _ := json.Marshal(map[string]string{"type": TextMessageStart, "messageId": id, "role": role, "content": text})
	return m.progress(ctx, role+" message: "+text, TextMessageStart, b)
}

func (m *mapper) openReasoning(ctx context.Context, id string) error {
	if err := m.closeReasoning(ctx); err != nil {
		return err
	}
	m.reasoning = m.localID("b", id)
	return nil
}

func (m *mapper) reasoningDelta(ctx context.Context, s string) error {
	if s == "" {
		return nil
	}
	for _, part := range pieces(s) {
		if _, err := m.x.Emit(ctx, protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: m.reasoning, Text: part}); err != nil {
			return err
		}
	}
	return nil
}

func (m *mapper) closeReasoning(ctx context.Context) error {
	if m.reasoning == "" {
		return nil
	}
	id := m.reasoning
	m.reasoning, m.reasoningChunked = "", false
	_, err := m.x.Emit(ctx, protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: id, Text: ""})
	return err
}

// closeAll ends what is open before the run's end: the reasoning message,
// the text message, and the calls whose arguments never ended (journaled
// with what arguments came).
func (m *mapper) closeAll(ctx context.Context) error {
	if err := m.closeReasoning(ctx); err != nil {
		return err
	}
	if err := m.closeText(ctx); err != nil {
		return err
	}
	for _, t := range m.tools {
		if !t.started {
			if err := m.startTool(ctx, t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *mapper) addUsage(us []tokenUsage) {
	for _, u := range us {
		m.usage.InputTokens += max(u.InputTokens, 0)
		m.usage.OutputTokens += max(u.OutputTokens, 0)
		if u.Model != "" {
			m.usage.Model = u.Model
		}
		if u.Provider != "" {
			m.usage.Provider = u.Provider
		}
	}
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool { return errors.As(err, te) }

func deref(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
}

func ifSet(prefix string, p *string) string {
	if p == nil || *p == "" {
		return ""
	}
	return prefix + *p
}

// jsonString is raw as a string ("" when it is none).
func jsonString(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
