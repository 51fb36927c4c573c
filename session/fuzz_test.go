package session_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// Every event that passes protocol.ValidateEvent (what the journal accepts)
// folds: Apply never fails on its payload, and a failed Apply changes
// nothing.
func FuzzApplyValidEvent(f *testing.F) {
	for i, typ := range protocol.EventTypes() {
		for _, s := range []step{started, token, reasoning, toolStart, toolOut, toolDone, askA1, resolveA1, askQ1,
			resolveQ1, done, cancelled, status("paused"), errorEvent("timeout", "t", true), errorEvent("provider_error", "p", false),
			title, queued2, goalSet, usageStep} {
			if s.typ == typ {
				b, _ := json.Marshal(s.payload)
				f.Add(uint8(i), b)
			}
		}
	}
	f.Add(uint8(0), []byte(`{"message":"","profile":"","model":"","provider":"","workspace":"","toolsets":null,"source":""}`))
	f.Add(uint8(20), []byte(`{"code":"interrupted","message":"","terminal":true,"last_seq":3}`))
	types := protocol.EventTypes()
	f.Fuzz(func(t *testing.T, ti uint8, payload []byte) {
		typ := types[int(ti)%len(types)]
		e := protocol.Envelope{RunID: "r1", SessionID: "s1", Type: typ, Payload: payload}
		e.Terminal = protocol.IsTerminal(typ, payload)
		if protocol.ValidateEvent(&e) != nil {
			return
		}
		r := play(t, started, askA1, askQ1)
		before := r
		e.Seq, e.EventID = 4, "r1:4"
		err := r.Apply(&e)
		switch {
		case err == nil:
			if r.LastSeq != 4 || r.Terminal != e.Terminal {
				t.Fatalf("applied %s %s: LastSeq %d Terminal %v", typ, payload, r.LastSeq, r.Terminal)
			}
			if r.Terminal && (!r.Status.Terminal() || r.TerminalState != r.Status || len(r.Controls()) != 0) {
				t.Fatalf("terminal %s %s gives %+v", typ, payload, r)
			}
			if !r.Terminal && r.Status.Terminal() {
				t.Fatalf("non-terminal %s %s gives status %s", typ, payload, r.Status)
			}
		case errors.Is(err, session.ErrUnknownPrompt):
			if !reflect.DeepEqual(r, before) {
				t.Fatalf("failed Apply changed the run")
			}
		default:
			t.Fatalf("valid event %s %s: %v", typ, payload, err)
		}
	})
}
