package protocol

import (
	"encoding/json"
	"slices"
	"time"
)

// Envelope is one journal row and one replayable event.
//
// Seq starts at 1 and is contiguous per run; EventID is RunID+":"+Seq.
// Exactly one event per run has Terminal set, and it is the last.
// Payload is kept as raw JSON so an event is encoded once and sent to many
// tabs unchanged; use DecodePayload for a typed view.
type Envelope struct {
	EventID   string          `json:"event_id"`
	Seq       uint64          `json:"seq"`
	RunID     string          `json:"run_id"`
	SessionID string          `json:"session_id"`
	Type      EventType       `json:"type"`
	CreatedAt float64         `json:"created_at"`
	Terminal  bool            `json:"terminal"`
	Payload   json.RawMessage `json:"payload"`
}

// Cursor returns the cursor of this event.
func (e *Envelope) Cursor() Cursor { return Cursor{RunID: e.RunID, Seq: e.Seq} }

// Timestamp converts a time to the envelope's created_at form: Unix seconds
// with fractions (microsecond precision).
func Timestamp(t time.Time) float64 {
	return float64(t.UnixMicro()) / 1e6
}

// Time converts created_at back to a time.Time.
func Time(ts float64) time.Time {
	return time.UnixMicro(int64(ts*1e6 + 0.5))
}

// NewEvent builds an unsequenced envelope (Seq and EventID are assigned by
// the journal) with payload marshalled from p. Terminal is derived from the
// type and payload (see IsTerminal).
func NewEvent(runID, sessionID string, typ EventType, p any) (Envelope, error) {
	raw, ok := appendTokenDelta(nil, p)
	if !ok {
		var err error
		if raw, err = json.Marshal(p); err != nil {
			return Envelope{}, Errorf(CodeInvalidPayload, "payload of %s: %v", typ, err)
		}
	}
	e := Envelope{RunID: runID, SessionID: sessionID, Type: typ, Payload: raw}
	e.Terminal = IsTerminal(typ, raw)
	return e, nil
}

// IsTerminal reports whether an event of this type and payload ends its run:
// done and cancelled always, error when its payload says terminal (an error
// payload without the field is terminal).
func IsTerminal(typ EventType, payload json.RawMessage) bool {
	switch typ {
	case EventDone, EventCancelled:
		return true
	case EventError:
		var p struct {
			Terminal *bool `json:"terminal"`
		}
		if json.Unmarshal(payload, &p) != nil || p.Terminal == nil {
			return true
		}
		return *p.Terminal
	}
	return false
}

// appendTokenDelta appends what json.Marshal makes of p when p is a
// TokenDeltaPayload whose strings encoding/json writes as they are (the
// payload drivers emit for every token), and reports whether it did;
// otherwise it appends nothing (FuzzNewEventDelta).
func appendTokenDelta(dst []byte, p any) ([]byte, bool) {
	d, ok := p.(TokenDeltaPayload)
	if !ok || !plainJSON(d.MessageID) || !plainJSON(d.Text) {
		return dst, false
	}
	dst = slices.Grow(dst, len(`{"message_id":"","text":""}`)+len(d.MessageID)+len(d.Text))
	dst = append(dst, `{"message_id":"`...)
	dst = append(dst, d.MessageID...)
	dst = append(dst, `","text":"`...)
	dst = append(dst, d.Text...)
	return append(dst, `"}`...), true
}
