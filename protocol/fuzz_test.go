package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// clientSeeds are the in-code seeds of FuzzDecodeClient and FuzzSplitBatch;
// more live in testdata/fuzz/FuzzDecodeClient.
var clientSeeds = []string{
	`{"type":"hello","token":"eyJhbGciOiJIUzI1NiJ9.e30.x","client":"web/1"}`,
	`{"type":"watch","sessions":["s1","s2"]}`,
	`{"type":"watch","all":true}`,
	`{"type":"unwatch","sessions":["s1"],"all":false}`,
	`{"type":"focus","session_id":"s1","cursor":"r_01J:42"}`,
	`{"type":"focus","session_id":null}`,
	`{"type":"control","id":"c1","op":"start","session_id":"s1","message":"hi","attachments":[{"name":"a","size":1}],"toolsets":["web"],"metadata":{"sim":{"tokens":3,"approval":true}}}`,
	`{"type":"control","id":"c2","op":"cancel","run_id":"r1"}`,
	`{"type":"control","id":"c3","op":"approve","run_id":"r1","approval_id":"a1","choice":"once"}`,
	`{"type":"control","id":"c4","op":"clarify","run_id":"r1","clarify_id":"q1","response":"blue"}`,
	`{"type":"control","id":"c5","op":"queue","session_id":"s1","message":"next","mode":"steer"}`,
	`{"type":"control","id":"c6","op":"goal","session_id":"s1","action":"set","text":"ship"}`,
	`{"type":"ping","id":"p1"}`,
	`{"type":"ping","id":"p1","TYPE":"hello"}`,
	`{"type":"focus","session_id":"s1","cursor":"r1:01"}`,
	`{"type":"watch","sessions":null}`,
	`{"type":"control","id":"c","op":"start","message":"m","metadata":null}`,
	`{"type":"control","id":"c","op":"start","message":"m","metadata": { "a" : [ 1 , 2 ] } }`,
	`{"type":"nope"}`,
	`{"type":`,
	`[]`,
	`null`,
}

func FuzzDecodeClient(f *testing.F) {
	for _, s := range clientSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := protocol.DecodeClient(data)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *protocol.Error", err, err)
			}
			if !knownCodes[pe.Code] || pe.Message == "" {
				t.Fatalf("error %#v: unknown code or empty message", pe)
			}
			if pe.Field != "" && !strings.Contains(pe.Message, pe.Field) {
				t.Fatalf("error %#v does not name its field in the message", pe)
			}
			return
		}
		checkOneOf(t, m)
		if m.Control != nil {
			if err := protocol.ValidateControl(m.Control); err != nil {
				t.Fatalf("decoded control does not validate: %v", err)
			}
		}
		if m.Focus != nil && m.Focus.Cursor != "" {
			if c, err := protocol.ParseCursor(m.Focus.Cursor); err == nil && c.String() != m.Focus.Cursor {
				t.Fatalf("focus cursor %q parses to %+v", m.Focus.Cursor, c)
			}
		}

		// The message re-encodes to a message that decodes to the same.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(typed(m)); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if len(again) > protocol.MaxClientMessageBytes {
			return // grown by escaping past the bound; not the property under test
		}
		m2, err := protocol.DecodeClient(again)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", again, err)
		}
		normalize(&m)
		normalize(&m2)
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decoded message differs\n first %s\nsecond %s", dump(m), dump(m2))
		}
	})
}

func typed(m protocol.ClientMessage) any {
	switch {
	case m.Hello != nil:
		return m.Hello
	case m.Watch != nil:
		return m.Watch
	case m.Focus != nil:
		return m.Focus
	case m.Control != nil:
		return m.Control
	case m.Ping != nil:
		return m.Ping
	}
	return nil
}

