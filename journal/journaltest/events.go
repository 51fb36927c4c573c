package journaltest

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// event builds an unsequenced event with payload p.
func event(t testing.TB, sid, rid string, typ protocol.EventType, p any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent(rid, sid, typ, p)
	if err != nil {
		t.Fatalf("NewEvent(%s): %v", typ, err)
	}
	return e
}

// rawEvent builds an unsequenced event with a literal JSON payload.
func rawEvent(sid, rid string, typ protocol.EventType, payload string) protocol.Envelope {
	raw := json.RawMessage(payload)
	return protocol.Envelope{RunID: rid, SessionID: sid, Type: typ, Payload: raw,
		Terminal: protocol.IsTerminal(typ, raw)}
}

func tokenEvent(t testing.TB, sid, rid, text string) protocol.Envelope {
	return event(t, sid, rid, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: text})
}

func progressEvent(t testing.TB, sid, rid, text string) protocol.Envelope {
	return event(t, sid, rid, protocol.EventProgress, protocol.ProgressPayload{Text: text})
}

func statusEvent(t testing.TB, sid, rid string) protocol.Envelope {
	return event(t, sid, rid, protocol.EventStatus, protocol.StatusPayload{Status: protocol.StatusRunning, Controls: []string{protocol.OpCancel}})
}

func doneEvent(t testing.TB, sid, rid string) protocol.Envelope {
	return event(t, sid, rid, protocol.EventDone, protocol.DonePayload{Status: "completed",
		Usage: &protocol.Usage{InputTokens: 1200, OutputTokens: 340, Model: "m", Provider: "p", DurationMS: 5}})
}

func cancelledEvent(t testing.TB, sid, rid string) protocol.Envelope {
	return event(t, sid, rid, protocol.EventCancelled, protocol.CancelledPayload{Reason: "user", Partial: true})
}

func errorEvent(t testing.TB, sid, rid string, terminal bool) protocol.Envelope {
	return event(t, sid, rid, protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInternal, Message: "boom", Terminal: terminal})
}

// terminalEvents builds one event of each terminal kind.
func terminalEvents(t testing.TB, sid, rid string) map[string]protocol.Envelope {
	return map[string]protocol.Envelope{
		"done":      doneEvent(t, sid, rid),
		"cancelled": cancelledEvent(t, sid, rid),
		"error":     errorEvent(t, sid, rid, true),
	}
}

func jsonUnmarshal(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
