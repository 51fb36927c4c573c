package agui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzReadFrames: frameReader reads any body without panicking, never
// returns a frame over its bound, and gives back exactly the data of a
// stream written as @ag-ui/encoder writes one (each event "data: <data>\n\n",
// here with "\r\n" line ends when the first byte is odd), however the
// body is cut into reads.
func FuzzReadFrames(f *testing.F) {
	f.Add([]byte(`{"type":"RUN_STARTED"}` + "\x00" + `{"type":"RUN_FINISHED"}`))
	f.Add([]byte("a\x00\x00b\nc"))
	f.Add([]byte("data: x\n\nid: 1\n: comment\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Arbitrary bytes as a body.
		fr := newFrameReader(iotest.OneByteReader(bytes.NewReader(data)))
		for range len(data) + 2 {
			got, _, err := fr.next()
			if len(got) > maxFrame {
				t.Fatalf("a frame of %d bytes", len(got))
			}
			if err != nil {
				break
			}
		}
		// The same bytes as events' data (split at NUL, no newline in one).
		var want []string
		var body strings.Builder
		eol := "\n"
		if len(data) > 0 && data[0]%2 == 1 {
			eol = "\r\n"
		}
		for _, d := range bytes.Split(data, []byte{0}) {
			d = bytes.Map(func(r rune) rune {
				if r == '\n' || r == '\r' {
					return ' '
				}
				return r
			}, d)
			want = append(want, string(d))
			body.WriteString("data: " + string(d) + eol + eol)
		}
		fr = newFrameReader(iotest.HalfReader(strings.NewReader(body.String())))
		for i, w := range want {
			got, cut, err := fr.next()
			if err != nil || cut || string(got) != w {
				t.Fatalf("frame %d: %q %v %v, want %q", i, got, cut, err, w)
			}
		}
		if _, _, err := fr.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the last frame: %v", err)
		}
	})
}

// FuzzApply: any sequence of events (lines of the input) maps without
// panicking; every event journaled is one the journal takes (the
// recorder validates each), and an event that is refused is a
// MalformedError.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}` + "\n" + `{"type":"TOOL_CALL_CHUNK","toolCallId":"t","toolCallName":"f","delta":"{"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"t","toolCallName":"f"}` + "\n" + `{"type":"TOOL_CALL_RESULT","messageId":"r","toolCallId":"t","content":"x"}`,
		`{"type":"REASONING_MESSAGE_CHUNK","messageId":"b","delta":"x"}` + "\n" + `{"type":"RUN_FINISHED","threadId":"s","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"x"}]}}`,
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":"q"}]}` + "\n" + `{"type":"STATE_SNAPSHOT","snapshot":null}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"\u00ff/x","role":"user"}` + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"\u00ff/x","delta":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &recorder{t: t}
		m := newMapper(r)
		for _, line := range bytes.Split(data, []byte("\n")) {
			if err := m.apply(context.Background(), line); err != nil {
				var me *MalformedError
				if !errors.As(err, &me) {
					t.Fatalf("%q: %v", line, err)
				}
				return
			}
			if m.outcome != nil || m.runErr != nil {
				m.begin()
			}
		}
		if err := m.closeAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
