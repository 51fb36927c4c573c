package agui

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// recorder is an emitter that keeps what it is given, each payload
// validated as the journal would.
type recorder struct {
	t      testing.TB
	events []rec
}

type rec struct {
	Type    protocol.EventType
	Payload string
}

func (r *recorder) Emit(_ context.Context, typ protocol.EventType, payload any) (protocol.Envelope, error) {
	e, err := protocol.NewEvent("r1", "s1", typ, payload)
	if err != nil {
		return e, err
	}
	if err := protocol.ValidateEvent(&e); err != nil {
		r.t.Fatalf("%s %s: the journal would refuse it: %v", typ, e.Payload, err)
	}
	r.events = append(r.events, rec{typ, string(e.Payload)})
	return e, nil
}

func (r *recorder) String() string {
	var b strings.Builder
	for _, e := range r.events {
		b.WriteString(string(e.Type) + " " + e.Payload + "\n")
	}
	return b.String()
}

// feed applies each event (a JSON object) to a new mapper.
func feed(t *testing.T, events ...string) (*mapper, *recorder, error) {
	t.Helper()
	r := &recorder{t: t}
	m := newMapper(r)
	for _, e := range events {
		if err := m.apply(context.Background(), []byte(e)); err != nil {
			return m, r, err
		}
	}
	return m, r, nil
}

