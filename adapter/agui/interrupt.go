package agui

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// The choices of an approval an interrupt asks.
const (
	ChoiceApprove = "approve"
	ChoiceDeny    = "deny"
)

// schema is the part of an interrupt's responseSchema the driver reads.
type schema struct {
	Type       string             `json:"type"`
	Enum       []json.RawMessage  `json:"enum"`
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
}

func parseSchema(raw json.RawMessage) *schema {
	var s schema
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return &s
}

// isApproval reports whether an interrupt asks a yes or no: reason
// tool_call (a tool call awaiting a decision) or confirmation (AG-UI's
// core reasons), a reason naming an approval (tool_approval, a
// framework's "…:approval"), or a responseSchema that is a boolean or
// has a boolean "approved".
func isApproval(in Interrupt, s *schema) bool {
	switch {
	case in.Reason == "tool_call", in.Reason == "confirmation", strings.Contains(in.Reason, "approval"):
		return true
	case s == nil:
		return false
	case s.Type == "boolean":
		return true
	}
	p := s.Properties["approved"]
	return p != nil && p.Type == "boolean"
}

// answer asks each interrupt of an interrupt outcome, in order, as an
// approval or a clarify prompt, and returns the resume entries of their
// answers.
func (d *Driver) answer(ctx context.Context, x *driver.Execution, m *mapper, ins []Interrupt) ([]resumeEntry, error) {
	out := make([]resumeEntry, 0, len(ins))
	for _, in := range ins {
		s := parseSchema(in.ResponseSchema)
		id := m.localID("i", in.ID)
		var entry resumeEntry
		var err error
		if isApproval(in, s) {
			entry, err = d.approve(ctx, x, m, in, s, id)
		} else {
			entry, err = d.clarify(ctx, x, in, s, id)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, entry)
	}
	return out, nil
}

func (d *Driver) approve(ctx context.Context, x *driver.Execution, m *mapper, in Interrupt, s *schema, id string) (resumeEntry, error) {
	summary := in.Message
	if summary == "" {
		summary = "the agent asks to go on (" + in.Reason + ")"
		if in.ToolCallID != "" {
			summary = "the agent asks to go on with tool call " + m.localID("t", in.ToolCallID) + " (" + in.Reason + ")"
		}
	}
	choice, err := x.Approval(ctx, protocol.ApprovalRequestedPayload{ApprovalID: id,
		Summary: protocol.Truncate(strings.ToValidUTF8(summary, "?"), 2000), Risk: "medium",
		Choices: []string{ChoiceApprove, ChoiceDeny}})
	if err != nil {
		return resumeEntry{}, err
	}
	yes := choice == ChoiceApprove
	// Denials are expressed inside the payload (the AG-UI interrupts
	// spec), an expired approval is a denial too.
	var payload any = map[string]bool{"approved": yes}
	if s != nil && s.Type == "boolean" || s == nil && in.Reason == "confirmation" {
		payload = yes
	}
	return resumeEntry{InterruptID: in.ID, Status: "resolved", Payload: payload}, nil
}

func (d *Driver) clarify(ctx context.Context, x *driver.Execution, in Interrupt, s *schema, id string) (resumeEntry, error) {
	q := orText(in.Message, "the agent needs input ("+in.Reason+")")
	req := protocol.ClarifyRequestedPayload{ClarifyID: id, Question: protocol.Truncate(strings.ToValidUTF8(q, "?"), 2000), InputMode: "text"}
	prop := ""
	if s != nil && s.Type == "object" {
		prop = onlyProperty(s)
	}
	enumOf := s
	if prop != "" {
		enumOf = s.Properties[prop]
	}
	if enumOf != nil {
		for _, v := range enumOf.Enum {
			var c string
			if json.Unmarshal(v, &c) == nil {
				req.Choices = append(req.Choices, c)
			}
		}
		if len(req.Choices) > 0 {
			req.InputMode = "choice"
		}
	}
	resp, ok, err := x.Clarify(ctx, req, d.cfg.ClarifyTimeout)
	if err != nil {
		return resumeEntry{}, err
	}
	if !ok {
		return resumeEntry{InterruptID: in.ID, Status: "cancelled"}, nil
	}
	return resumeEntry{InterruptID: in.ID, Status: "resolved", Payload: payloadOf(resp, s, prop)}, nil
}

// payloadOf is a clarify response as the interrupt's resume payload: for
// an object schema, a JSON object the user typed as it is, else the
// response under the schema's one property (or "response"); for a
// boolean, number or object-less schema, the response as that value when
// it parses so, else the text.
func payloadOf(resp string, s *schema, prop string) any {
	if s == nil {
		return resp
	}
	typ := s.Type
	if prop != "" && s.Properties[prop] != nil {
		typ = s.Properties[prop].Type
	}
	var v any = resp
	switch typ {
	case "boolean", "number", "integer":
		var parsed any
		if json.Unmarshal([]byte(strings.TrimSpace(resp)), &parsed) == nil {
			v = parsed
		}
	}
	if s.Type != "object" {
		return v
	}
	var obj map[string]any
	if json.Unmarshal([]byte(resp), &obj) == nil && obj != nil {
		return obj
	}
	return map[string]any{orText(prop, "response"): v}
}

// onlyProperty is an object schema's one required property, or its one
// property; "" when there is no single one.
func onlyProperty(s *schema) string {
	if len(s.Required) == 1 {
		return s.Required[0]
	}
	if len(s.Properties) == 1 {
		for k := range s.Properties {
			return k
		}
	}
	return ""
}

func orText(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
