// Package fuzzrun turns fuzz bytes into a run's journal, for the fuzzers
// of the event mappings (hub/agui, hub/aisdk): run.started, then one event
// per byte but the last, then a terminal event chosen by the last byte.
package fuzzrun

import (
	"encoding/json"

	"github.com/runhub/runhub/protocol"
)

// Add appends one non-terminal event of typ with payload to the run.
type Add func(typ protocol.EventType, payload string)

// Run is the journal of run "r" in session "s" that data draws: event is
// called for each byte but the last with an id and a text drawn from it
// (either may be empty, as the journal allows) and adds that byte's
// events; the last byte picks done, cancelled or a terminal error.
func Run(data []byte, event func(b byte, id, text string, add Add)) []protocol.Envelope {
	ids := []string{"", "a", "b"}
	texts := []string{"", "x ", "y"}
	var out []protocol.Envelope
	put := func(typ protocol.EventType, terminal bool, payload string) {
		seq := uint64(len(out) + 1)
		out = append(out, protocol.Envelope{RunID: "r", SessionID: "s", Seq: seq, EventID: protocol.EventID("r", seq),
			Type: typ, Terminal: terminal, CreatedAt: 1, Payload: json.RawMessage(payload)})
	}
	add := func(typ protocol.EventType, payload string) { put(typ, false, payload) }
	put(protocol.EventRunStarted, false, `{"message":"m","profile":"","model":"","provider":"sim","workspace":"","toolsets":[],"source":"user"}`)
	for _, b := range data[:max(len(data)-1, 0)] {
		event(b, ids[int(b>>4)%3], texts[int(b>>6)%3], add)
	}
	last := byte(0)
	if len(data) > 0 {
		last = data[len(data)-1]
	}
	switch last % 3 {
	case 0:
		put(protocol.EventDone, true, `{"status":"completed","usage":null}`)
	case 1:
		put(protocol.EventCancelled, true, `{"reason":"cancelled by user","partial":true}`)
	case 2:
		put(protocol.EventError, true, `{"code":"provider_error","message":"boom","terminal":true}`)
	}
	return out
}
