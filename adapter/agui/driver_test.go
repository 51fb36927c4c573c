package agui

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

const testKey = "agk-fake-7c1d9e3b52a84f60"

// A run: the RunAgentInput the agent gets, and its text, reasoning, tool
// call and result, state and usage journaled; done with the answer.
func TestDriver_Run(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.send(`{"type":"STATE_SNAPSHOT","snapshot":{"city":"Oslo"}}`,
			`{"type":"REASONING_START","messageId":"r1"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"look it up"}`,
			`{"type":"REASONING_MESSAGE_END","messageId":"r1"}`,
			`{"type":"REASONING_END","messageId":"r1"}`)
		w.toolCall("tc1", "weather", `{"city":"Oslo"}`, "")
		w.send(`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"tc1","content":"{\"temp\":3}","role":"tool"}`)
		w.text("m1", "It is ", "3 degrees.")
		w.send(`{"type":"RUN_FINISHED","threadId":"` + in.ThreadID + `","runId":"` + in.RunID + `","outcome":{"type":"success"},"usage":[{"provider":"fake","model":"fm","inputTokens":12,"outputTokens":5}]}`)
	})
	h := harness(t, f, Config{APIKey: profile.NewSecret(testKey), Headers: map[string]string{"X-Team": "blue"},
		Tools: json.RawMessage(`[{"name":"confirm","description":"asks"}]`), Context: json.RawMessage(`[{"description":"tz","value":"UTC"}]`),
		State: json.RawMessage(`{"city":""}`), ForwardedProps: json.RawMessage(`{"mode":"fast"}`)})
	res := start(h, "", "weather in Oslo?")
	ev := h.Events(res.RunID, 20*time.Second)
	if terminals(ev) != 1 || last(ev).Type != protocol.EventDone {
		t.Fatalf("events %v", eventTypes(ev))
	}
	if got := text(ev); got != "It is 3 degrees." {
		t.Fatalf("text %q", got)
	}
	done, _ := protocol.DecodePayload[protocol.DonePayload](new(last(ev)))
	if done.Result != "It is 3 degrees." || done.Usage == nil || done.Usage.InputTokens != 12 || done.Usage.OutputTokens != 5 || done.Usage.Model != "fm" {
		t.Fatalf("done %+v usage %+v", done, done.Usage)
	}
	want := []protocol.EventType{protocol.EventRunStarted, protocol.EventProgress,
		protocol.EventReasoningDelta, protocol.EventReasoningDone, protocol.EventToolStarted, protocol.EventToolDone,
		protocol.EventTokenDelta}
	// (the journal may re-cut streamed text: runs of one type are one)
	if got := slices.Compact(eventTypes(ev)); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("events %v, want %v first", got, want)
	}
	var tool protocol.ToolStartedPayload
	i := slices.IndexFunc(ev, func(e protocol.Envelope) bool { return e.Type == protocol.EventToolStarted })
	json.Unmarshal(ev[i].Payload, &tool)
	if tool.ToolCallID != "tc1" || tool.Name != "weather" || string(tool.Args) != `{"city":"Oslo"}` {
		t.Fatalf("tool.started %s", ev[i].Payload)
	}
	var st protocol.ProgressPayload
	json.Unmarshal(ev[2].Payload, &st)
	if st.Text != "state snapshot" || !strings.Contains(string(st.AGUI), `"snapshot":{"city":"Oslo"}`) {
		t.Fatalf("state snapshot journaled as %s", ev[2].Payload)
	}

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	in := reqs[0]
	if in.ThreadID != res.SessionID || in.RunID != res.RunID || in.ProtocolVersion != "1.0" {
		t.Fatalf("input %s", in.raw)
	}
	if len(in.Messages) != 1 || !strings.Contains(string(in.Messages[0]), `"role":"user","content":"weather in Oslo?"`) {
		t.Fatalf("messages %s", in.raw)
	}
	for field, want := range map[string]string{"tools": `[{"name":"confirm","description":"asks"}]`, "context": `[{"description":"tz","value":"UTC"}]`,
		"state": `{"city":""}`, "forwardedProps": `{"mode":"fast"}`} {
		var all map[string]json.RawMessage
		json.Unmarshal(in.raw, &all)
		if !sameJSON(string(all[field]), want) {
			t.Errorf("%s: %s, want %s", field, all[field], want)
		}
	}
	hd := f.headers[0]
	if hd.Get("Authorization") != "Bearer "+testKey || hd.Get("X-Team") != "blue" || hd.Get("Accept") != "text/event-stream" {
		t.Fatalf("headers %v", hd)
	}
}

