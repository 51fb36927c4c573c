package agui

import (
	"testing"

	"github.com/runhub/runhub/protocol"
)

// Any run maps to turns each of which the AG-UI client accepts as one run:
// RUN_STARTED first, RUN_FINISHED (an interrupt outcome at each prompt) or
// RUN_ERROR last, nothing left open; one turn per prompt, and the events
// of every turn but the first are what follows its prompt.
func FuzzTurns(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x03, 0x00, 0x06, 0x10, 0x04, 0x00})       // text, a tool, an approval inside it, more text
	f.Add([]byte{0x01, 0x10, 0x06, 0x06, 0x24, 0x02})       // reasoning open at an approval, two approvals
	f.Add([]byte{0x33, 0x06, 0x34, 0x30, 0x06, 0x08, 0x01}) // approval, then cancelled
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			return
		}
		run := fuzzRun(data)
		var m Turns
		var turns [][]Event
		prompts := 0
		for i := range run {
			if IsPrompt(run[i].Type) {
				prompts++
			}
			for _, te := range m.Map(&run[i]) {
				for len(turns) <= te.Turn {
					turns = append(turns, nil)
				}
				turns[te.Turn] = append(turns[te.Turn], te.Event)
			}
		}
		if len(turns) != prompts+1 {
			t.Fatalf("%d turns for %d prompts", len(turns), prompts)
		}
		for k, evs := range turns {
			if err := verify(evs); err != nil {
				t.Fatalf("turn %d: %v", k, err)
			}
			last := evs[len(evs)-1]
			outcome, _ := last["outcome"].(map[string]any)
			if interrupt := k < len(turns)-1; interrupt != (outcome != nil && outcome["type"] == "interrupt") {
				t.Fatalf("turn %d of %d ends %v", k, len(turns), last)
			}
		}
	})
}

// A prompt's interrupt carries what the schema has room for: its id, the
// reason, the question, the answer's shape and the tool it concerns.
func TestTurns_Interrupt(t *testing.T) {
	run := fuzzRun([]byte{0x15, 0x06, 0x00}) // a tool "a", an approval inside it
	var m Turns
	var in map[string]any
	for i := range run {
		for _, te := range m.Map(&run[i]) {
			if te.Event.Type() == RunFinished && te.Turn == 0 {
				in = te.Event["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
			}
		}
	}
	if in == nil || in["id"] != "p" || in["reason"] != ReasonApproval || in["message"] != "s" || in["toolCallId"] != ID("r", "a") {
		t.Fatalf("interrupt %v", in)
	}
	if _, ok := in["responseSchema"].(map[string]any); !ok {
		t.Fatalf("no responseSchema in %v", in)
	}
	e := protocol.Envelope{RunID: "r", SessionID: "s", Seq: 9, Type: protocol.EventClarifyReq, CreatedAt: 1,
		Payload: []byte(`{"clarify_id":"c","question":"which?","choices":["a","b"],"input_mode":"choice"}`)}
	var m2 Turns
	out := m2.Map(&e)
	if len(out) < 3 || out[len(out)-1].Turn != 1 || out[len(out)-1].Event.Type() != RunStarted {
		t.Fatalf("clarify: %v", out)
	}
}
