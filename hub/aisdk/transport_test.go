package aisdk_test

import (
	"encoding/json"
	"testing"

	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/npmtest"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// installAISDK installs the pinned packages of web/aisdk-test ("ai", "ws")
// with npm ci into a temporary directory and returns it, with chat.mjs
// beside them. A missing node or npm fails the test.
func installAISDK(t *testing.T) (node, dir string) {
	return npmtest.Install(t, "the AI SDK", "../../web/aisdk-test", "package.json", "package-lock.json", "chat.mjs")
}

// uiSummary is one assistant message as chat.mjs assembled it.
type uiSummary struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	TextParts int    `json:"textParts"`
	Reasoning string `json:"reasoning"`
	Tools     []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		State  string `json:"state"`
		Output any    `json:"output"`
	} `json:"tools"`
	Data []struct {
		Type string         `json:"type"`
		ID   string         `json:"id"`
		Data map[string]any `json:"data"`
	} `json:"data"`
	Errors []string `json:"errors"`
}

// runChat runs chat.mjs and returns its output object.
func runChat(t *testing.T, node, dir string, env []string, args ...string) map[string]json.RawMessage {
	t.Helper()
	var out map[string]json.RawMessage
	npmtest.RunJSON(t, node, dir, env, &out, "chat.mjs", args...)
	return out
}

func uiMessage(t *testing.T, out map[string]json.RawMessage, chat string) uiSummary {
	t.Helper()
	var s uiSummary
	if err := json.Unmarshal(out[chat], &s); err != nil || s.ID == "" {
		t.Fatalf("chat %s: %s (%v)", chat, out[chat], err)
	}
	return s
}

// expectUIMessage checks an assembled message against its run's journal:
// the message is the run (its id), its text and reasoning are the
// journal's, once, and every tool has its output.
func expectUIMessage(t *testing.T, th *hubtest.Hub, chat string, s uiSummary) string {
	t.Helper()
	meta := hubtest.SessionMeta(t, th, chat)
	if len(meta.Runs) == 0 || s.ID != meta.LatestRun() {
		t.Fatalf("chat %s: message %s, runs %v", chat, s.ID, meta.Runs)
	}
	rid := s.ID
	hubtest.WaitTerminal(t, th, rid)
	var text, reasoning string
	tools := map[string]bool{}
	for _, e := range hubtest.JournalEvents(t, th, rid) {
		switch e.Type {
		case protocol.EventTokenDelta:
			text += hubtest.Payload[protocol.TokenDeltaPayload](t, e).Text
		case protocol.EventReasoningDelta, protocol.EventReasoningDone:
			reasoning += hubtest.Payload[protocol.ReasoningPayload](t, e).Text
		case protocol.EventToolDone:
			tools[hubtest.Payload[protocol.ToolDonePayload](t, e).ToolCallID] = true
		}
	}
	if text == "" || s.Text != text || s.Reasoning != reasoning {
		t.Errorf("chat %s: text %q reasoning %q; journal %q %q", chat, s.Text, s.Reasoning, text, reasoning)
	}
	if len(s.Tools) != len(tools) {
		t.Errorf("chat %s: tools %+v, journal %v", chat, s.Tools, tools)
	}
	for _, tl := range s.Tools {
		if !tools[tl.ID] || tl.State != "output-available" {
			t.Errorf("chat %s: tool %+v", chat, tl)
		}
	}
	if len(s.Errors) > 0 {
		t.Errorf("chat %s: stream errors %v", chat, s.Errors)
	}
	return rid
}

// approvalResolved reports whether the message's approval part ended
// resolved (the pending part replaced by its resolution).
func approvalResolved(s uiSummary) bool {
	n := 0
	for _, d := range s.Data {
		if d.Type == "data-runhub-approval" {
			n++
			if d.Data["status"] != "resolved" || d.Data["choice"] != "once" {
				return false
			}
		}
	}
	return n == 1
}

func terminalType(t *testing.T, th *hubtest.Hub, rid string) protocol.EventType {
	t.Helper()
	hubtest.WaitTerminal(t, th, rid)
	ev := hubtest.JournalEvents(t, th, rid)
	return ev[len(ev)-1].Type
}