// The session's earlier runs are the next run's messages: user messages,
// assistant text with its tool calls, tool results. A profile whose agent
// owns the history sends only the new message.
func TestDriver_History(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		if len(in.Messages) == 1 {
			w.toolCall("tc1", "ls", `{"dir":"."}`, "")
			w.send(`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"tc1","content":"a b"}`)
		}
		w.text("m"+in.RunID, "answer")
		w.finished("")
	})
	for _, owns := range []bool{false, true} {
		h := harness(t, f, Config{OwnsHistory: owns})
		first := start(h, "", "list")
		h.Events(first.RunID, 20*time.Second)
		second := start(h, first.SessionID, "and then?")
		if ev := h.Events(second.RunID, 20*time.Second); last(ev).Type != protocol.EventDone {
			t.Fatalf("second run %v", eventTypes(ev))
		}
		reqs := f.requests()
		in := reqs[len(reqs)-1]
		var roles []string
		for _, m := range in.Messages {
			var v struct{ Role string }
			json.Unmarshal(m, &v)
			roles = append(roles, v.Role)
		}
		want := []string{"user", "assistant", "tool", "user"}
		if owns {
			want = []string{"user"}
		}
		if !slices.Equal(roles, want) {
			t.Fatalf("owns_history %v: roles %v, want %v\n%s", owns, roles, want, in.raw)
		}
		if !owns {
			b := string(in.raw)
			if !strings.Contains(b, `"toolCalls":[{"id":"tc1.h1","type":"function","function":{"name":"ls","arguments":"{\"dir\":\".\"}"}}]`) ||
				!strings.Contains(b, `"role":"tool","content":"a b","toolCallId":"tc1.h1"`) || !strings.Contains(b, `"content":"answer"`) {
				t.Fatalf("history %s", b)
			}
		}
	}
}

// An interrupt asking to approve a tool call is runhub's approval; the
// answer starts the continuing AG-UI run with resume[], the interrupted
// run's messages and its last state. To runhub it is one run that waits
// and goes on, with one terminal event.
func TestDriver_InterruptApproval(t *testing.T) {
	for _, choice := range []string{ChoiceApprove, ChoiceDeny} {
		t.Run(choice, func(t *testing.T) {
			f := newFakeAgent(t, func(w *agentStream, in *input) {
				w.runStarted()
				if len(in.Resume) == 0 {
					w.text("m1", "I will delete it.")
					w.toolCall("tc1", "delete", `{"path":"/tmp/x"}`, "m1")
					w.send(`{"type":"STATE_SNAPSHOT","snapshot":{"step":"confirm"}}`)
					w.finished(`{"type":"interrupt","interrupts":[{"id":"int-1","reason":"tool_call","message":"Delete /tmp/x?","toolCallId":"tc1",` +
						`"responseSchema":{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}}]}`)
					return
				}
				var p struct{ Approved bool }
				json.Unmarshal(in.Resume[0].Payload, &p)
				result := "denied"
				if p.Approved {
					result = "deleted"
				}
				w.send(`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"tc1","content":"` + result + `"}`)
				w.text("m2", " Done: "+result+".")
				w.finished(`{"type":"success"}`)
			})
			h := harness(t, f, Config{})
			res := start(h, "", "delete /tmp/x")
			req := h.WaitFor(res.RunID, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventApprovalReq })
			ap, _ := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&req)
			if ap.Summary != "Delete /tmp/x?" || !slices.Equal(ap.Choices, []string{"approve", "deny"}) || ap.ApprovalID != "int-1" {
				t.Fatalf("approval %+v", ap)
			}
			if st, _ := h.Store.Run(context.Background(), res.RunID); st.Terminal {
				t.Fatalf("the run ended while it waits: %+v", st)
			}
			r, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: ap.ApprovalID, Choice: choice})
			if err != nil || !r.Accepted {
				t.Fatalf("approve: %+v %v", r, err)
			}
			ev := h.Events(res.RunID, 20*time.Second)
			if terminals(ev) != 1 || last(ev).Type != protocol.EventDone {
				t.Fatalf("events %v", eventTypes(ev))
			}
			want := "deleted"
			if choice == ChoiceDeny {
				want = "denied"
			}
			if got := text(ev); got != "I will delete it. Done: "+want+"." {
				t.Fatalf("text %q", got)
			}
			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			in := reqs[1]
			if in.ThreadID != res.SessionID || in.RunID != res.RunID+".1" || len(in.Resume) != 1 || in.Resume[0].InterruptID != "int-1" ||
				in.Resume[0].Status != "resolved" || !sameJSON(string(in.Resume[0].Payload), `{"approved":`+map[string]string{"approve": "true", "deny": "false"}[choice]+`}`) {
				t.Fatalf("resume input %s", in.raw)
			}
			if !sameJSON(string(in.State), `{"step":"confirm"}`) {
				t.Fatalf("state %s", in.State)
			}
			b := string(in.raw)
			if !strings.Contains(b, `{"id":"m1","role":"assistant","content":"I will delete it.","toolCalls":[{"id":"tc1","type":"function","function":{"name":"delete","arguments":"{\"path\":\"/tmp/x\"}"}}]}`) ||
				!strings.Contains(b, `"content":"delete /tmp/x"`) {
				t.Fatalf("resume messages %s", b)
			}
			// tool.done arrives in the continuing run, for the same call.
			var ids []string
			for _, e := range ev {
				if e.Type == protocol.EventToolDone || e.Type == protocol.EventToolStarted {
					var p struct {
						ID string `json:"tool_call_id"`
					}
					json.Unmarshal(e.Payload, &p)
					ids = append(ids, string(e.Type)+" "+p.ID)
				}
			}
			if !slices.Equal(ids, []string{"tool.started tc1", "tool.done tc1"}) {
				t.Fatalf("tool events %v", ids)
			}
		})
	}
}