// normalize undoes what re-encoding changes without changing meaning: raw
// metadata is compacted, and empty lists are omitted (so they come back nil).
func normalize(m *protocol.ClientMessage) {
	if c := m.Control; c != nil {
		if len(c.Metadata) > 0 {
			var b bytes.Buffer
			if json.Compact(&b, c.Metadata) == nil {
				c.Metadata = b.Bytes()
			}
		}
		if len(c.Attachments) == 0 {
			c.Attachments = nil
		}
		if len(c.Toolsets) == 0 {
			c.Toolsets = nil
		}
	}
	if m.Watch != nil && len(m.Watch.Sessions) == 0 {
		m.Watch.Sessions = nil
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"r1:1", "r_01J.x-y:42", "r:0", "r:18446744073709551615", "", ":", "r1:", ":1",
		"r1:01", "r1:+1", "r1:-1", "a:b:1", "r 1:1", "r1:18446744073709551616", strings.Repeat("r", 129) + ":1"} {
		f.Add(s, uint64(7))
	}
	f.Fuzz(func(t *testing.T, s string, seq uint64) {
		c, err := protocol.ParseCursor(s)
		if err != nil {
			if code := protocol.CodeOf(err); code != protocol.CodeBadCursor {
				t.Fatalf("ParseCursor(%q): code %q, want bad_cursor", s, code)
			}
			if c != (protocol.Cursor{}) {
				t.Fatalf("ParseCursor(%q) = %+v with an error", s, c)
			}
		} else {
			if got := c.String(); got != s {
				t.Fatalf("ParseCursor(%q).String() = %q", s, got)
			}
			if err := protocol.ValidID(c.RunID); err != nil {
				t.Fatalf("ParseCursor(%q) run id: %v", s, err)
			}
		}

		// Any valid id with any seq formats to a cursor that parses back.
		if protocol.ValidID(s) == nil {
			want := protocol.Cursor{RunID: s, Seq: seq}
			got, err := protocol.ParseCursor(want.String())
			if err != nil || got != want {
				t.Fatalf("ParseCursor(%q) = %+v, %v; want %+v", want.String(), got, err, want)
			}
		}
	})
}

// FuzzParseLastEventID: a Last-Event-ID resumes only its own run, at the
// seq it names; anything else is bad_cursor.
func FuzzParseLastEventID(f *testing.F) {
	for _, s := range []string{"r1:1", "r1:0", "r2:5", "r1:01", "r1:", "r1", "r1:1\r\n", "r1:1 ", " r1:1", "r1:18446744073709551615",
		"r1:18446744073709551616", "r1:-1", "x:r1:3", "r1:3:4", ""} {
		f.Add(s, "r1")
	}
	f.Fuzz(func(t *testing.T, header, runID string) {
		seq, err := protocol.ParseLastEventID(header, runID)
		if err != nil {
			if code := protocol.CodeOf(err); code != protocol.CodeBadCursor {
				t.Fatalf("ParseLastEventID(%q, %q): code %q, want bad_cursor", header, runID, code)
			}
			if seq != 0 {
				t.Fatalf("ParseLastEventID(%q, %q) = %d with an error", header, runID, seq)
			}
			return
		}
		if got := protocol.EventID(runID, seq); got != header {
			t.Fatalf("ParseLastEventID(%q, %q) = %d, but that event id is %q", header, runID, seq, got)
		}
	})
}

// FuzzDecodeServer: no server frame makes the client's decoder panic, and
// every error is a *protocol.Error.
func FuzzDecodeServer(f *testing.F) {
	for _, s := range []string{
		`{"type":"welcome","protocol":"runhub.v1","conn_id":"c1","hub_id":"h1","subject":"local","limits":{"max_frame_bytes":1}}`,
		`{"type":"status","session":{"session_id":"s1","status":"running","pending_approval":{"approval_id":"a","choices":["once"]}}}`,
		`{"type":"event","event":{"event_id":"r1:1","seq":1,"run_id":"r1","session_id":"s1","type":"token.delta","created_at":1.5,"payload":{"text":"x"}}}`,
		`{"type":"replayed","session_id":"s1","cursor":"r1:3","count":3}`,
		`{"type":"control_result","id":"c1","accepted":true,"status":"accepted"}`,
		`{"type":"error","code":"rate_limited","message":"slow down"}`,
		`{"type":"pong","id":"p","time":1.5}`, `{"type":"goaway","reason":"bye","reconnect_after_ms":1000}`,
		`{"type":"event","event":null}`, `{"type":"status"}`, `{"type":7}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := protocol.DecodeServer(data)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *protocol.Error", err, err)
			}
			return
		}
		if m == nil {
			t.Fatalf("DecodeServer(%q) = nil, nil", data)
		}
	})
}

func FuzzSplitBatch(f *testing.F) {
	f.Add([]byte(strings.Join(clientSeeds, "\n")))
	f.Add([]byte("a\r\n\r\nb\n \t\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		parts := protocol.SplitBatch(data)
		if !bytes.Equal(data, orig) {
			t.Fatalf("SplitBatch modified its input")
		}
		var want [][]byte
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				want = append(want, line)
			}
		}
		if len(parts) != len(want) {
			t.Fatalf("got %d parts, want %d: %q", len(parts), len(want), parts)
		}
		end := 0 // parts are in order, alias data and never overlap
		for i, p := range parts {
			if !bytes.Equal(p, want[i]) {
				t.Fatalf("part %d = %q, want %q", i, p, want[i])
			}
			off := cap(data) - cap(p) // p is data[off:off+len(p)]
			if off < end || off+len(p) > len(data) || !bytes.Equal(data[off:off+len(p)], p) {
				t.Fatalf("part %d at %d..%d is not within data after %d", i, off, off+len(p), end)
			}
			end = off + len(p)
		}
	})
}
