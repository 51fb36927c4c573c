package openai

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/protocol"
)

// toolAgent is a runtime that calls tools: its first run streams text
// around a tool call that ends and one that never does; its second calls
// a tool that fails and streams no text.
type toolAgent struct{}

func (toolAgent) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	type ev struct {
		typ protocol.EventType
		p   any
	}
	text := func(s string) ev {
		return ev{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: s}}
	}
	call := func(id, name, args string) ev {
		return ev{protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: id, Name: name, Args: json.RawMessage(args)}}
	}
	end := func(id, status string, failed bool, result string) ev {
		return ev{protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: id, Status: status, DurationMS: 1, Error: failed, Result: json.RawMessage(result)}}
	}
	var evs []ev
	switch x.Request.Message {
	case "what is in build?":
		evs = []ev{text("let me look "), call("t1", "fs.ls", `{"dir": "build"}`), end("t1", "ok", false, `{"files":["a","b"]}`),
			call("t2", "du", `{}`), text("two files")}
	case "clean up":
		evs = []ev{call("t1", "rm", `{"path":"build/a"}`), end("t1", "failed", true, `"permission denied"`)}
	}
	for _, e := range evs {
		if _, err := x.Emit(ctx, e.typ, e.p); err != nil {
			return nil, err
		}
	}
	return &protocol.Usage{}, nil
}

// A session's earlier tool calls reach the upstream in the chat completions
// API's form: the assistant's text before them, then an assistant message
// with their tool_calls (type function, the name as the API takes one, the
// args as JSON text), a tool message per call with its tool_call_id and
// result (led by its status when it failed; saying so when the call never
// ended, as the API wants an answer to every call), then the rest of the
// text. A run that streamed no text is its user message, then its calls.
func TestHistory_ToolCallsInOpenAIForm(t *testing.T) {
	f := newFake(t, answerOK)
	d, err := New(Config{BaseURL: f.srv.URL, Model: "m-test", IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := drivertest.New(t, drivertest.Config{Profiles: map[string]driver.Profile{
		"fake": {Driver: d, Kind: Kind, Model: "m-test"}, "agent": {Driver: toolAgent{}, Kind: "agent"}}})
	ev := h.Events(h.Start(protocol.StartRunRequest{Message: "what is in build?", Profile: "agent"}).RunID, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	sid := ev[0].SessionID
	drivertest.Terminal(t, h.Events(h.Start(protocol.StartRunRequest{SessionID: sid, Message: "clean up", Profile: "agent"}).RunID,
		10*time.Second), protocol.EventDone)
	drivertest.Terminal(t, h.Events(start(h, sid, "and now?"), 10*time.Second), protocol.EventDone)

	f.mu.Lock()
	body := f.bodies[0]
	f.mu.Unlock()
	sameJSON(t, "messages", json.RawMessage(mustJSON(t, messagesOf(t, body))), `[
		{"role":"user","content":"what is in build?"},
		{"role":"assistant","content":"let me look ","tool_calls":[
			{"id":"t1","type":"function","function":{"name":"fs_ls","arguments":"{\"dir\":\"build\"}"}},
			{"id":"t2","type":"function","function":{"name":"du","arguments":"{}"}}]},
		{"role":"tool","content":"{\"files\":[\"a\",\"b\"]}","tool_call_id":"t1"},
		{"role":"tool","content":"no result: the run ended before the tool did","tool_call_id":"t2"},
		{"role":"assistant","content":"two files"},
		{"role":"user","content":"clean up"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"t1_2","type":"function","function":{"name":"rm","arguments":"{\"path\":\"build/a\"}"}}]},
		{"role":"tool","content":"failed: permission denied","tool_call_id":"t1_2"},
		{"role":"user","content":"and now?"}]`)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
