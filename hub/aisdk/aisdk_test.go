package aisdk

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
			add(protocol.EventToolDone, fmt.Sprintf(`{"tool_call_id":%q,"status":"ok","duration_ms":1,"error":%v,"result":%q}`, id, b&0x40 != 0, text))
		case 5:
			add(protocol.EventProgress, fmt.Sprintf(`{"text":%q}`, text))
		case 6:
			add(protocol.EventApprovalReq, `{"approval_id":"p","summary":"s","risk":"low","choices":["once"]}`)
		case 7:
			add(protocol.EventApprovalRes, `{"approval_id":"p","choice":"once","status":"resolved"}`)
		case 8:
			add(protocol.EventClarifyReq, `{"clarify_id":"c","question":"q","choices":[],"input_mode":"text"}`)
		}
	})
}

// verify checks the rules the AI SDK's processUIMessageStream enforces
// ("ai" 7.x: a delta or end needs its part started, a tool output needs
// its tool invocation) and that the stream is start … finish.
func verify(chunks []Chunk) error {
	text, reasoning, tools := map[any]bool{}, map[any]bool{}, map[any]bool{}
	for i, c := range chunks {
		if _, err := json.Marshal(c); err != nil {
			return err
		}
		typ := c.Type()
		if (i == 0) != (typ == "start") {
			return fmt.Errorf("chunk %d is %s", i, typ)
		}
		if (i == len(chunks)-1) != (typ == "finish") {
			return fmt.Errorf("chunk %d of %d is %s", i, len(chunks), typ)
		}
		var err error
		switch typ {
		case "text-start":
			text[c["id"]] = true
		case "text-delta", "text-end":
			if !text[c["id"]] {
				err = fmt.Errorf("text %v not started", c["id"])
			}
			if typ == "text-end" {
				delete(text, c["id"])
			}
		case "reasoning-start":
			reasoning[c["id"]] = true
		case "reasoning-delta", "reasoning-end":
			if !reasoning[c["id"]] {
				err = fmt.Errorf("reasoning %v not started", c["id"])
			}
			if typ == "reasoning-end" {
				delete(reasoning, c["id"])
			}
		case "tool-input-start", "tool-input-available":
			tools[c["toolCallId"]] = true
		case "tool-output-available", "tool-output-error":
			if !tools[c["toolCallId"]] {
				err = fmt.Errorf("no tool invocation %v", c["toolCallId"])
			}
		case "error":
			if _, ok := c["errorText"].(string); !ok {
				err = fmt.Errorf("errorText %v", c["errorText"])
			}
		case "finish":
			if len(text)+len(reasoning) > 0 {
				err = fmt.Errorf("finish with open text %v reasoning %v", text, reasoning)
			}
		case "start", "start-step", "finish-step", "abort", DataApproval, DataClarify, DataEvent:
		default:
			err = fmt.Errorf("unknown chunk type %q", typ)
		}
		if err != nil {
			return fmt.Errorf("chunk %d (%s): %w", i, typ, err)
		}
	}
	return nil
}

// Any run maps to a UI message stream the AI SDK assembles, and a second
// fold yields the same chunks (a chunk's index is its sequence).
func FuzzMapper(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 0x10, 0x13, 0x14, 0x54, 0x01})
	f.Add([]byte{0x11, 0x00, 0x12, 0x06, 0x07, 0x08, 0x05, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			return
		}
		run := fuzzRun(data)
		fold := func() []Chunk {
			var m Mapper
			var out []Chunk
			for i := range run {
				out = append(out, m.Map(&run[i])...)
			}
			return out
		}
		a := fold()
		if err := verify(a); err != nil {
			t.Fatal(err)
		}
		if b := fold(); !reflect.DeepEqual(a, b) {
			t.Fatal("two folds differ")
		}
	})
}
