package journal

import "github.com/runhub/runhub/protocol"

// Notable reports whether an appended event is one a person may need to
// hear about while no tab is open: a prompt (approval.requested,
// clarify.requested), a goal change (goal.updated) or the run's terminal
// event. A backend with its outbox on records each notable event in the
// outbox in the same step that appends it (journal/redis mirrors this
// choice in append.lua).
func Notable(e *protocol.Envelope) bool {
	switch e.Type {
	case protocol.EventApprovalReq, protocol.EventClarifyReq, protocol.EventGoalUpdated:
		return true
	}
	return e.Terminal
}

// OutboxEntry is one notable event waiting in a backend's outbox: a
// reference to the event (read it with Log.Read) and the sender's state,
// which the backend stores without reading it.
type OutboxEntry struct {
	// ID is the entry's id, unique in the outbox and opaque.
	ID        string             `json:"-"`
	SessionID string             `json:"s"`
	RunID     string             `json:"r"`
	Seq       uint64             `json:"q"`
	Type      protocol.EventType `json:"t"`
	// State is what the sender saved last (OutboxSave), nil at first.
	State []byte `json:"st,omitempty"`
}