// An interrupt that needs input is a clarification; a schema's enum gives
// its choices, and the response goes back as the schema's one property.
// An expired clarification resumes with cancelled.
func TestDriver_InterruptClarify(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		if len(in.Resume) == 0 {
			w.finished(`{"type":"interrupt","interrupts":[{"id":"ask-1","reason":"input_required","message":"Which size?",` +
				`"responseSchema":{"type":"object","properties":{"size":{"type":"string","enum":["S","M","L"]}},"required":["size"]}}]}`)
			return
		}
		b, _ := json.Marshal(in.Resume[0].Status + " " + string(in.Resume[0].Payload))
		w.send(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m9","delta":` + string(b) + `}`)
		w.finished("")
	})
	h := harness(t, f, Config{})
	res := start(h, "", "order a shirt")
	req := h.WaitFor(res.RunID, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventClarifyReq })
	cq, _ := protocol.DecodePayload[protocol.ClarifyRequestedPayload](&req)
	if cq.Question != "Which size?" || cq.InputMode != "choice" || !slices.Equal(cq.Choices, []string{"S", "M", "L"}) {
		t.Fatalf("clarify %+v", cq)
	}
	r, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpClarify, RunID: res.RunID, ClarifyID: cq.ClarifyID, Response: "M"})
	if err != nil || !r.Accepted {
		t.Fatalf("clarify: %+v %v", r, err)
	}
	ev := h.Events(res.RunID, 20*time.Second)
	if got := text(ev); got != `resolved {"size":"M"}` || terminals(ev) != 1 || last(ev).Type != protocol.EventDone {
		t.Fatalf("text %q, events %v", got, eventTypes(ev))
	}

	// Expiry: the driver's clarify timeout.
	f2 := newFakeAgent(t, f.turn)
	h2 := harness(t, f2, Config{ClarifyTimeout: 50 * time.Millisecond})
	res = start(h2, "", "order a shirt")
	ev = h2.Events(res.RunID, 20*time.Second)
	if got := text(ev); got != "cancelled " || last(ev).Type != protocol.EventDone {
		t.Fatalf("after expiry: text %q, events %v", got, eventTypes(ev))
	}
}