// The AI SDK's DefaultChatTransport against POST /v1/aisdk/chat and its
// resume path: the assembled message equals the journal's; a fetch aborted
// mid-run does not cancel the run, and reconnectToStream rebuilds the same
// message once; an idle chat has no stream (204).
func TestAISDK_NPMDefaultChatTransport(t *testing.T) {
	node, dir := installAISDK(t)
	th := newTestHub(t, hub.Config{})
	out := runChat(t, node, dir, nil, "http", th.URL, "chat-a", `{"sim":{"tokens":20,"token_ms":1,"tools":2,"reasoning":3}}`)
	expectUIMessage(t, th, "chat-a", uiMessage(t, out, "chat-a"))

	// Cut before the run's approval: it is still active when the stream
	// resumes, and the script approves it from the resumed message.
	cutAtReasoning := []string{"CUT=2", "CUT_TYPE=reasoning-delta"}
	hitl := `{"sim":{"tokens":20,"token_ms":1,"tools":1,"reasoning":3,"approval":true}}`
	out = runChat(t, node, dir, cutAtReasoning, "http-resume", th.URL, "chat-b", hitl)
	rid := expectUIMessage(t, th, "chat-b", uiMessage(t, out, "chat-b"))
	if typ := terminalType(t, th, rid); typ != protocol.EventDone {
		t.Errorf("the aborted fetch's run ended %s, want done", typ)
	}
	if s := uiMessage(t, out, "chat-b"); s.TextParts != 1 || !approvalResolved(s) {
		t.Errorf("the resumed message: %d text parts, want 1; approval parts %+v", s.TextParts, s.Data)
	}

	for _, chat := range []string{"chat-a", "never-seen"} {
		out = runChat(t, node, dir, nil, "http-idle", th.URL, chat)
		if string(out["resumed"]) != "null" {
			t.Errorf("idle chat %s resumed %s", chat, out["resumed"])
		}
	}
}

// The AI SDK's WebSocketChatTransport (with the ws package) against
// /v1/aisdk/ws: three chats stream at once over one socket, each message
// equal to its journal; a socket killed mid-run and reconnectToStream on a
// new one rebuild the same message, and the run was not cancelled; an
// abort (stop()) cancels the run; an idle chat answers no-active.
func TestAISDK_NPMWebSocketChatTransport(t *testing.T) {
	node, dir := installAISDK(t)
	th := newTestHub(t, hub.Config{})
	md := `{"sim":{"tokens":30,"token_ms":2,"tools":1,"reasoning":2}}`
	out := runChat(t, node, dir, nil, "ws", th.URL, "ws-1,ws-2,ws-3", md)
	for _, chat := range []string{"ws-1", "ws-2", "ws-3"} {
		expectUIMessage(t, th, chat, uiMessage(t, out, chat))
	}

	out = runChat(t, node, dir, []string{"CUT=2", "CUT_TYPE=reasoning-delta"}, "ws-kill", th.URL, "ws-kill",
		`{"sim":{"tokens":20,"token_ms":1,"tools":1,"reasoning":3,"approval":true}}`)
	s := uiMessage(t, out, "ws-kill")
	rid := expectUIMessage(t, th, "ws-kill", s)
	if typ := terminalType(t, th, rid); typ != protocol.EventDone || s.TextParts != 1 || !approvalResolved(s) {
		t.Errorf("after the socket died: run ended %s, %d text parts", typ, s.TextParts)
	}

	runChat(t, node, dir, []string{"CUT=3"}, "ws-stop", th.URL, "ws-stop", `{"sim":{"tokens":5000,"token_ms":10,"tools":0}}`)
	meta := hubtest.SessionMeta(t, th, "ws-stop")
	if typ := terminalType(t, th, meta.LatestRun()); typ != protocol.EventCancelled {
		t.Errorf("stop(): the run ended %s, want cancelled", typ)
	}

	for _, chat := range []string{"ws-1", "never-seen"} {
		out = runChat(t, node, dir, nil, "ws-idle", th.URL, chat)
		if string(out["resumed"]) != "null" {
			t.Errorf("idle chat %s resumed %s", chat, out["resumed"])
		}
	}
}