// Every AG-UI 1.0 event type, mapped on its own (after what it needs
// open): what it journals.
func TestMapping_TypeByType(t *testing.T) {
	const start = `{"type":"RUN_STARTED","threadId":"s1","runId":"u1","input":{"threadId":"s1","runId":"u1","messages":[{"id":"x","role":"user","content":"a secret history"}]}}`
	cases := []struct {
		typ    string
		before []string
		event  string
		want   []rec // exactly, after what before journaled
	}{
		{RunStarted, nil, start, []rec{{protocol.EventProgress, `{"text":"agent run u1 started","agui":{"runId":"u1","threadId":"s1","type":"RUN_STARTED"}}`}}},
		{TextMessageStart, nil, `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`, nil},
		{TextMessageContent, []string{`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`},
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello"}`,
			[]rec{{protocol.EventTokenDelta, `{"message_id":"m1","text":"Hello"}`}}},
		{TextMessageEnd, []string{`{"type":"TEXT_MESSAGE_START","messageId":"m1"}`}, `{"type":"TEXT_MESSAGE_END","messageId":"m1"}`, nil},
		{TextMessageChunk, nil, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"c1","delta":"Hi"}`,
			[]rec{{protocol.EventTokenDelta, `{"message_id":"c1","text":"Hi"}`}}},
		{ToolCallStart, nil, `{"type":"TOOL_CALL_START","toolCallId":"tc1","toolCallName":"weather"}`, nil},
		{ToolCallArgs, []string{`{"type":"TOOL_CALL_START","toolCallId":"tc1","toolCallName":"weather"}`},
			`{"type":"TOOL_CALL_ARGS","toolCallId":"tc1","delta":"{\"city\":"}`, nil},
		{ToolCallEnd, []string{`{"type":"TOOL_CALL_START","toolCallId":"tc1","toolCallName":"weather"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"tc1","delta":"{\"city\":"}`, `{"type":"TOOL_CALL_ARGS","toolCallId":"tc1","delta":"\"Oslo\"}"}`},
			`{"type":"TOOL_CALL_END","toolCallId":"tc1"}`,
			[]rec{{protocol.EventToolStarted, `{"tool_call_id":"tc1","name":"weather","args":{"city":"Oslo"}}`}}},
		{ToolCallChunk, nil, `{"type":"TOOL_CALL_CHUNK","toolCallId":"tc2","toolCallName":"ls","delta":"{}"}`, nil},
		{ToolCallResult, []string{`{"type":"TOOL_CALL_START","toolCallId":"tc1","toolCallName":"weather"}`, `{"type":"TOOL_CALL_END","toolCallId":"tc1"}`},
			`{"type":"TOOL_CALL_RESULT","messageId":"r1","toolCallId":"tc1","content":"sunny","role":"tool"}`,
			[]rec{{protocol.EventToolDone, `{"tool_call_id":"tc1","status":"ok","duration_ms":0,"error":false,"result":"sunny"}`}}},
		{StateSnapshot, nil, `{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}`,
			[]rec{{protocol.EventProgress, `{"text":"state snapshot","agui":{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}}`}}},
		{StateDelta, nil, `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}`,
			[]rec{{protocol.EventProgress, `{"text":"state delta","agui":{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}}`}}},
		{MessagesSnapshot, nil, `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","content":"x"}]}`,
			[]rec{{protocol.EventProgress, `{"text":"messages snapshot","agui":{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","content":"x"}]}}`}}},
		{ActivitySnapshot, nil, `{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"plan","content":{"steps":1}}`,
			[]rec{{protocol.EventProgress, `{"text":"activity plan","agui":{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"plan","content":{"steps":1}}}`}}},
		{ActivityDelta, nil, `{"type":"ACTIVITY_DELTA","messageId":"a1","activityType":"plan","patch":[]}`,
			[]rec{{protocol.EventProgress, `{"text":"activity plan changed","agui":{"type":"ACTIVITY_DELTA","messageId":"a1","activityType":"plan","patch":[]}}`}}},
		{Raw, nil, `{"type":"RAW","event":{"x":1},"source":"openai"}`,
			[]rec{{protocol.EventProgress, `{"text":"raw event from openai","agui":{"type":"RAW","event":{"x":1},"source":"openai"}}`}}},
		{Custom, nil, `{"type":"CUSTOM","name":"PredictState","value":[1]}`,
			[]rec{{protocol.EventProgress, `{"text":"custom event PredictState","agui":{"type":"CUSTOM","name":"PredictState","value":[1]}}`}}},
		{RunFinished, []string{start}, `{"type":"RUN_FINISHED","threadId":"s1","runId":"u1","result":{"n":1}}`,
			[]rec{{protocol.EventProgress, `{"text":"agent run u1 finished: success","agui":{"type":"RUN_FINISHED","threadId":"s1","runId":"u1","result":{"n":1}}}`}}},
		{RunError, []string{start}, `{"type":"RUN_ERROR","message":"boom"}`,
			[]rec{{protocol.EventProgress, `{"text":"agent run failed: boom","agui":{"type":"RUN_ERROR","message":"boom"}}`}}},
		{StepStarted, nil, `{"type":"STEP_STARTED","stepName":"plan"}`,
			[]rec{{protocol.EventProgress, `{"text":"step plan","agui":{"type":"STEP_STARTED","stepName":"plan"}}`}}},
		{StepFinished, nil, `{"type":"STEP_FINISHED","stepName":"plan"}`,
			[]rec{{protocol.EventProgress, `{"text":"step plan finished","agui":{"type":"STEP_FINISHED","stepName":"plan"}}`}}},
		{ReasoningStart, nil, `{"type":"REASONING_START","messageId":"b1"}`, nil},
		{ReasoningMessageStart, nil, `{"type":"REASONING_MESSAGE_START","messageId":"b1","role":"reasoning"}`, nil},
		{ReasoningMessageContent, []string{`{"type":"REASONING_MESSAGE_START","messageId":"b1","role":"reasoning"}`},
			`{"type":"REASONING_MESSAGE_CONTENT","messageId":"b1","delta":"hmm"}`,
			[]rec{{protocol.EventReasoningDelta, `{"block_id":"b1","text":"hmm"}`}}},
		{ReasoningMessageEnd, []string{`{"type":"REASONING_MESSAGE_START","messageId":"b1","role":"reasoning"}`},
			`{"type":"REASONING_MESSAGE_END","messageId":"b1"}`,
			[]rec{{protocol.EventReasoningDone, `{"block_id":"b1","text":""}`}}},
		{ReasoningMessageChunk, nil, `{"type":"REASONING_MESSAGE_CHUNK","messageId":"b2","delta":"so"}`,
			[]rec{{protocol.EventReasoningDelta, `{"block_id":"b2","text":"so"}`}}},
		{ReasoningEnd, []string{`{"type":"REASONING_START","messageId":"b1"}`}, `{"type":"REASONING_END","messageId":"b1"}`, nil},
		{ReasoningEncryptedValue, nil, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m1","encryptedValue":"zz"}`,
			[]rec{{protocol.EventProgress, `{"text":"encrypted reasoning for message m1","agui":{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m1","encryptedValue":"zz"}}`}}},
		{SubagentStarted, nil, `{"type":"SUBAGENT_STARTED","subagentRunId":"sa1","name":"researcher"}`,
			[]rec{{protocol.EventProgress, `{"text":"subagent researcher started","agui":{"type":"SUBAGENT_STARTED","subagentRunId":"sa1","name":"researcher"}}`}}},
		{SubagentFinished, nil, `{"type":"SUBAGENT_FINISHED","subagentRunId":"sa1"}`,
			[]rec{{protocol.EventProgress, `{"text":"subagent sa1 finished","agui":{"type":"SUBAGENT_FINISHED","subagentRunId":"sa1"}}`}}},
		{SubagentError, nil, `{"type":"SUBAGENT_ERROR","subagentRunId":"sa1","message":"lost"}`,
			[]rec{{protocol.EventProgress, `{"text":"subagent sa1 failed: lost","agui":{"type":"SUBAGENT_ERROR","subagentRunId":"sa1","message":"lost"}}`}}},
		{"FUTURE_EVENT", nil, `{"type":"FUTURE_EVENT","x":1}`,
			[]rec{{protocol.EventProgress, `{"text":"unknown AG-UI event FUTURE_EVENT","agui":{"type":"FUTURE_EVENT","x":1}}`}}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			m, r, err := feed(t, c.before...)
			if err != nil {
				t.Fatalf("before: %v", err)
			}
			n := len(r.events)
			if err := m.apply(context.Background(), []byte(c.event)); err != nil {
				t.Fatalf("apply: %v", err)
			}
			got := r.events[n:]
			if len(got) != len(c.want) {
				t.Fatalf("journaled\n%s\nwant %v", (&recorder{events: got}).String(), c.want)
			}
			for i := range got {
				if got[i].Type != c.want[i].Type || !sameJSON(got[i].Payload, c.want[i].Payload) {
					t.Fatalf("event %d: %s %s, want %s %s", i, got[i].Type, got[i].Payload, c.want[i].Type, c.want[i].Payload)
				}
			}
		})
		covered[c.typ] = true
	}
	for _, typ := range EventTypes {
		if !covered[typ] {
			t.Errorf("no case for %s", typ)
		}
	}
	if len(EventTypes) != 31 {
		t.Fatalf("%d event types, AG-UI 1.0 has 31", len(EventTypes))
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// The outcome of a run's end, as the driver reads RUN_FINISHED and
// RUN_ERROR; what was open is ended first.
func TestMapping_Endings(t *testing.T) {
	m, r, err := feed(t,
		`{"type":"REASONING_MESSAGE_START","messageId":"b1","role":"reasoning"}`,
		`{"type":"REASONING_MESSAGE_CONTENT","messageId":"b1","delta":"x"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"t1","toolCallName":"f"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"t1","delta":"{\"a\""}`,
		`{"type":"RUN_FINISHED","threadId":"s","runId":"u","outcome":{"type":"interrupt","interrupts":[{"id":"i1","reason":"tool_call","toolCallId":"t1"}]},"usage":[{"inputTokens":3,"outputTokens":4,"model":"m"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if m.outcome == nil || m.outcome.Type != "interrupt" || m.outcome.Interrupts[0].ToolCallID != "t1" {
		t.Fatalf("outcome %+v", m.outcome)
	}
	if m.usage.InputTokens != 3 || m.usage.OutputTokens != 4 || m.usage.Model != "m" {
		t.Fatalf("usage %+v", m.usage)
	}
	// reasoning ended; the call's partial arguments are journaled as text.
	want := []protocol.EventType{protocol.EventReasoningDelta, protocol.EventReasoningDone, protocol.EventToolStarted, protocol.EventProgress}
	if got := types(r); !slices.Equal(got, want) {
		t.Fatalf("journaled %v, want %v", got, want)
	}
	if p := r.events[2].Payload; !strings.Contains(p, `"args":"{\"a\""`) {
		t.Fatalf("partial args: %s", p)
	}

	for _, o := range []string{`{"type":"success","pendingToolCallIds":["f1"]}`, `{"type":"cancelled"}`, `{"type":"later"}`} {
		m, _, err := feed(t, `{"type":"RUN_FINISHED","threadId":"s","runId":"u","outcome":`+o+`}`)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{`{"type":"cancelled"}`: "cancelled"}[o]
		if want == "" {
			want = "success"
		}
		if m.outcome.Type != want {
			t.Fatalf("outcome %s read as %+v", o, m.outcome)
		}
	}
	m, _, err = feed(t, `{"type":"RUN_ERROR","message":"quota","code":"429"}`)
	if err != nil || m.runErr == nil || *m.runErr.Code != "429" {
		t.Fatalf("RUN_ERROR: %+v %v", m.runErr, err)
	}
}

func types(r *recorder) []protocol.EventType {
	var out []protocol.EventType
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

// Malformed events are a MalformedError naming the event and the field;
// what came before is journaled.
func TestMapping_Malformed(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":`, "not JSON"},
		{`[1,2]`, "not a JSON object"},
		{`"x"`, "not a JSON object"},
		{`{"delta":"x"}`, "no type"},
		{`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1"}`, "delta (a string) is required"},
		{`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":5}`, "delta (a string) is required"},
		{`{"type":"TEXT_MESSAGE_START","messageId":7}`, "messageId must be string"},
		{`{"type":"TOOL_CALL_ARGS","toolCallId":"nope","delta":"{}"}`, "is not open"},
		{`{"type":"TOOL_CALL_CHUNK","delta":"{}"}`, "must have a toolCallId"},
		{`{"type":"TEXT_MESSAGE_CHUNK","delta":"x"}`, "must have a messageId"},
		{`{"type":"RUN_FINISHED","threadId":"s","runId":"u","outcome":{"type":"interrupt","interrupts":[]}}`, "needs interrupts"},
		{`{"type":"RUN_FINISHED","threadId":"s"}`, "threadId and runId"},
		{`{"type":"STATE_DELTA","delta":{}}`, "JSON Patch"},
	} {
		_, r, err := feed(t, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m0","delta":"kept"}`, c.data)
		var me *MalformedError
		if !errors.As(err, &me) || me.N != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a MalformedError at #2 saying %q", c.data, err, c.want)
			continue
		}
		if len(r.events) != 1 || !strings.Contains(r.events[0].Payload, "kept") {
			t.Errorf("%s: before it %v", c.data, r.events)
		}
	}
}

