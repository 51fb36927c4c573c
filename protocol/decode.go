package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Bounds enforced by the decoder. The hub may enforce tighter ones.
const (
	MaxClientMessageBytes = 256 << 10 // one client message
	MaxTextBytes          = 64 << 10  // start/queue message text, clarify response
	MaxTokenBytes         = 8 << 10   // hello.token
	MaxShortBytes         = 256       // op, choice, mode, action, profile, model, …
	MaxMetadataBytes      = 16 << 10  // control metadata
	MaxWatchSessions      = 1000      // ids in one watch
	MaxAttachments        = 16
	MaxAttachmentBytes    = 32 << 20 // the declared size of one attachment
	MaxToolsets           = 64
	MaxPayloadBytes       = 256 << 10 // one event payload in the journal
)

// DecodeClient strictly decodes one client → hub message. Unknown fields are
// ignored (the protocol may grow); an unknown type, a missing required
// field, a wrong JSON type or an oversized field is an *Error naming the
// field.
//
// A focus cursor is only bounded here, not parsed: protocol.md answers a
// malformed cursor with bad_cursor and still focuses the session (the replay
// falls back to its latest run), so the hub parses it with ParseCursor.
func DecodeClient(data []byte) (ClientMessage, error) {
	if len(data) > MaxClientMessageBytes {
		return ClientMessage{}, Errorf(CodeTooLarge, "message is %d bytes, limit %d", len(data), MaxClientMessageBytes)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return ClientMessage{}, jsonError(err)
	}
	rawType, ok := fields["type"]
	if !ok {
		return ClientMessage{}, fieldError(CodeBadRequest, "type", "is required")
	}
	var typ string
	if err := json.Unmarshal(rawType, &typ); err != nil {
		return ClientMessage{}, fieldError(CodeBadRequest, "type", "must be a string")
	}
	m := ClientMessage{Type: typ}
	var err error
	switch typ {
	case MsgHello:
		m.Hello = &Hello{}
		if err = unmarshalFields(data, m.Hello); err == nil {
			m.Hello.Type = typ
			err = firstErr(maxLen("token", m.Hello.Token, MaxTokenBytes), required("client", m.Hello.Client),
				maxLen("client", m.Hello.Client, MaxShortBytes), validateCapabilities(m.Hello.Capabilities))
		}
	case MsgWatch, MsgUnwatch:
		m.Watch = &Watch{}
		if err = unmarshalFields(data, m.Watch); err == nil {
			m.Watch.Type = typ
			err = validateWatch(m.Watch)
		}
	case MsgFocus:
		m.Focus = &Focus{}
		if _, ok := fields["session_id"]; !ok {
			return m, fieldError(CodeBadRequest, "session_id", "is required (null for no focus)")
		}
		if err = unmarshalFields(data, m.Focus); err == nil {
			m.Focus.Type = typ
			err = validateFocus(m.Focus)
		}
	case MsgControl:
		m.Control = &Control{}
		if err = unmarshalFields(data, m.Control); err == nil {
			m.Control.Type = typ
			err = ValidateControl(m.Control)
		}
	case MsgPing:
		m.Ping = &Ping{}
		if err = unmarshalFields(data, m.Ping); err == nil {
			m.Ping.Type = typ
			err = firstErr(required("id", m.Ping.ID), maxLen("id", m.Ping.ID, MaxShortBytes))
		}
	case "":
		return m, fieldError(CodeBadRequest, "type", "is empty")
	default:
		return m, fieldError(CodeBadRequest, "type", "unknown message type %q", Truncate(typ, 40))
	}
	return m, err
}

func validateCapabilities(caps []string) error {
	if len(caps) > MaxCapabilities {
		return fieldError(CodeTooLarge, "capabilities", "has %d names, limit %d", len(caps), MaxCapabilities)
	}
	for i, c := range caps {
		if err := maxLen(fmt.Sprintf("capabilities[%d]", i), c, MaxShortBytes); err != nil {
			return err
		}
	}
	return nil
}

