package hub_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// GET /v1/runs/{rid} of a terminal run carries its final result (completed)
// or its error {code, message} (failed), on the wire under those names.
func TestAPI_RunStatusResultAndError(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	runStatus := func(body string) map[string]json.RawMessage {
		t.Helper()
		var sess protocol.CreateSessionResult
		if code := do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess); code != 201 {
			t.Fatalf("create: %d", code)
		}
		var start protocol.RunStartResult
		if code := do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", body, nil, &start); code != 202 {
			t.Fatalf("start: %d", code)
		}
		waitTerminal(t, th, start.RunID)
		var st map[string]json.RawMessage
		if code := do(t, "GET", th.URL+"/v1/runs/"+start.RunID, "", nil, &st); code != 200 {
			t.Fatalf("run status: %d", code)
		}
		return st
	}

	st := runStatus(`{"message":"hi","metadata":{"sim":{"tokens":3,"token_ms":1,"tools":0}}}`)
	if string(st["result"]) != `"w0 w1 w2 "` || st["error"] != nil || st["result_truncated"] != nil {
		t.Errorf("completed run status: result %s, error %s, result_truncated %s", st["result"], st["error"], st["result_truncated"])
	}

	st = runStatus(`{"message":"hi","metadata":{"sim":{"tokens":4,"token_ms":1,"tools":0,"fail":"error"}}}`)
	if string(st["terminal_state"]) != `"failed"` || st["result"] != nil ||
		!strings.Contains(string(st["error"]), `"code":"provider_error"`) || !strings.Contains(string(st["error"]), `"message":"simulated provider failure"`) {
		t.Errorf("failed run status: terminal_state %s, result %s, error %s", st["terminal_state"], st["result"], st["error"])
	}
}
