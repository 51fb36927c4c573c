package session

import "github.com/runhub/runhub/protocol"

// TerminalStatus is the status a run's terminal event leaves it in
// (completed, cancelled, failed, interrupted or expired), as Run.Apply
// folds it; ok is false when e is not a terminal event.
func TerminalStatus(e *protocol.Envelope) (s protocol.Status, ok bool) {
	if !e.Terminal {
		return "", false
	}
	switch e.Type {
	case protocol.EventDone:
		return protocol.StatusCompleted, true
	case protocol.EventCancelled:
		return protocol.StatusCancelled, true
	case protocol.EventError:
		p, _ := protocol.DecodePayload[protocol.ErrorPayload](e)
		switch p.Code {
		case protocol.ErrorInterrupted:
			return protocol.StatusInterrupted, true
		case protocol.ErrorTimeout:
			return protocol.StatusExpired, true
		}
		return protocol.StatusFailed, true
	}
	return "", false
}