func validateWatch(w *Watch) error {
	if len(w.Sessions) == 0 && !w.All {
		return fieldError(CodeBadRequest, "sessions", "must name at least one session unless all is true")
	}
	if len(w.Sessions) > MaxWatchSessions {
		return fieldError(CodeTooLarge, "sessions", "has %d ids, limit %d", len(w.Sessions), MaxWatchSessions)
	}
	for i, id := range w.Sessions {
		if err := ValidID(id); err != nil {
			return fieldError(err.(*Error).Code, fmt.Sprintf("sessions[%d]", i), "%s", err.(*Error).Message)
		}
	}
	return nil
}

func validateFocus(f *Focus) error {
	if f.SessionID != nil {
		if err := ValidID(*f.SessionID); err != nil {
			return fieldError(err.(*Error).Code, "session_id", "%s", err.(*Error).Message)
		}
	}
	if f.Cursor != "" {
		if f.SessionID == nil {
			return fieldError(CodeBadRequest, "cursor", "needs a session_id")
		}
		if err := maxLen("cursor", f.Cursor, MaxShortBytes); err != nil {
			return err
		}
	}
	return nil
}

// Goal actions.
const (
	GoalSet    = "set"
	GoalEdit   = "edit"
	GoalPause  = "pause"
	GoalResume = "resume"
	GoalClear  = "clear"
	GoalStatus = "status"
)

// Queue modes.
const (
	ModeQueue = "queue"
	ModeSteer = "steer"
)

// ValidateControl checks a control's op and the fields that op requires.
func ValidateControl(c *Control) error {
	if c.ID == "" {
		return fieldError(CodeBadRequest, "id", "is required")
	}
	err := firstErr(
		maxLen("id", c.ID, MaxShortBytes), maxLen("op", c.Op, MaxShortBytes),
		maxLen("message", c.Message, MaxTextBytes), maxLen("response", c.Response, MaxTextBytes),
		maxLen("text", c.Text, MaxTextBytes), maxLen("workspace", c.Workspace, MaxShortBytes*4),
		maxLen("profile", c.Profile, MaxShortBytes), maxLen("provider", c.Provider, MaxShortBytes),
		maxLen("model", c.Model, MaxShortBytes), maxLen("choice", c.Choice, MaxShortBytes),
		maxLen("mode", c.Mode, MaxShortBytes), maxLen("action", c.Action, MaxShortBytes),
		optID("session_id", c.SessionID), optID("run_id", c.RunID),
		optID("approval_id", c.ApprovalID), optID("clarify_id", c.ClarifyID),
	)
	if err != nil {
		return err
	}
	if len(c.Metadata) > MaxMetadataBytes {
		return fieldError(CodeTooLarge, "metadata", "is %d bytes, limit %d", len(c.Metadata), MaxMetadataBytes)
	}
	if len(c.Metadata) > 0 && !isNullOrObject(c.Metadata) {
		return fieldError(CodeBadRequest, "metadata", "must be an object")
	}
	if len(c.Attachments) > MaxAttachments {
		return fieldError(CodeTooLarge, "attachments", "has %d items, limit %d", len(c.Attachments), MaxAttachments)
	}
	if len(c.Toolsets) > MaxToolsets {
		return fieldError(CodeTooLarge, "toolsets", "has %d items, limit %d", len(c.Toolsets), MaxToolsets)
	}
	for i, ts := range c.Toolsets {
		if err := maxLen(fmt.Sprintf("toolsets[%d]", i), ts, MaxShortBytes); err != nil {
			return err
		}
	}
	for i, a := range c.Attachments {
		f := fmt.Sprintf("attachments[%d].", i)
		if err := firstErr(maxLen(f+"name", a.Name, MaxShortBytes*4), maxLen(f+"media_type", a.MediaType, MaxShortBytes),
			maxLen(f+"url", a.URL, MaxTextBytes)); err != nil {
			return err
		}
		switch {
		case a.Size < 0:
			return fieldError(CodeBadRequest, f+"size", "must not be negative")
		case a.Size > MaxAttachmentBytes:
			return fieldError(CodeTooLarge, f+"size", "is %d bytes, limit %d", a.Size, MaxAttachmentBytes)
		}
	}
	switch c.Op {
	case OpStart:
		return required("message", c.Message)
	case OpCancel:
		if c.RunID == "" && c.SessionID == "" {
			return fieldError(CodeBadRequest, "run_id", "is required (or session_id)")
		}
	case OpApprove:
		return firstErr(required("run_id", c.RunID), required("approval_id", c.ApprovalID), required("choice", c.Choice))
	case OpClarify:
		return firstErr(required("run_id", c.RunID), required("clarify_id", c.ClarifyID), required("response", c.Response))
	case OpQueue:
		if err := firstErr(required("session_id", c.SessionID), required("message", c.Message)); err != nil {
			return err
		}
		if c.Mode != "" && c.Mode != ModeQueue && c.Mode != ModeSteer {
			return fieldError(CodeBadRequest, "mode", "must be %q or %q", ModeQueue, ModeSteer)
		}
	case OpGoal:
		if err := firstErr(required("session_id", c.SessionID), required("action", c.Action)); err != nil {
			return err
		}
		return ValidateGoalAction(c.Action, c.Text)
	case "":
		return fieldError(CodeBadRequest, "op", "is required")
	default:
		return fieldError(CodeBadRequest, "op", "unknown op %q", Truncate(c.Op, 40))
	}
	return nil
}

