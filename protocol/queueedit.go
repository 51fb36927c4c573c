package protocol

// Queue edits over HTTP (protocol.md §9.4): the owner of a session sees,
// edits, reorders and removes the messages waiting in its queue.

// QueuedItem is one queued message as GET /v1/sessions/{sid}/queue lists
// it: the whole message (as journaled, redacted), not only its preview.
type QueuedItem struct {
	ID       string  `json:"id"`
	Message  string  `json:"message"`
	Preview  string  `json:"preview"`
	QueuedAt float64 `json:"queued_at"`
}

// QueueState answers every queue route: the queue after the request.
type QueueState struct {
	SessionID string       `json:"session_id"`
	Depth     int          `json:"depth"`
	Items     []QueuedItem `json:"items"`
	// EventID is the queue.updated journaled on the session's active run
	// for this change (opt: none when the session has no started run).
	EventID string `json:"event_id,omitempty"`
	// Duplicate: the Idempotency-Key was seen before; nothing changed
	// (opt).
	Duplicate bool `json:"duplicate,omitempty"`
	// Stop is the result of the cancel of DELETE …/queue?stop=true (opt).
	Stop *ControlResult `json:"stop,omitempty"`
}

// QueueEditRequest is the body of PATCH /v1/sessions/{sid}/queue/{qid}.
type QueueEditRequest struct {
	Message *string `json:"message"`
}

// QueueOrderRequest is the body of PUT /v1/sessions/{sid}/queue:
// every queued id, in the new order.
type QueueOrderRequest struct {
	IDs []string `json:"ids"`
}