// Ids that are no runhub ids get local names, the same for the same id;
// chunks continue the open message or call and end at another type.
func TestMapping_IDsAndChunks(t *testing.T) {
	_, r, err := feed(t,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"msg/1 ü","delta":"a"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","delta":"b"}`,
		`{"type":"TOOL_CALL_CHUNK","toolCallId":"call:1","toolCallName":"f","delta":"{\"x\":"}`,
		`{"type":"TOOL_CALL_CHUNK","delta":"1}"}`,
		`{"type":"TOOL_CALL_CHUNK","toolCallId":"call:2","toolCallName":"g"}`,
		`{"type":"STEP_STARTED","stepName":"s"}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"x","toolCallId":"call:1","content":[{"type":"text","text":"ok"}]}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"u1","role":"user"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"u1","delta":"echo"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"u1"}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []rec{
		{protocol.EventTokenDelta, `{"message_id":"m-1","text":"a"}`},
		{protocol.EventTokenDelta, `{"message_id":"m-1","text":"b"}`},
		{protocol.EventToolStarted, `{"tool_call_id":"t-2","name":"f","args":{"x":1}}`},
		{protocol.EventToolStarted, `{"tool_call_id":"t-3","name":"g","args":{}}`},
		{protocol.EventProgress, `{"text":"step s","agui":{"type":"STEP_STARTED","stepName":"s"}}`},
		{protocol.EventToolDone, `{"tool_call_id":"t-2","status":"ok","duration_ms":0,"error":false,"result":[{"type":"text","text":"ok"}]}`},
		{protocol.EventProgress, `{"text":"user message: echo","agui":{"type":"TEXT_MESSAGE_START","messageId":"u1","role":"user","content":"echo"}}`},
	}
	if len(r.events) != len(want) {
		t.Fatalf("journaled\n%s", r)
	}
	for i := range want {
		if r.events[i].Type != want[i].Type || !sameJSON(r.events[i].Payload, want[i].Payload) {
			t.Errorf("event %d: %s %s, want %s", i, r.events[i].Type, r.events[i].Payload, want[i].Payload)
		}
	}
}

// What is too long for one journal event is cut, never refused: a long
// delta is several token.delta (their text the whole), long arguments a
// note.
func TestMapping_Large(t *testing.T) {
	long := strings.Repeat("é", 100<<10) // 200 KiB of 2-byte characters
	b, _ := json.Marshal(long)
	args, _ := json.Marshal(`{"x":"` + strings.Repeat("a", 300<<10) + `"}`)
	_, r, err := feed(t,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":`+string(b)+`}`,
		`{"type":"TOOL_CALL_START","toolCallId":"t","toolCallName":"f"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"t","delta":`+string(args)+`}`,
		`{"type":"TOOL_CALL_END","toolCallId":"t"}`)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	n := 0
	for _, e := range r.events {
		if e.Type == protocol.EventTokenDelta {
			var p protocol.TokenDeltaPayload
			json.Unmarshal([]byte(e.Payload), &p)
			text.WriteString(p.Text)
			n++
		}
	}
	if text.String() != long || n != 4 {
		t.Fatalf("%d deltas, text whole: %v", n, text.String() == long)
	}
	if lastRec := r.events[len(r.events)-1]; lastRec.Type != protocol.EventToolStarted || !strings.Contains(lastRec.Payload, "over the journal's limit") {
		t.Fatalf("tool.started %.200s", lastRec.Payload)
	}
}
