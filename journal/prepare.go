package journal

import (
	"time"

	"github.com/runhub/runhub/protocol"
)

// Prepare readies an event for persistence: it validates it
// (protocol.ValidateEvent), redacts secrets from its payload, re-checks the
// size bound after redaction and sets CreatedAt when zero. It returns a copy;
// e is not modified. Every backend calls it before writing anything.
func Prepare(e protocol.Envelope, now time.Time) (protocol.Envelope, error) {
	if err := protocol.ValidateEvent(&e); err != nil {
		return e, err
	}
	e.Payload = RedactJSON(e.Payload)
	if len(e.Payload) > protocol.MaxPayloadBytes {
		return e, protocol.Errorf(protocol.CodeTooLarge, "payload: is %d bytes after redaction, limit %d", len(e.Payload), protocol.MaxPayloadBytes)
	}
	if e.CreatedAt == 0 {
		e.CreatedAt = protocol.Timestamp(now)
	}
	e.Seq, e.EventID = 0, ""
	return e, nil
}
