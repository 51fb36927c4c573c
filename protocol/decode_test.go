package protocol_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// jsonStr quotes s as a JSON string.

// jsonIDs is a JSON array of n distinct valid ids.
func jsonIDs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"s%d"`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestDecodeClient(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	str := func(s string) *string { return &s }

	tests := []struct {
		name  string
		in    string
		code  protocol.Code // "" = valid
		field string
		want  protocol.ClientMessage // checked when code is ""
	}{
		// hello
		{name: "hello", in: `{"type":"hello","client":"web/1"}`,
			want: protocol.ClientMessage{Type: "hello", Hello: &protocol.Hello{Type: "hello", Client: "web/1"}}},
		{name: "hello with token", in: `{"type":"hello","token":"eyJ.a.b","client":"web/1","extra":1}`,
			want: protocol.ClientMessage{Type: "hello", Hello: &protocol.Hello{Type: "hello", Token: "eyJ.a.b", Client: "web/1"}}},
		{name: "hello without client", in: `{"type":"hello","token":"t"}`, code: protocol.CodeBadRequest, field: "client"},
		{name: "hello blank client", in: `{"type":"hello","client":""}`, code: protocol.CodeBadRequest, field: "client"},
		{name: "hello token number", in: `{"type":"hello","client":"c","token":42}`, code: protocol.CodeBadRequest, field: "token"},
		{name: "hello client object", in: `{"type":"hello","client":{}}`, code: protocol.CodeBadRequest, field: "client"},
		{name: "hello token oversized", in: `{"type":"hello","client":"c","token":"` + long(protocol.MaxTokenBytes+1) + `"}`, code: protocol.CodeTooLarge, field: "token"},
		{name: "hello token at bound", in: `{"type":"hello","client":"c","token":"` + long(protocol.MaxTokenBytes) + `"}`,
			want: protocol.ClientMessage{Type: "hello", Hello: &protocol.Hello{Type: "hello", Client: "c", Token: long(protocol.MaxTokenBytes)}}},
		{name: "hello client oversized", in: `{"type":"hello","client":"` + long(protocol.MaxShortBytes+1) + `"}`, code: protocol.CodeTooLarge, field: "client"},

		// watch / unwatch
		{name: "watch sessions", in: `{"type":"watch","sessions":["s1","s_2.x-y"]}`,
			want: protocol.ClientMessage{Type: "watch", Watch: &protocol.Watch{Type: "watch", Sessions: []string{"s1", "s_2.x-y"}}}},
		{name: "watch all", in: `{"type":"watch","all":true}`,
			want: protocol.ClientMessage{Type: "watch", Watch: &protocol.Watch{Type: "watch", All: true}}},
		{name: "watch all and sessions", in: `{"type":"watch","all":true,"sessions":["s1"]}`,
			want: protocol.ClientMessage{Type: "watch", Watch: &protocol.Watch{Type: "watch", All: true, Sessions: []string{"s1"}}}},
		{name: "watch at the id bound", in: `{"type":"watch","sessions":` + jsonIDs(protocol.MaxWatchSessions) + `}`},
		{name: "unwatch sessions", in: `{"type":"unwatch","sessions":["s1"]}`,
			want: protocol.ClientMessage{Type: "unwatch", Watch: &protocol.Watch{Type: "unwatch", Sessions: []string{"s1"}}}},
		{name: "unwatch all", in: `{"type":"unwatch","all":true}`,
			want: protocol.ClientMessage{Type: "unwatch", Watch: &protocol.Watch{Type: "unwatch", All: true}}},
		{name: "watch neither", in: `{"type":"watch"}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "watch all false", in: `{"type":"watch","all":false}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "watch sessions null", in: `{"type":"watch","sessions":null}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "watch sessions empty", in: `{"type":"watch","sessions":[]}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "unwatch neither", in: `{"type":"unwatch"}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "watch sessions string", in: `{"type":"watch","sessions":"s1"}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "watch sessions of numbers", in: `{"type":"watch","sessions":[1]}`, code: protocol.CodeBadRequest, field: "sessions"},
		{name: "watch all string", in: `{"type":"watch","all":"yes"}`, code: protocol.CodeBadRequest, field: "all"},
		{name: "watch empty id", in: `{"type":"watch","sessions":["s1",""]}`, code: protocol.CodeBadRequest, field: "sessions[1]"},
		{name: "watch bad id", in: `{"type":"watch","sessions":["s 1"]}`, code: protocol.CodeBadRequest, field: "sessions[0]"},
		{name: "watch id oversized", in: `{"type":"watch","sessions":["` + long(protocol.MaxIDLen+1) + `"]}`, code: protocol.CodeTooLarge, field: "sessions[0]"},
		{name: "watch too many ids", in: `{"type":"watch","sessions":` + jsonIDs(protocol.MaxWatchSessions+1) + `}`, code: protocol.CodeTooLarge, field: "sessions"},

		// focus
		{name: "focus", in: `{"type":"focus","session_id":"s1"}`,
			want: protocol.ClientMessage{Type: "focus", Focus: &protocol.Focus{Type: "focus", SessionID: str("s1")}}},
		{name: "focus none", in: `{"type":"focus","session_id":null}`,
			want: protocol.ClientMessage{Type: "focus", Focus: &protocol.Focus{Type: "focus"}}},
		{name: "focus with cursor", in: `{"type":"focus","session_id":"s1","cursor":"r_01J.x:42"}`,
			want: protocol.ClientMessage{Type: "focus", Focus: &protocol.Focus{Type: "focus", SessionID: str("s1"), Cursor: "r_01J.x:42"}}},
		{name: "focus with cursor seq 0", in: `{"type":"focus","session_id":"s1","cursor":"r1:0"}`,
			want: protocol.ClientMessage{Type: "focus", Focus: &protocol.Focus{Type: "focus", SessionID: str("s1"), Cursor: "r1:0"}}},
		{name: "focus without session_id", in: `{"type":"focus"}`, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "focus session_id number", in: `{"type":"focus","session_id":5}`, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "focus session_id empty", in: `{"type":"focus","session_id":""}`, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "focus session_id bad", in: `{"type":"focus","session_id":"a/b"}`, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "focus session_id oversized", in: `{"type":"focus","session_id":"` + long(protocol.MaxIDLen+1) + `"}`, code: protocol.CodeTooLarge, field: "session_id"},
		{name: "focus cursor without session", in: `{"type":"focus","session_id":null,"cursor":"r1:1"}`, code: protocol.CodeBadRequest, field: "cursor"},
		{name: "focus cursor number", in: `{"type":"focus","session_id":"s1","cursor":7}`, code: protocol.CodeBadRequest, field: "cursor"},
		// A malformed cursor still focuses: the hub answers bad_cursor and
		// replays the latest run (protocol.md), so it passes the decoder.
		{name: "focus cursor malformed", in: `{"type":"focus","session_id":"s1","cursor":"r1"}`,
			want: protocol.ClientMessage{Type: "focus", Focus: &protocol.Focus{Type: "focus", SessionID: str("s1"), Cursor: "r1"}}},
		{name: "focus cursor leading zero", in: `{"type":"focus","session_id":"s1","cursor":"r1:01"}`,
			want: protocol.ClientMessage{Type: "focus", Focus: &protocol.Focus{Type: "focus", SessionID: str("s1"), Cursor: "r1:01"}}},
		{name: "focus cursor at the bound", in: `{"type":"focus","session_id":"s1","cursor":"` + long(protocol.MaxShortBytes) + `"}`},
		{name: "focus cursor oversized", in: `{"type":"focus","session_id":"s1","cursor":"` + long(protocol.MaxShortBytes-1) + `:1"}`, code: protocol.CodeTooLarge, field: "cursor"},

		// control (the per-op rules are in TestValidateControl)
		{name: "control start", in: `{"type":"control","id":"c1","op":"start","message":"hi","toolsets":["web"],"metadata":{"sim":{"tokens":3}}}`,
			want: protocol.ClientMessage{Type: "control", Control: &protocol.Control{Type: "control", ID: "c1", Op: "start", Message: "hi",
				Toolsets: []string{"web"}, Metadata: json.RawMessage(`{"sim":{"tokens":3}}`)}}},
		{name: "control cancel", in: `{"type":"control","id":"c2","op":"cancel","run_id":"r1"}`,
			want: protocol.ClientMessage{Type: "control", Control: &protocol.Control{Type: "control", ID: "c2", Op: "cancel", RunID: "r1"}}},
		{name: "control without id", in: `{"type":"control","op":"cancel","run_id":"r1"}`, code: protocol.CodeBadRequest, field: "id"},
		{name: "control without op", in: `{"type":"control","id":"c1"}`, code: protocol.CodeBadRequest, field: "op"},
		{name: "control unknown op", in: `{"type":"control","id":"c1","op":"explode"}`, code: protocol.CodeBadRequest, field: "op"},
		{name: "control id number", in: `{"type":"control","id":1,"op":"cancel","run_id":"r1"}`, code: protocol.CodeBadRequest, field: "id"},
		{name: "control message array", in: `{"type":"control","id":"c1","op":"start","message":["hi"]}`, code: protocol.CodeBadRequest, field: "message"},
		{name: "control toolsets string", in: `{"type":"control","id":"c1","op":"start","message":"m","toolsets":"web"}`, code: protocol.CodeBadRequest, field: "toolsets"},
		{name: "control attachments object", in: `{"type":"control","id":"c1","op":"start","message":"m","attachments":{}}`, code: protocol.CodeBadRequest, field: "attachments"},
		{name: "control attachment size string", in: `{"type":"control","id":"c1","op":"start","message":"m","attachments":[{"name":"a","size":"1"}]}`, code: protocol.CodeBadRequest, field: "attachments.size"},
		{name: "control metadata string", in: `{"type":"control","id":"c1","op":"start","message":"m","metadata":"x"}`, code: protocol.CodeBadRequest, field: "metadata"},
		{name: "control message oversized", in: `{"type":"control","id":"c1","op":"start","message":"` + long(protocol.MaxTextBytes+1) + `"}`, code: protocol.CodeTooLarge, field: "message"},

		// ping
		{name: "ping", in: `{"type":"ping","id":"p1"}`,
			want: protocol.ClientMessage{Type: "ping", Ping: &protocol.Ping{Type: "ping", ID: "p1"}}},
		{name: "ping without id", in: `{"type":"ping"}`, code: protocol.CodeBadRequest, field: "id"},
		{name: "ping id number", in: `{"type":"ping","id":1}`, code: protocol.CodeBadRequest, field: "id"},
		{name: "ping id oversized", in: `{"type":"ping","id":"` + long(protocol.MaxShortBytes+1) + `"}`, code: protocol.CodeTooLarge, field: "id"},

		// the message itself
		{name: "unknown type", in: `{"type":"subscribe"}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "server type from a client", in: `{"type":"welcome"}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "type case differs", in: `{"type":"Hello","client":"c"}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "empty type", in: `{"type":""}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "missing type", in: `{"id":"p1"}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "type number", in: `{"type":1}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "type null", in: `{"type":null}`, code: protocol.CodeBadRequest, field: "type"},
		{name: "malformed JSON", in: `{"type":"ping",`, code: protocol.CodeBadRequest},
		{name: "trailing garbage", in: `{"type":"ping","id":"p"} x`, code: protocol.CodeBadRequest},
		{name: "two messages", in: `{"type":"ping","id":"p"}` + "\n" + `{"type":"ping","id":"q"}`, code: protocol.CodeBadRequest},
		{name: "empty input", in: ``, code: protocol.CodeBadRequest},
		{name: "null", in: `null`, code: protocol.CodeBadRequest},
		{name: "array", in: `[{"type":"ping"}]`, code: protocol.CodeBadRequest},
		{name: "string", in: `"ping"`, code: protocol.CodeBadRequest},
		{name: "message oversized", in: `{"type":"ping","id":"p","pad":"` + long(protocol.MaxClientMessageBytes) + `"}`, code: protocol.CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := protocol.DecodeClient([]byte(tt.in))
			if tt.code != "" {
				wantError(t, err, tt.code, tt.field)
				return
			}
			if err != nil {
				t.Fatalf("DecodeClient: %v", err)
			}
			if tt.want.Type != "" && !reflect.DeepEqual(m, tt.want) {
				t.Errorf("got  %s\nwant %s", dump(m), dump(tt.want))
			}
			checkOneOf(t, m)
		})
	}
}

// A top-level value that is not an object is not blamed on a field called
// "message" (a control has a real field of that name).
func TestDecodeClient_NotAnObjectNamesNoField(t *testing.T) {
	for _, in := range []string{`[1]`, `"x"`, `42`, `true`} {
		_, err := protocol.DecodeClient([]byte(in))
		pe := wantError(t, err, protocol.CodeBadRequest, "")
		if pe.Field != "" {
			t.Errorf("%s: field = %q, want none", in, pe.Field)
		}
	}
}

// The typed message's Type is the message type, whatever other spellings of
// the key the object carries (encoding/json matches keys case-insensitively).
func TestDecodeClient_TypeFieldIsTheMessageType(t *testing.T) {
	for _, in := range []string{
		`{"type":"ping","id":"p","TYPE":"hello"}`,
		`{"Type":"x","type":"ping","id":"p"}`,
	} {
		m, err := protocol.DecodeClient([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if m.Ping == nil || m.Ping.Type != "ping" {
			t.Errorf("%s: got %s, want a ping whose Type is ping", in, dump(m))
		}
	}
}

// Every valid cursor fits the decoder's bound on the cursor field.
func TestDecodeClient_LongestValidCursor(t *testing.T) {
	c := protocol.Cursor{RunID: strings.Repeat("r", protocol.MaxIDLen), Seq: 1<<64 - 1}
	m, err := protocol.DecodeClient([]byte(`{"type":"focus","session_id":"s1","cursor":"` + c.String() + `"}`))
	if err != nil || m.Focus.Cursor != c.String() {
		t.Fatalf("longest valid cursor: %v", err)
	}
}

// checkOneOf asserts exactly the pointer field matching Type is set.
func checkOneOf(t *testing.T, m protocol.ClientMessage) {
	t.Helper()
	set := map[string]bool{
		"hello":   m.Hello != nil,
		"watch":   m.Watch != nil && (m.Type == "watch" || m.Type == "unwatch"),
		"focus":   m.Focus != nil,
		"control": m.Control != nil,
		"ping":    m.Ping != nil,
	}
	n := 0
	for _, v := range set {
		if v {
			n++
		}
	}
	key := m.Type
	if key == "unwatch" {
		key = "watch"
	}
	if n != 1 || !set[key] {
		t.Errorf("message %s: want exactly the %s field set", dump(m), m.Type)
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func TestValidateControl(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name  string
		c     protocol.Control
		code  protocol.Code
		field string
	}{
		// common fields
		{name: "no id", c: protocol.Control{Op: "cancel", RunID: "r1"}, code: protocol.CodeBadRequest, field: "id"},
		{name: "id oversized", c: protocol.Control{ID: long(protocol.MaxShortBytes + 1), Op: "cancel", RunID: "r1"}, code: protocol.CodeTooLarge, field: "id"},
		{name: "no op", c: protocol.Control{ID: "c"}, code: protocol.CodeBadRequest, field: "op"},
		{name: "unknown op", c: protocol.Control{ID: "c", Op: "restart"}, code: protocol.CodeBadRequest, field: "op"},
		{name: "op oversized", c: protocol.Control{ID: "c", Op: long(protocol.MaxShortBytes + 1)}, code: protocol.CodeTooLarge, field: "op"},

		// start
		{name: "start", c: protocol.Control{ID: "c", Op: "start", Message: "hello"}},
		{name: "start in a session", c: protocol.Control{ID: "c", Op: "start", SessionID: "s1", Message: "hello",
			Attachments: []protocol.Attachment{{Name: "a.txt", MediaType: "text/plain", URL: "https://x/a.txt", Size: 3}},
			Workspace:   "/w", Profile: "p", Provider: "openai", Model: "m", Toolsets: []string{"web", "files"},
			Metadata: json.RawMessage(`{"sim":{"tokens":1}}`)}},
		{name: "start metadata null", c: protocol.Control{ID: "c", Op: "start", Message: "m", Metadata: json.RawMessage(`null`)}},
		{name: "start without message", c: protocol.Control{ID: "c", Op: "start"}, code: protocol.CodeBadRequest, field: "message"},
		{name: "start blank message", c: protocol.Control{ID: "c", Op: "start", Message: " \n\t"}, code: protocol.CodeBadRequest, field: "message"},
		{name: "start bad session_id", c: protocol.Control{ID: "c", Op: "start", SessionID: "s:1", Message: "m"}, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "start message oversized", c: protocol.Control{ID: "c", Op: "start", Message: long(protocol.MaxTextBytes + 1)}, code: protocol.CodeTooLarge, field: "message"},
		{name: "start message at bound", c: protocol.Control{ID: "c", Op: "start", Message: long(protocol.MaxTextBytes)}},
		{name: "start workspace oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Workspace: long(protocol.MaxShortBytes*4 + 1)}, code: protocol.CodeTooLarge, field: "workspace"},
		{name: "start profile oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Profile: long(protocol.MaxShortBytes + 1)}, code: protocol.CodeTooLarge, field: "profile"},
		{name: "start provider oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Provider: long(protocol.MaxShortBytes + 1)}, code: protocol.CodeTooLarge, field: "provider"},
		{name: "start model oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Model: long(protocol.MaxShortBytes + 1)}, code: protocol.CodeTooLarge, field: "model"},
		{name: "start metadata array", c: protocol.Control{ID: "c", Op: "start", Message: "m", Metadata: json.RawMessage(`[1]`)}, code: protocol.CodeBadRequest, field: "metadata"},
		{name: "start metadata oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Metadata: json.RawMessage(`{"k":"` + long(protocol.MaxMetadataBytes) + `"}`)}, code: protocol.CodeTooLarge, field: "metadata"},
		{name: "start too many attachments", c: protocol.Control{ID: "c", Op: "start", Message: "m", Attachments: make([]protocol.Attachment, protocol.MaxAttachments+1)}, code: protocol.CodeTooLarge, field: "attachments"},
		{name: "start too many toolsets", c: protocol.Control{ID: "c", Op: "start", Message: "m", Toolsets: make([]string, protocol.MaxToolsets+1)}, code: protocol.CodeTooLarge, field: "toolsets"},
		{name: "start toolset oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Toolsets: []string{"web", long(protocol.MaxShortBytes + 1)}}, code: protocol.CodeTooLarge, field: "toolsets[1]"},
		{name: "start attachment name oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Attachments: []protocol.Attachment{{Name: long(protocol.MaxShortBytes*4 + 1)}}}, code: protocol.CodeTooLarge, field: "attachments[0].name"},
		{name: "start attachment size over the limit", c: protocol.Control{ID: "c", Op: "start", Message: "m", Attachments: []protocol.Attachment{{Name: "a"}, {Name: "b", Size: protocol.MaxAttachmentBytes + 1}}}, code: protocol.CodeTooLarge, field: "attachments[1].size"},
		{name: "start attachment size negative", c: protocol.Control{ID: "c", Op: "start", Message: "m", Attachments: []protocol.Attachment{{Name: "a", Size: -1}}}, code: protocol.CodeBadRequest, field: "attachments[0].size"},
		{name: "start attachment url oversized", c: protocol.Control{ID: "c", Op: "start", Message: "m", Attachments: []protocol.Attachment{{Name: "a", URL: long(protocol.MaxTextBytes + 1)}}}, code: protocol.CodeTooLarge, field: "attachments[0].url"},

		// cancel
		{name: "cancel run", c: protocol.Control{ID: "c", Op: "cancel", RunID: "r1"}},
		{name: "cancel session", c: protocol.Control{ID: "c", Op: "cancel", SessionID: "s1"}},
		{name: "cancel neither", c: protocol.Control{ID: "c", Op: "cancel"}, code: protocol.CodeBadRequest, field: "run_id"},
		{name: "cancel bad run_id", c: protocol.Control{ID: "c", Op: "cancel", RunID: "r 1"}, code: protocol.CodeBadRequest, field: "run_id"},
		{name: "cancel run_id oversized", c: protocol.Control{ID: "c", Op: "cancel", RunID: long(protocol.MaxIDLen + 1)}, code: protocol.CodeTooLarge, field: "run_id"},

		// approve
		{name: "approve", c: protocol.Control{ID: "c", Op: "approve", RunID: "r1", ApprovalID: "a1", Choice: "once"}},
		{name: "approve without run_id", c: protocol.Control{ID: "c", Op: "approve", ApprovalID: "a1", Choice: "once"}, code: protocol.CodeBadRequest, field: "run_id"},
		{name: "approve without approval_id", c: protocol.Control{ID: "c", Op: "approve", RunID: "r1", Choice: "once"}, code: protocol.CodeBadRequest, field: "approval_id"},
		{name: "approve without choice", c: protocol.Control{ID: "c", Op: "approve", RunID: "r1", ApprovalID: "a1"}, code: protocol.CodeBadRequest, field: "choice"},
		{name: "approve bad approval_id", c: protocol.Control{ID: "c", Op: "approve", RunID: "r1", ApprovalID: "a#1", Choice: "once"}, code: protocol.CodeBadRequest, field: "approval_id"},
		{name: "approve choice oversized", c: protocol.Control{ID: "c", Op: "approve", RunID: "r1", ApprovalID: "a1", Choice: long(protocol.MaxShortBytes + 1)}, code: protocol.CodeTooLarge, field: "choice"},

		// clarify
		{name: "clarify", c: protocol.Control{ID: "c", Op: "clarify", RunID: "r1", ClarifyID: "q1", Response: "blue"}},
		{name: "clarify without run_id", c: protocol.Control{ID: "c", Op: "clarify", ClarifyID: "q1", Response: "blue"}, code: protocol.CodeBadRequest, field: "run_id"},
		{name: "clarify without clarify_id", c: protocol.Control{ID: "c", Op: "clarify", RunID: "r1", Response: "blue"}, code: protocol.CodeBadRequest, field: "clarify_id"},
		{name: "clarify without response", c: protocol.Control{ID: "c", Op: "clarify", RunID: "r1", ClarifyID: "q1"}, code: protocol.CodeBadRequest, field: "response"},
		{name: "clarify bad clarify_id", c: protocol.Control{ID: "c", Op: "clarify", RunID: "r1", ClarifyID: "q\x001", Response: "x"}, code: protocol.CodeBadRequest, field: "clarify_id"},
		{name: "clarify response oversized", c: protocol.Control{ID: "c", Op: "clarify", RunID: "r1", ClarifyID: "q1", Response: long(protocol.MaxTextBytes + 1)}, code: protocol.CodeTooLarge, field: "response"},

		// queue
		{name: "queue", c: protocol.Control{ID: "c", Op: "queue", SessionID: "s1", Message: "next"}},
		{name: "queue mode queue", c: protocol.Control{ID: "c", Op: "queue", SessionID: "s1", Message: "next", Mode: "queue"}},
		{name: "queue mode steer", c: protocol.Control{ID: "c", Op: "queue", SessionID: "s1", Message: "next", Mode: "steer"}},
		{name: "queue unknown mode", c: protocol.Control{ID: "c", Op: "queue", SessionID: "s1", Message: "next", Mode: "now"}, code: protocol.CodeBadRequest, field: "mode"},
		{name: "queue without session_id", c: protocol.Control{ID: "c", Op: "queue", Message: "next"}, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "queue without message", c: protocol.Control{ID: "c", Op: "queue", SessionID: "s1"}, code: protocol.CodeBadRequest, field: "message"},
		{name: "queue message oversized", c: protocol.Control{ID: "c", Op: "queue", SessionID: "s1", Message: long(protocol.MaxTextBytes + 1)}, code: protocol.CodeTooLarge, field: "message"},

		// goal
		{name: "goal set", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "set", Text: "ship it"}},
		{name: "goal edit", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "edit", Text: "ship it now"}},
		{name: "goal pause", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "pause"}},
		{name: "goal resume", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "resume"}},
		{name: "goal clear", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "clear"}},
		{name: "goal status", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "status"}},
		{name: "goal set without text", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "set"}, code: protocol.CodeBadRequest, field: "text"},
		{name: "goal edit without text", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "edit", Text: "  "}, code: protocol.CodeBadRequest, field: "text"},
		{name: "goal unknown action", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "delete"}, code: protocol.CodeBadRequest, field: "action"},
		{name: "goal without action", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1"}, code: protocol.CodeBadRequest, field: "action"},
		{name: "goal without session_id", c: protocol.Control{ID: "c", Op: "goal", Action: "status"}, code: protocol.CodeBadRequest, field: "session_id"},
		{name: "goal text oversized", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: "set", Text: long(protocol.MaxTextBytes + 1)}, code: protocol.CodeTooLarge, field: "text"},
		{name: "goal action oversized", c: protocol.Control{ID: "c", Op: "goal", SessionID: "s1", Action: long(protocol.MaxShortBytes + 1)}, code: protocol.CodeTooLarge, field: "action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			err := protocol.ValidateControl(&c)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("ValidateControl: %v", err)
				}
				// The same control decodes from the wire.
				c.Type = protocol.MsgControl
				b, _ := json.Marshal(c)
				m, err := protocol.DecodeClient(b)
				if err != nil {
					t.Fatalf("DecodeClient(%s): %v", b, err)
				}
				if !reflect.DeepEqual(m.Control, &c) {
					t.Errorf("decoded %s\nwant    %s", dump(m.Control), dump(c))
				}
				return
			}
			wantError(t, err, tt.code, tt.field)
		})
	}
}

func TestValidateGoalAction(t *testing.T) {
	for _, a := range []string{"set", "edit", "pause", "resume", "clear", "status"} {
		if err := protocol.ValidateGoalAction(a, "t"); err != nil {
			t.Errorf("%s with text: %v", a, err)
		}
	}
	for _, a := range []string{"pause", "resume", "clear", "status"} {
		if err := protocol.ValidateGoalAction(a, ""); err != nil {
			t.Errorf("%s without text: %v", a, err)
		}
	}
	for _, a := range []string{"set", "edit"} {
		wantError(t, protocol.ValidateGoalAction(a, ""), protocol.CodeBadRequest, "text")
	}
	for _, a := range []string{"", "SET", "start", "set "} {
		wantError(t, protocol.ValidateGoalAction(a, "t"), protocol.CodeBadRequest, "action")
	}
}

func TestControl_StartRequest(t *testing.T) {
	c := protocol.Control{ID: "c", Op: "start", SessionID: "s1", Message: "m",
		Attachments: []protocol.Attachment{{Name: "a"}}, Workspace: "/w", Profile: "p", Provider: "pr",
		Model: "mo", Toolsets: []string{"t"}, Metadata: json.RawMessage(`{"k":1}`)}
	got := c.StartRequest()
	want := protocol.StartRunRequest{SessionID: "s1", Message: "m", Attachments: []protocol.Attachment{{Name: "a"}},
		Workspace: "/w", Profile: "p", Provider: "pr", Model: "mo", Toolsets: []string{"t"},
		Source: "user", Metadata: json.RawMessage(`{"k":1}`)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %s\nwant %s", dump(got), dump(want))
	}
}

func TestSplitBatch(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", nil},
		{"\n\n \t\n", nil},
		{`{"a":1}`, []string{`{"a":1}`}},
		{`{"a":1}` + "\n", []string{`{"a":1}`}},
		{"a\nb", []string{"a", "b"}},
		{"a\n\nb\n", []string{"a", "b"}},
		{"\na\n \nb", []string{"a", "b"}},
		{"a\r\nb\r\n", []string{"a\r", "b\r"}},
		{" a \n", []string{" a "}},
	}
	for _, tt := range tests {
		data := []byte(tt.in)
		got := protocol.SplitBatch(data)
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		if !reflect.DeepEqual(gs, tt.want) {
			t.Errorf("SplitBatch(%q) = %q, want %q", tt.in, gs, tt.want)
		}
	}

	// Every part of a frame of messages decodes; the parts alias the frame.
	frame := []byte(`{"type":"hello","client":"c"}` + "\n" + `{"type":"ping","id":"1"}` + "\n\n" + `{"type":"watch","all":true}` + "\n")
	parts := protocol.SplitBatch(frame)
	if len(parts) != 3 {
		t.Fatalf("got %d parts, want 3", len(parts))
	}
	for _, p := range parts {
		if _, err := protocol.DecodeClient(p); err != nil {
			t.Errorf("part %s: %v", p, err)
		}
	}
	frame[1] = 'X'
	if parts[0][1] != 'X' {
		t.Errorf("parts do not alias the frame")
	}
}