// A success that leaves frontend tool calls pending ends the run done,
// the calls shown as started with no result and the outcome journaled.
func TestDriver_PendingToolCalls(t *testing.T) {
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.toolCall("fe1", "showChart", `{"data":[1,2]}`, "")
		w.finished(`{"type":"success","pendingToolCallIds":["fe1"]}`)
	})
	h := harness(t, f, Config{Tools: json.RawMessage(`[{"name":"showChart","description":"draws a chart"}]`)})
	res := start(h, "", "chart it")
	ev := h.Events(res.RunID, 20*time.Second)
	if last(ev).Type != protocol.EventDone || terminals(ev) != 1 {
		t.Fatalf("events %v", eventTypes(ev))
	}
	var saw bool
	for _, e := range ev {
		if e.Type == protocol.EventToolDone {
			t.Fatalf("a pending call got a result: %s", e.Payload)
		}
		if e.Type == protocol.EventProgress && strings.Contains(string(e.Payload), "the agent left tool calls for the application to run: fe1") &&
			strings.Contains(string(e.Payload), `"pendingToolCallIds":["fe1"]`) {
			saw = true
		}
	}
	if !saw {
		t.Fatalf("no progress for the pending calls: %v", eventTypes(ev))
	}
}

// A cancel aborts the request; the run ends cancelled once. An agent that
// cancels its own run ends it cancelled too.
func TestDriver_Cancel(t *testing.T) {
	release := make(chan struct{})
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.text("m1", "working")
		select { // a slow agent: nothing more until the request ends
		case <-release:
		case <-w.ctx.Done():
		}
	})
	defer close(release)
	h := harness(t, f, Config{})
	res := start(h, "", "long job")
	h.WaitFor(res.RunID, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventTokenDelta })
	h.Cancel(res.RunID)
	ev := h.Events(res.RunID, 20*time.Second)
	if terminals(ev) != 1 || last(ev).Type != protocol.EventCancelled {
		t.Fatalf("events %v", eventTypes(ev))
	}
	select {
	case <-f.aborted:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent's request was not aborted")
	}

	f2 := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.finished(`{"type":"cancelled"}`)
	})
	h2 := harness(t, f2, Config{})
	res = start(h2, "", "x")
	ev = h2.Events(res.RunID, 20*time.Second)
	cp, _ := protocol.DecodePayload[protocol.CancelledPayload](new(last(ev)))
	if terminals(ev) != 1 || last(ev).Type != protocol.EventCancelled || cp.Reason != "the agent cancelled its run" {
		t.Fatalf("events %v, %+v", eventTypes(ev), cp)
	}
}

// The driver declares what it does: no steer (it takes no guidance), no
// goal (no judge), no workspace; attachments reach the agent as AG-UI
// content parts of the user message.
func TestRegistration_DeclaresWhatItDoes(t *testing.T) {
	caps, ok := profile.NewRegistry(Registration()).Capabilities(Kind)
	want := []string{protocol.CapCancel, protocol.CapApproval, protocol.CapClarify, protocol.CapQueue, protocol.CapAttachments,
		protocol.CapReasoning, protocol.CapUsage, protocol.CapTools}
	if !ok || !slices.Equal(caps, want) {
		t.Fatalf("declared %v %v, want %v", caps, ok, want)
	}
	var d any = &Driver{}
	if _, steers := d.(interface{ Steers() bool }); steers {
		t.Error("the driver says it steers")
	}
	if _, judges := d.(interface {
		JudgeGoal(context.Context, string, string) (string, error)
	}); judges {
		t.Error("the driver judges goals")
	}

	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		w.text("m1", "seen")
		w.finished("")
	})
	h := harness(t, f, Config{})
	res := h.Start(protocol.StartRunRequest{Message: "look", Profile: "ag", Attachments: []protocol.Attachment{
		{Name: "cat.png", MediaType: "image/png", URL: "https://example.test/cat.png"},
		{Name: "notes.pdf", MediaType: "application/pdf", URL: "https://example.test/notes.pdf"},
		{Name: "local.txt"}}})
	h.Events(res.RunID, 20*time.Second)
	b := string(f.requests()[0].raw)
	for _, part := range []string{`{"text":"look","type":"text"}`,
		`{"metadata":{"name":"cat.png"},"source":{"mimeType":"image/png","type":"url","value":"https://example.test/cat.png"},"type":"image"}`,
		`{"metadata":{"name":"notes.pdf"},"source":{"mimeType":"application/pdf","type":"url","value":"https://example.test/notes.pdf"},"type":"document"}`,
		`{"text":"(attachment local.txt, not sent)","type":"text"}`} {
		if !strings.Contains(b, part) {
			t.Errorf("no part %s in %s", part, b)
		}
	}
}

