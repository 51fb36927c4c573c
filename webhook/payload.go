package webhook

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// Bounds of a notification's text, so that a body stays well under
// MaxBody whatever the event holds.
const (
	maxText    = 2000 // a summary, question, message or goal text, in bytes
	maxShort   = 200  // a title, owner, choice, code or reason
	maxChoices = 20
	// MaxBody bounds a notification body.
	MaxBody = 64 << 10
)

// Notification is the JSON body of a webhook.
type Notification struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"` // the event's time, RFC 3339
	Data      Data   `json:"data"`
}

// Data is a notification's "data".
type Data struct {
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id"`
	EventID   string `json:"event_id"`
	Seq       uint64 `json:"seq"`
	Title     string `json:"title,omitempty"`
	Owner     string `json:"owner,omitempty"`
	// URL opens the session in the workbench (with RUNHUB_PUBLIC_URL).
	URL string `json:"url,omitempty"`

	Approval *Approval `json:"approval,omitempty"` // run.needs_approval
	Clarify  *Clarify  `json:"clarify,omitempty"`  // run.needs_input
	Finished *Finished `json:"finished,omitempty"` // run.finished
	Goal     *Goal     `json:"goal,omitempty"`     // session.goal
}

// Approval is the prompt of run.needs_approval.
type Approval struct {
	ID      string   `json:"approval_id"`
	Summary string   `json:"summary"`
	Risk    string   `json:"risk,omitempty"`
	Choices []string `json:"choices"`
}

// Clarify is the prompt of run.needs_input.
type Clarify struct {
	ID        string   `json:"clarify_id"`
	Question  string   `json:"question"`
	Choices   []string `json:"choices,omitempty"`
	InputMode string   `json:"input_mode,omitempty"`
}

// Finished is the end of a run (run.finished).
type Finished struct {
	// Status is the run's final state: completed, cancelled, failed,
	// expired or interrupted.
	Status protocol.Status `json:"status"`
	// Event is the terminal event's type: done, cancelled or error.
	Event   protocol.EventType `json:"event"`
	Code    string             `json:"code,omitempty"`    // error: its code
	Message string             `json:"message,omitempty"` // error: its message; cancelled: the reason
	// Summary is the start of the run's last assistant message (up to
	// 2,000 bytes), when the run streamed one.
	Summary string `json:"summary,omitempty"`
	// Usage is a completed run's usage, when it reported one.
	Usage *protocol.Usage `json:"usage,omitempty"`
}

// summaryWindow is how many events before a run's end are read for its
// summary: a last message longer than that is summarised by its end.
const summaryWindow = 2000

// lastMessage is the text of the last assistant message among events
// (token.delta), bounded to maxText bytes.
func lastMessage(events []protocol.Envelope) string {
	id := ""
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == protocol.EventTokenDelta {
			p, err := protocol.DecodePayload[protocol.TokenDeltaPayload](&events[i])
			if err == nil {
				id = p.MessageID
				break
			}
		}
	}
	var b strings.Builder
	for i := range events {
		if events[i].Type != protocol.EventTokenDelta {
			continue
		}
		p, err := protocol.DecodePayload[protocol.TokenDeltaPayload](&events[i])
		if err != nil || p.MessageID != id {
			continue
		}
		b.WriteString(p.Text)
		if b.Len() > maxText {
			break
		}
	}
	return clip(strings.TrimSpace(b.String()), maxText)
}

// Goal is a change of the session's standing goal (session.goal).
type Goal struct {
	State  string `json:"state"`
	Text   string `json:"text"`
	Turns  int    `json:"turns,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// typeOf is the notification type of a notable event, "" for none.
func typeOf(t protocol.EventType, terminal bool) string {
	switch {
	case terminal:
		return TypeFinished
	case t == protocol.EventApprovalReq:
		return TypeNeedsApproval
	case t == protocol.EventClarifyReq:
		return TypeNeedsInput
	case t == protocol.EventGoalUpdated:
		return TypeGoal
	}
	return ""
}

// build makes the notification of e; sess may be zero (the session is
// gone). publicURL, when set, is the workbench's base URL.
func build(e *protocol.Envelope, sess journal.SessionMeta, publicURL, summary string) ([]byte, string, error) {
	typ := typeOf(e.Type, e.Terminal)
	n := Notification{
		Type:      typ,
		Timestamp: protocol.Time(e.CreatedAt).UTC().Format(time.RFC3339Nano),
		Data: Data{
			SessionID: e.SessionID, RunID: e.RunID, EventID: e.EventID, Seq: e.Seq,
			Title: clip(sess.Title, maxShort), Owner: clip(sess.Owner, maxShort),
		},
	}
	if publicURL != "" {
		n.Data.URL = strings.TrimRight(publicURL, "/") + "/#/s/" + url.PathEscape(e.SessionID)
	}
	switch typ {
	case TypeNeedsApproval:
		p, err := protocol.DecodePayload[protocol.ApprovalRequestedPayload](e)
		if err != nil {
			return nil, typ, err
		}
		n.Data.Approval = &Approval{ID: clip(p.ApprovalID, maxShort), Summary: clip(p.Summary, maxText),
			Risk: clip(p.Risk, maxShort), Choices: clipAll(p.Choices)}
	case TypeNeedsInput:
		p, err := protocol.DecodePayload[protocol.ClarifyRequestedPayload](e)
		if err != nil {
			return nil, typ, err
		}
		n.Data.Clarify = &Clarify{ID: clip(p.ClarifyID, maxShort), Question: clip(p.Question, maxText),
			Choices: clipAll(p.Choices), InputMode: clip(p.InputMode, maxShort)}
	case TypeGoal:
		p, err := protocol.DecodePayload[protocol.GoalUpdatedPayload](e)
		if err != nil {
			return nil, typ, err
		}
		n.Data.Goal = &Goal{State: clip(p.State, maxShort), Text: clip(p.Text, maxText), Turns: p.Turns, Reason: clip(p.Reason, maxShort)}
	case TypeFinished:
		st, _ := session.TerminalStatus(e)
		f := &Finished{Status: st, Event: e.Type, Summary: summary}
		switch e.Type {
		case protocol.EventDone:
			p, _ := protocol.DecodePayload[protocol.DonePayload](e)
			if p.Result != "" { // the run's final text, as the done event carries it
				f.Summary = clip(strings.TrimSpace(p.Result), maxText)
			}
			if p.Usage != nil {
				u := *p.Usage
				u.Model = clip(u.Model, maxShort)
				f.Usage = &u
			}
		case protocol.EventCancelled:
			p, _ := protocol.DecodePayload[protocol.CancelledPayload](e)
			f.Message = clip(p.Reason, maxText)
		case protocol.EventError:
			p, _ := protocol.DecodePayload[protocol.ErrorPayload](e)
			f.Code, f.Message = clip(p.Code, maxShort), clip(p.Message, maxText)
		}
		n.Data.Finished = f
	}
	body, err := json.Marshal(n)
	return body, typ, err
}

// clip bounds s to n bytes, on a rune boundary.
func clip(s string, n int) string { return protocol.Truncate(s, n) }

func clipAll(ss []string) []string {
	out := make([]string, 0, min(len(ss), maxChoices))
	for _, s := range ss[:min(len(ss), maxChoices)] {
		out = append(out, clip(s, maxShort))
	}
	return out
}
