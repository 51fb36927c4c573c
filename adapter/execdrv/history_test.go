package execdrv

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/protocol"
)

// historyScript's first run streams text around a tool call that ends and
// one that never does; its second calls a tool that fails and streams no
// text; any other run only records its start line.
const historyScript = `IFS= read -r start
printf '%s\n' "$start" >> "$OUT/start.json"
case "$start" in
*'"message":"what is in build?"'*)
	echo '{"type":"token.delta","payload":{"message_id":"m1","text":"let me look "}}'
	echo '{"type":"tool.started","payload":{"tool_call_id":"t1","name":"ls","args":{"dir":"build"}}}'
	echo '{"type":"tool.updated","payload":{"tool_call_id":"t1","stream":"stdout","text":"a\nb\n"}}'
	echo '{"type":"tool.done","payload":{"tool_call_id":"t1","status":"ok","duration_ms":5,"error":false,"result":{"files":["a","b"]}}}'
	echo '{"type":"tool.started","payload":{"tool_call_id":"t2","name":"du","args":{}}}'
	echo '{"type":"token.delta","payload":{"message_id":"m1","text":"two files"}}' ;;
*'"message":"clean up"'*)
	echo '{"type":"tool.started","payload":{"tool_call_id":"t1","name":"rm","args":{"path":"build/a"}}}'
	echo '{"type":"tool.done","payload":{"tool_call_id":"t1","status":"failed","duration_ms":1,"error":true,"result":"permission denied"}}' ;;
esac
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`

// The start line's history carries the tool calls the command reported in
// the session's earlier runs, each with its end as its tool.done said
// (done: status, duration_ms, error, result; none for a call its run never
// ended): on the run's assistant turn, or on its user turn when the run
// streamed no text. The turns' role and content are what they were
// without tool calls, so a command that reads those alone sees no change.
func TestStartLine_HistoryCarriesToolCalls(t *testing.T) {
	h, out := setup(t, historyScript, nil)
	first := start(h, "", "what is in build?")
	ev := h.Events(first, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	sid := ev[0].SessionID
	for _, msg := range []string{"clean up", "and now?"} {
		drivertest.Terminal(t, h.Events(start(h, sid, msg), 10*time.Second), protocol.EventDone)
	}

	lines := strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "start.json"))), "\n")
	if len(lines) != 3 {
		t.Fatalf("start lines: %q", lines)
	}
	var starts [3]map[string]json.RawMessage
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &starts[i]); err != nil {
			t.Fatalf("start line %d: %v: %s", i, err, l)
		}
	}
	if got := string(starts[0]["history"]); got != "[]" {
		t.Errorf("first start line's history %s, want []", got)
	}
	const ls = `{"role":"user","content":"what is in build?"},` +
		`{"role":"assistant","content":"let me look two files","tool_calls":[` +
		`{"tool_call_id":"t1","name":"ls","args":{"dir":"build"},` +
		`"done":{"status":"ok","duration_ms":5,"error":false,"result":{"files":["a","b"]}}},` +
		`{"tool_call_id":"t2","name":"du","args":{}}]}`
	if got, want := string(starts[1]["history"]), "["+ls+"]"; got != want {
		t.Errorf("second start line's history\n got %s\nwant %s", got, want)
	}
	const rm = `{"role":"user","content":"clean up","tool_calls":[` +
		`{"tool_call_id":"t1","name":"rm","args":{"path":"build/a"},` +
		`"done":{"status":"failed","duration_ms":1,"error":true,"result":"permission denied"}}]}`
	if got, want := string(starts[2]["history"]), "["+ls+","+rm+"]"; got != want {
		t.Errorf("third start line's history\n got %s\nwant %s", got, want)
	}

	// What a command that knows only role and content reads is unchanged.
	var old []struct{ Role, Content string }
	if err := json.Unmarshal(starts[2]["history"], &old); err != nil {
		t.Fatal(err)
	}
	want := []struct{ Role, Content string }{{"user", "what is in build?"}, {"assistant", "let me look two files"}, {"user", "clean up"}}
	if len(old) != len(want) || old[0] != want[0] || old[1] != want[1] || old[2] != want[2] {
		t.Errorf("history as role and content: %+v, want %+v", old, want)
	}
}
