package agui

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/runhub/runhub/protocol"
)

func TestParseEventID(t *testing.T) {
	for in, want := range map[string]Position{
		"r_a:3.0":    {RunID: "r_a", Seq: 3, Index: 0},
		"r_a:3.12":   {RunID: "r_a", Seq: 3, Index: 12},
		"r_a:0":      {RunID: "r_a", Seq: 0, Index: -1},
		"r_a:17":     {RunID: "r_a", Seq: 17, Index: -1},
		"r.x_y:2.1":  {RunID: "r.x_y", Seq: 2, Index: 1},
		"r_a.b:3.0x": {},
	} {
		got, err := ParseEventID(in)
		if want.RunID == "" {
			if err == nil {
				t.Errorf("%q: no error, got %+v", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "junk", "r_a:", ":3.0", "r_a:3.", "r_a:3.-1", "r_a:3.01", "r_a:03.0", "r_a:3.+1", "r a:3.0"} {
		if _, err := ParseEventID(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		} else if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeBadCursor && pe.Code != protocol.CodeBadRequest {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestPositionSkip(t *testing.T) {
	p := Position{Seq: 5, Index: 1}
	for _, c := range []struct {
		seq  uint64
		k    int
		skip bool
	}{{4, 9, true}, {5, 0, true}, {5, 1, true}, {5, 2, false}, {6, 0, false}} {
		if got := p.Skip(c.seq, c.k); got != c.skip {
			t.Errorf("Skip(%d,%d) = %v", c.seq, c.k, got)
		}
	}
	native := Position{Seq: 5, Index: -1}
	if !native.Skip(5, 7) || native.Skip(6, 0) {
		t.Error("a native cursor skips all of its seq and nothing after")
	}
	if (Position{}).Skip(1, 0) {
		t.Error("the zero position skips nothing")
	}
}

func ev(seq uint64, typ protocol.EventType, terminal bool, payload string) *protocol.Envelope {
	return &protocol.Envelope{RunID: "r", SessionID: "s", Seq: seq, Type: typ, Terminal: terminal,
		CreatedAt: 1.5, Payload: json.RawMessage(payload)}
}

func types(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type())
	}
	return out
}

// A failed run ends whatever is open before RUN_ERROR, in a fixed order.
func TestMapperClosesBeforeTheEnd(t *testing.T) {
	var m Mapper
	var got []string
	for _, e := range []*protocol.Envelope{
		ev(1, protocol.EventRunStarted, false, `{"message":"hi","profile":"","model":"","provider":"sim","workspace":"","toolsets":null,"source":"user"}`),
		ev(2, protocol.EventReasoningDelta, false, `{"block_id":"b1","text":"r0 "}`),
		ev(3, protocol.EventTokenDelta, false, `{"message_id":"m1","text":"w0 "}`),
		ev(4, protocol.EventToolStarted, false, `{"tool_call_id":"t1","name":"x","args":{"a":1}}`),
		ev(5, protocol.EventTokenDelta, false, `{"message_id":"m1","text":""}`),
		ev(6, protocol.EventError, true, `{"code":"provider_error","message":"boom","terminal":true}`),
	} {
		got = append(got, types(m.Map(e))...)
	}
	want := []string{RunStarted, ReasoningStart, ReasoningMessageStart, ReasoningMessageContent,
		TextMessageStart, TextMessageContent, ToolCallStart, ToolCallArgs, ToolCallEnd, StepStarted,
		ReasoningMessageEnd, ReasoningEnd, TextMessageEnd, StepFinished, RunError}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// Events AG-UI has no type for travel as CUSTOM runhub.<type> with the
// journal payload; tool results keep a string result as its text.
func TestMapperCustomAndResult(t *testing.T) {
	var m Mapper
	out := m.Map(ev(2, protocol.EventApprovalReq, false, `{"approval_id":"a1","summary":"s","risk":"low","choices":["once"]}`))
	if len(out) != 1 || out[0]["name"] != "runhub.approval.requested" || string(out[0]["value"].(json.RawMessage)) != `{"approval_id":"a1","summary":"s","risk":"low","choices":["once"]}` || out[0]["timestamp"] != int64(1500) {
		t.Fatalf("custom %v", out)
	}
	out = m.Map(ev(3, protocol.EventToolDone, false, `{"tool_call_id":"t1","status":"ok","duration_ms":3,"error":false,"result":"plain text"}`))
	if out[0]["content"] != "plain text" || out[0]["toolCallId"] != "r:t1" {
		t.Fatalf("result %v", out)
	}
	out = m.Map(ev(4, protocol.EventToolDone, false, `{"tool_call_id":"t2","status":"ok","duration_ms":3,"error":false,"result":{"n":1}}`))
	if out[0]["content"] != `{"n":1}` {
		t.Fatalf("result %v", out)
	}
}