// ValidateGoalAction checks a goal action and whether it needs text.
func ValidateGoalAction(action, text string) error {
	switch action {
	case GoalSet, GoalEdit:
		return required("text", text)
	case GoalPause, GoalResume, GoalClear, GoalStatus:
		return nil
	}
	return fieldError(CodeBadRequest, "action", "unknown goal action %q", Truncate(action, 40))
}

func isNullOrObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && (t[0] == '{' || string(t) == "null")
}

func unmarshalFields(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(err)
	}
	return nil
}

// jsonError turns an encoding/json error into a bad_request *Error naming
// the field where it can.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return Errorf(CodeBadRequest, "message must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fieldError(CodeBadRequest, te.Field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return Errorf(CodeBadRequest, "malformed JSON at byte %d: %v", se.Offset, se)
	}
	return Errorf(CodeBadRequest, "malformed JSON: %v", err)
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	case "int", "int64", "uint64", "float64", "int32", "uint32":
		return "a number"
	}
	return k
}

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return fieldError(CodeBadRequest, field, "is required")
	}
	return nil
}

func optID(field, v string) error {
	if v == "" {
		return nil
	}
	if err := ValidID(v); err != nil {
		pe := err.(*Error)
		return fieldError(pe.Code, field, "%s", pe.Message)
	}
	return nil
}

func maxLen(field, v string, n int) error {
	if len(v) > n {
		return fieldError(CodeTooLarge, field, "is %d bytes, limit %d", len(v), n)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// SplitBatch splits an NDJSON frame into its messages, skipping blank lines.
// The returned slices alias data.
func SplitBatch(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line)
		}
	}
	return out
}

// DecodeServer decodes one hub → client message into its typed form (used
// by clients): *Welcome, *StatusMessage, *EventMessage, *Replayed,
// *ControlResultMessage, *ErrorMessage, *Pong or *Goaway.
func DecodeServer(data []byte) (any, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(err)
	}
	var v any
	switch head.Type {
	case MsgWelcome:
		v = &Welcome{}
	case MsgStatus:
		v = &StatusMessage{}
	case MsgEvent:
		v = &EventMessage{}
	case MsgReplayed:
		v = &Replayed{}
	case MsgControlResult:
		v = &ControlResultMessage{}
	case MsgError:
		v = &ErrorMessage{}
	case MsgPong:
		v = &Pong{}
	case MsgGoaway:
		v = &Goaway{}
	default:
		return nil, fieldError(CodeBadRequest, "type", "unknown message type %q", Truncate(head.Type, 40))
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, jsonError(err)
	}
	return v, nil
}