// A profile's settings are checked at load: the url, header names and
// values, the kinds of the JSON settings; every one of docs/profiles.md
// is taken.
func TestSettings_Validate(t *testing.T) {
	reg := profile.NewRegistry(Registration())
	ok := `{"driver": "agui", "url": "http://127.0.0.1:9000/agent", "headers": {"X-Tenant": "docs"}, "api_key_env": "AGENT_KEY",
		"forwarded_props": {"temperature": 0.2}, "tools": [{"name": "f", "description": "d"}], "context": [], "state": {"n": 1},
		"owns_history": true, "timeout": "10m", "idle_timeout": "30s"}`
	p, err := reg.Profile("p", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Build(p, profile.Env{Getenv: func(string) string { return "k" }}); err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		`{"driver": "agui"}`:                                                                            "url is required",
		`{"driver": "agui", "url": "ftp://x/"}`:                                                         "http:// or https://",
		`{"driver": "agui", "url": "http://u:p@x/"}`:                                                    "credentials",
		`{"driver": "agui", "url": "http://x/", "headers": {"a b": "c"}}`:                               "not a header name",
		`{"driver": "agui", "url": "http://x/", "headers": {"X": "a\r\nb"}}`:                            "line break",
		`{"driver": "agui", "url": "http://x/", "headers": {"Accept": "x"}}`:                            "the driver's",
		`{"driver": "agui", "url": "http://x/", "headers": {"Authorization": "x"}, "api_key_env": "K"}`: "keep one",
		`{"driver": "agui", "url": "http://x/", "tools": {}}`:                                           "tools must be an array",
		`{"driver": "agui", "url": "http://x/", "forwarded_props": []}`:                                 "forwarded_props must be an object",
		`{"driver": "agui", "url": "http://x/", "base_url": "http://x"}`:                                "base_url",
	} {
		if _, err := reg.Profile("p", []byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

// A cancel while the run waits on an interrupt's prompt ends it cancelled
// once, and no continuing AG-UI run starts; a MESSAGES_SNAPSHOT before an
// interrupt is the continuing run's messages.
func TestDriver_InterruptCancelAndSnapshot(t *testing.T) {
	const snapshot = `[{"id":"u","role":"user","content":"q"},{"id":"a","role":"assistant","content":"from the snapshot"}]`
	f := newFakeAgent(t, func(w *agentStream, in *input) {
		w.runStarted()
		if len(in.Resume) == 0 {
			w.send(`{"type":"MESSAGES_SNAPSHOT","messages":` + snapshot + `}`)
			w.finished(`{"type":"interrupt","interrupts":[{"id":"c1","reason":"confirmation","message":"Go on?"}]}`)
			return
		}
		w.text("m2", "went on")
		w.finished("")
	})
	h := harness(t, f, Config{})
	res := start(h, "", "go")
	h.WaitFor(res.RunID, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventApprovalReq })
	h.Cancel(res.RunID)
	ev := h.Events(res.RunID, 20*time.Second)
	if terminals(ev) != 1 || last(ev).Type != protocol.EventCancelled || len(f.requests()) != 1 {
		t.Fatalf("events %v, %d requests", eventTypes(ev), len(f.requests()))
	}

	res = start(h, "", "go")
	h.WaitFor(res.RunID, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventApprovalReq })
	if r, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: "c1", Choice: ChoiceApprove}); err != nil || !r.Accepted {
		t.Fatalf("approve: %+v %v", r, err)
	}
	ev = h.Events(res.RunID, 20*time.Second)
	in := f.requests()[2]
	got, _ := json.Marshal(in.Messages)
	if last(ev).Type != protocol.EventDone || !sameJSON(string(got), snapshot) || !sameJSON(string(in.Resume[0].Payload), "true") {
		t.Fatalf("events %v; continuing run's messages %s, resume %s", eventTypes(ev), got, in.Resume[0].Payload)
	}
}
