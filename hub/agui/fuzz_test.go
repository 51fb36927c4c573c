package agui

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/runhub/runhub/internal/fuzzrun"
	"github.com/runhub/runhub/protocol"
)

// fuzzRun turns bytes into a run's journal (fuzzrun.Run): run.started,
// one event per byte, a terminal event chosen by the last byte.
func fuzzRun(data []byte) []protocol.Envelope {
	return fuzzrun.Run(data, func(b byte, id, text string, add fuzzrun.Add) {
		switch b % 9 {
		case 0:
			add(protocol.EventTokenDelta, fmt.Sprintf(`{"message_id":%q,"text":%q}`, id, text))
		case 1:
			add(protocol.EventReasoningDelta, fmt.Sprintf(`{"block_id":%q,"text":%q}`, id, text))
		case 2:
			add(protocol.EventReasoningDone, fmt.Sprintf(`{"block_id":%q,"text":%q}`, id, text))
		case 3:
			add(protocol.EventToolStarted, fmt.Sprintf(`{"tool_call_id":%q,"name":"t","args":{"q":%q}}`, id, text))
		case 4:
			add(protocol.EventToolDone, fmt.Sprintf(`{"tool_call_id":%q,"status":"ok","duration_ms":1,"error":false,"result":%q}`, id, text))
		case 5:
			add(protocol.EventToolUpdated, fmt.Sprintf(`{"tool_call_id":%q,"stream":"stdout","text":%q}`, id, text))
		case 6:
			add(protocol.EventApprovalReq, `{"approval_id":"p","summary":"s","risk":"low","choices":["once"]}`)
		case 7:
			add(protocol.EventUsageUpdated, `{"input_tokens":1,"output_tokens":2,"model":"m","provider":"p","duration_ms":3}`)
		case 8:
			add(protocol.EventError, `{"code":"provider_error","message":"retrying","terminal":false}`)
		}
	})
}

// verify checks the order rules of the AG-UI client's verifier
// (verifyEvents of @ag-ui/client 1.0.0) that a single run's stream must
// keep, and that everything opened is closed before the run's last event.
func verify(evs []Event) error {
	text, rmsg, rspan, tool, step := map[any]bool{}, map[any]bool{}, map[any]bool{}, map[any]bool{}, map[any]bool{}
	open := func(set map[any]bool, id any, what string) error {
		if set[id] {
			return fmt.Errorf("%s %v started while in progress", what, id)
		}
		set[id] = true
		return nil
	}
	need := func(set map[any]bool, id any, what string, end bool) error {
		if !set[id] {
			return fmt.Errorf("%s %v not in progress", what, id)
		}
		if end {
			delete(set, id)
		}
		return nil
	}
	for i, e := range evs {
		if _, err := json.Marshal(e); err != nil {
			return err
		}
		if _, ok := e["timestamp"].(int64); !ok {
			return fmt.Errorf("event %d: timestamp %T", i, e["timestamp"])
		}
		typ := e.Type()
		if (i == 0) != (typ == RunStarted) {
			return fmt.Errorf("event %d is %s", i, typ)
		}
		if (i == len(evs)-1) != (typ == RunFinished || typ == RunError) {
			return fmt.Errorf("event %d of %d is %s", i, len(evs), typ)
		}
		var err error
		switch typ {
		case TextMessageStart:
			err = open(text, e["messageId"], "text")
		case TextMessageContent:
			if _, ok := e["delta"].(string); !ok {
				err = fmt.Errorf("delta %v", e["delta"])
			} else {
				err = need(text, e["messageId"], "text", false)
			}
		case TextMessageEnd:
			err = need(text, e["messageId"], "text", true)
		case ReasoningStart:
			err = open(rspan, e["messageId"], "reasoning span")
		case ReasoningMessageStart:
			err = open(rmsg, e["messageId"], "reasoning message")
		case ReasoningMessageContent:
			err = need(rmsg, e["messageId"], "reasoning message", false)
		case ReasoningMessageEnd:
			err = need(rmsg, e["messageId"], "reasoning message", true)
		case ReasoningEnd:
			err = need(rspan, e["messageId"], "reasoning span", true)
		case ToolCallStart:
			err = open(tool, e["toolCallId"], "tool call")
		case ToolCallArgs:
			err = need(tool, e["toolCallId"], "tool call", false)
		case ToolCallEnd:
			err = need(tool, e["toolCallId"], "tool call", true)
		case StepStarted:
			err = open(step, e["stepName"], "step")
		case StepFinished:
			err = need(step, e["stepName"], "step", true)
		case RunFinished, RunError:
			if len(text)+len(rmsg)+len(rspan)+len(tool)+len(step) > 0 {
				err = fmt.Errorf("%s with open text %v reasoning %v %v tools %v steps %v", typ, text, rmsg, rspan, tool, step)
			}
		}
		if err != nil {
			return fmt.Errorf("event %d (%s): %w", i, typ, err)
		}
	}
	return nil
}

// Any run maps to a stream the AG-UI client accepts, and resuming after
// any of its events yields exactly the rest.
func FuzzMapper(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x63, 0x63, 0x03, 0x00})                   // text with an empty message id, a tool
	f.Add([]byte{0x11, 0x12, 0x10, 0x20, 0x13, 0x14, 0x01}) // reasoning, text, tool, result
	f.Add([]byte{0x01, 0x10, 0x13, 0x23, 0x24, 0x02})       // reasoning and text open at a failure
	f.Add([]byte{0x33, 0x33, 0x34, 0x30, 0x31, 0x05, 0x06, 0x07, 0x08, 0x04})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			return
		}
		run := fuzzRun(data)
		var m Mapper
		type out struct {
			id string
			ev Event
		}
		var all []out
		for i := range run {
			for k, e := range m.Map(&run[i]) {
				all = append(all, out{EventID("r", run[i].Seq, k), e})
			}
		}
		evs := make([]Event, len(all))
		for i := range all {
			evs[i] = all[i].ev
		}
		if err := verify(evs); err != nil {
			t.Fatalf("%v\nrun %d events", err, len(run))
		}
		// Resume after one id chosen by the input.
		cut := 0
		if len(data) > 0 {
			cut = int(data[0]) % len(all)
		}
		pos, err := ParseEventID(all[cut].id)
		if err != nil {
			t.Fatal(err)
		}
		var m2 Mapper
		var rest []out
		for i := range run {
			for k, e := range m2.Map(&run[i]) {
				if !pos.Skip(run[i].Seq, k) {
					rest = append(rest, out{EventID("r", run[i].Seq, k), e})
				}
			}
		}
		if want := all[cut+1:]; len(rest)+len(want) > 0 && !reflect.DeepEqual(rest, want) {
			t.Fatalf("resume after %s: %d events, want %d", all[cut].id, len(rest), len(all)-cut-1)
		}
	})
}
