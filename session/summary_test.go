package session_test

import (
	"encoding/json"
	"testing"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// TerminalStatus agrees with the fold of a whole run for every terminal
// event.
func TestTerminalStatus(t *testing.T) {
	cases := []struct {
		typ     protocol.EventType
		payload string
	}{
		{protocol.EventDone, `{"status":"completed","usage":null}`},
		{protocol.EventCancelled, `{"reason":"cancelled by user","partial":false}`},
		{protocol.EventError, `{"code":"interrupted","message":"m","terminal":true}`},
		{protocol.EventError, `{"code":"timeout","message":"m","terminal":true}`},
		{protocol.EventError, `{"code":"provider_error","message":"m","terminal":true}`},
	}
	for _, c := range cases {
		r := session.NewRun("r1", "s1")
		start := protocol.Envelope{RunID: "r1", SessionID: "s1", Seq: 1, Type: protocol.EventRunStarted,
			Payload: json.RawMessage(`{"message":"m","profile":"","model":"","provider":"sim","workspace":"","toolsets":[],"source":"user"}`)}
		end := protocol.Envelope{RunID: "r1", SessionID: "s1", Seq: 2, Type: c.typ, Terminal: true, Payload: json.RawMessage(c.payload)}
		for _, e := range []*protocol.Envelope{&start, &end} {
			if err := r.Apply(e); err != nil {
				t.Fatalf("%s %s: %v", c.typ, c.payload, err)
			}
		}
		got, ok := session.TerminalStatus(&end)
		if !ok || got != r.Status {
			t.Fatalf("%s %s: TerminalStatus %q %v, the fold says %q", c.typ, c.payload, got, ok, r.Status)
		}
	}
	if s, ok := session.TerminalStatus(&protocol.Envelope{Type: protocol.EventTokenDelta}); ok || s != "" {
		t.Fatalf("a token is terminal: %q", s)
	}
}
