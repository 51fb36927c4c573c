package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/runhub/runhub/protocol"
)

func TestDecodeServer(t *testing.T) {
	usage := &protocol.Usage{InputTokens: 3, OutputTokens: 4, Model: "m", Provider: "p", DurationMS: 5}
	env := &protocol.Envelope{EventID: "r1:2", Seq: 2, RunID: "r1", SessionID: "s1", Type: protocol.EventTokenDelta,
		CreatedAt: 1778750000.123, Payload: json.RawMessage(`{"message_id":"m1","text":"Hel"}`)}
	msgs := []any{
		&protocol.Welcome{Type: "welcome", Protocol: "runhub.v1", ConnID: "c1", HubID: "h1", Subject: "local",
			Limits: protocol.Limits{MaxFrameBytes: 1 << 20, MaxWatch: 1000, MaxMessageBytes: 1 << 18, StatusIntervalMS: 100}},
		&protocol.StatusMessage{Type: "status", Session: &protocol.SessionStatus{SessionID: "s1", Title: "t", RunID: "r1",
			Status: protocol.StatusAwaitingApproval, LastSeq: 7, LastEventID: "r1:7", ActiveControls: []string{"cancel", "approve"},
			PendingApproval: &protocol.PendingApproval{ApprovalID: "a1", Summary: "s", Choices: []string{"once"}},
			Progress:        "approval: s", Tokens: 5, Usage: usage, QueueDepth: 2,
			Goal: &protocol.GoalUpdatedPayload{State: "active", Text: "g"}, UpdatedAt: 1778750000.5}},
		&protocol.EventMessage{Type: "event", Event: env},
		&protocol.Replayed{Type: "replayed", SessionID: "s1", Cursor: "r1:2", Count: 2},
		&protocol.ControlResultMessage{Type: "control_result", ID: "c1", ControlResult: protocol.ControlResult{
			Accepted: true, Status: protocol.ResultAccepted, EventID: "r1:9", Message: "ok", RunID: "r1", SessionID: "s1"}},
		&protocol.ErrorMessage{Type: "error", Code: protocol.CodeBadCursor, Message: "cursor: unknown", Ref: "focus"},
		&protocol.Pong{Type: "pong", ID: "p1", Time: 1778750000.25},
		&protocol.Goaway{Type: "goaway", Reason: "draining", ReconnectAfterMS: 500},
	}
	for _, want := range msgs {
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := protocol.DecodeServer(b)
		if err != nil {
			t.Errorf("DecodeServer(%s): %v", b, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeServer(%s)\n got %#v\nwant %#v", b, got, want)
		}
	}

	// The control result's fields are flat on the wire.
	got, err := protocol.DecodeServer([]byte(`{"type":"control_result","id":"c9","accepted":false,"status":"conflict","message":"a run is active"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cr := got.(*protocol.ControlResultMessage); cr.ID != "c9" || cr.Status != protocol.ResultConflict || cr.Accepted || cr.Message != "a run is active" {
		t.Errorf("control_result = %+v", cr)
	}

	bad := []struct {
		in    string
		code  protocol.Code
		field string
	}{
		{`{"type":"subscribe"}`, protocol.CodeBadRequest, "type"},
		{`{"type":"hello","client":"c"}`, protocol.CodeBadRequest, "type"}, // a client message
		{`{}`, protocol.CodeBadRequest, "type"},
		{`{"type":7}`, protocol.CodeBadRequest, "type"},
		{`{"type":"pong","time":"now"}`, protocol.CodeBadRequest, "time"},
		{`{"type":"event","event":{"seq":"1"}}`, protocol.CodeBadRequest, "event.seq"},
		{`{"type":"status","session":{"tokens":"many"}}`, protocol.CodeBadRequest, "session.tokens"},
		{`{"type":"welcome","limits":{"max_watch":true}}`, protocol.CodeBadRequest, "limits.max_watch"},
		{`{"type":"pong"`, protocol.CodeBadRequest, ""},
		{`[]`, protocol.CodeBadRequest, ""},
		{``, protocol.CodeBadRequest, ""},
	}
	for _, tt := range bad {
		v, err := protocol.DecodeServer([]byte(tt.in))
		if v != nil {
			t.Errorf("DecodeServer(%s) = %#v with an error", tt.in, v)
		}
		wantError(t, err, tt.code, tt.field)
	}
}

func TestEncodeEvent(t *testing.T) {
	envs := []protocol.Envelope{
		{EventID: "r1:1", Seq: 1, RunID: "r1", SessionID: "s1", Type: protocol.EventRunStarted, CreatedAt: 1778750000.123,
			Payload: json.RawMessage(`{"message":"hi","profile":"","model":"m","provider":"p","workspace":"/w","toolsets":[],"source":"user"}`)},
		{EventID: "r1:2", Seq: 2, RunID: "r1", SessionID: "s1", Type: protocol.EventTokenDelta, CreatedAt: 1778750000.000001,
			Payload: json.RawMessage(`{"message_id":"m1","text":"line\nbreak <b>&amp; \u2028 é"}`)},
		{EventID: "r1:3", Seq: 3, RunID: "r1", SessionID: "s1", Type: protocol.EventDone, CreatedAt: 0.5, Terminal: true,
			Payload: json.RawMessage(`{"status":"completed","usage":null}`)},
	}
	for _, e := range envs {
		prefix := []byte(`{"type":"ping"}` + "\n")
		out, err := protocol.EncodeEvent(bytes.Clone(prefix), &e)
		if err != nil {
			t.Fatalf("EncodeEvent: %v", err)
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("EncodeEvent overwrote dst: %q", out)
		}
		wire := out[len(prefix):]
		if bytes.IndexByte(wire, '\n') >= 0 {
			t.Errorf("encoded event holds a newline, breaking NDJSON batches: %s", wire)
		}
		if parts := protocol.SplitBatch(out); len(parts) != 2 || !bytes.Equal(parts[1], wire) {
			t.Errorf("SplitBatch of a batch = %q", parts)
		}
		v, err := protocol.DecodeServer(wire)
		if err != nil {
			t.Fatalf("DecodeServer(%s): %v", wire, err)
		}
		m, ok := v.(*protocol.EventMessage)
		if !ok || m.Type != protocol.MsgEvent || m.Event == nil {
			t.Fatalf("decoded %#v, want an event message", v)
		}
		got := *m.Event
		if !jsonEqual(got.Payload, e.Payload) {
			t.Errorf("payload round trip\n got %s\nwant %s", got.Payload, e.Payload)
		}
		got.Payload = e.Payload
		if !reflect.DeepEqual(got, e) {
			t.Errorf("round trip\n got %s\nwant %s", dump(m.Event), dump(e))
		}
	}

	// A payload with spaces is compacted, and still means the same.
	e := protocol.Envelope{EventID: "r1:4", Seq: 4, RunID: "r1", SessionID: "s1", Type: protocol.EventProgress,
		Payload: json.RawMessage("{ \"text\" :\n \"x\" }")}
	out, err := protocol.EncodeEvent(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(out, '\n') >= 0 {
		t.Errorf("newline in %s", out)
	}
	v, _ := protocol.DecodeServer(out)
	if got := v.(*protocol.EventMessage).Event.Payload; string(got) != `{"text":"x"}` {
		t.Errorf("payload = %s", got)
	}

	// An invalid payload is an error and leaves dst as it was.
	e.Payload = json.RawMessage(`{"text":`)
	dst := []byte("keep")
	out, err = protocol.EncodeEvent(dst, &e)
	if err == nil || string(out) != "keep" {
		t.Errorf("EncodeEvent(invalid payload) = %q, %v", out, err)
	}
}

// jsonEqual reports whether a and b are the same JSON value (the encoder
// compacts and HTML-escapes raw payloads).
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
