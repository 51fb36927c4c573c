package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runhub/runhub/protocol"
)

// done carries the run's final text (at most MaxResultBytes) and the seq
// of its last event before done; older events without them still pass.
func TestValidateEvent_DoneResult(t *testing.T) {
	ok := []string{
		`{"status":"completed","usage":null}`, // journaled before result existed
		`{"status":"completed","usage":null,"result":"","last_seq":0}`,
		`{"status":"completed","usage":null,"result":"` + strings.Repeat("a", protocol.MaxResultBytes) + `","truncated":true,"last_seq":41}`,
	}
	for _, p := range ok {
		e := protocol.Envelope{RunID: "r1", SessionID: "s1", Type: protocol.EventDone, Terminal: true, Payload: json.RawMessage(p)}
		if err := protocol.ValidateEvent(&e); err != nil {
			t.Errorf("%.60s…: %v", p, err)
		}
	}
	bad := []struct{ payload, field string }{
		{`{"status":"completed","usage":null,"result":"` + strings.Repeat("a", protocol.MaxResultBytes+1) + `"}`, "payload.result"},
		{`{"status":"completed","usage":null,"result":7}`, "payload.result"},
		{`{"status":"completed","usage":null,"truncated":"yes"}`, "payload.truncated"},
		{`{"status":"completed","usage":null,"last_seq":-1}`, "payload.last_seq"},
	}
	for _, tt := range bad {
		e := protocol.Envelope{RunID: "r1", SessionID: "s1", Type: protocol.EventDone, Terminal: true, Payload: json.RawMessage(tt.payload)}
		wantError(t, protocol.ValidateEvent(&e), protocol.CodeInvalidPayload, tt.field)
	}
	// The fields are on the wire under these names.
	e := event(t, protocol.EventDone, protocol.DonePayload{Status: "completed", Result: "hi", Truncated: true, LastSeq: 9})
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatal(err)
	}
	if m["result"] != "hi" || m["truncated"] != true || m["last_seq"] != float64(9) {
		t.Errorf("done payload %s", e.Payload)
	}
}

func TestCapResult(t *testing.T) {
	if s, cut := protocol.CapResult("short"); s != "short" || cut {
		t.Errorf("CapResult(short) = %q, %v", s, cut)
	}
	exact := strings.Repeat("x", protocol.MaxResultBytes)
	if s, cut := protocol.CapResult(exact); s != exact || cut {
		t.Errorf("CapResult(exactly the cap) cut it: %d bytes, %v", len(s), cut)
	}
	// A 3-byte character straddling the cap is left out whole.
	long := strings.Repeat("x", protocol.MaxResultBytes-1) + "€ and more"
	s, cut := protocol.CapResult(long)
	if !cut || len(s) != protocol.MaxResultBytes-1 || !utf8.ValidString(s) {
		t.Errorf("CapResult(long) = %d bytes, cut %v, valid %v", len(s), cut, utf8.ValidString(s))
	}
}

// RunStatus extends the wire with result, result_truncated and error;
// a live run carries none of them.
func TestRunStatus_ResultAndErrorOnTheWire(t *testing.T) {
	b, err := json.Marshal(protocol.RunStatus{RunID: "r1", Status: protocol.StatusRunning, ActiveControls: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"result"`, `"result_truncated"`, `"error"`} {
		if strings.Contains(string(b), f) {
			t.Errorf("live run status has %s: %s", f, b)
		}
	}
	b, err = json.Marshal(protocol.RunStatus{RunID: "r1", Status: protocol.StatusFailed, Terminal: true,
		Result: "", Error: &protocol.RunError{Code: protocol.ErrorProviderError, Message: "upstream 502"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"error":{"code":"provider_error","message":"upstream 502"}`) {
		t.Errorf("failed run status: %s", b)
	}
}
