package protocol_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// protocol.EncodeEventFrame must produce exactly protocol.EncodeEvent's bytes.
func TestEncodeEventFrameMatchesEncodeEvent(t *testing.T) {
	payloads := []string{
		`{"message_id":"m1","text":"w1 "}`,
		`{"text":"w2 ","message_id":"m1"}`,
		`{ "text" : "a <b> & c \u2028 \u2029 é 😀", "n": [1, 2.5e3, null, true] }`,
		`{"result":{"html":"<script>alert('x')</script>"}}`,
		`{"big":"` + strings.Repeat("x", 100<<10) + `"}`,
		`{}`,
	}
	for i, p := range payloads {
		sid := "s_1" // deltas of plain ids take protocol.AppendEventFrame
		if i%3 == 2 {
			sid = "s_<1>"
		}
		e := protocol.Envelope{EventID: "r_1:7", Seq: 7, RunID: "r_1", SessionID: sid, Type: "token.delta",
			CreatedAt: 1778750000.123456, Terminal: i%2 == 1, Payload: json.RawMessage(p)}
		want, err := protocol.EncodeEvent(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a second time through the pooled encoder
			got, err := protocol.EncodeEventFrame(&e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("payload %d:\n got %.300s\nwant %.300s", i, got, want)
			}
		}
	}
	bad := protocol.Envelope{Payload: json.RawMessage(`{"unterminated":`)}
	if _, err := protocol.EncodeEventFrame(&bad); err == nil {
		t.Fatal("invalid payload encoded")
	}
	if _, err := protocol.EncodeEvent(nil, &bad); err == nil {
		t.Fatal("protocol.EncodeEvent accepted an invalid payload")
	}
}

func BenchmarkEncodeEventFrame(b *testing.B) {
	e := protocol.Envelope{EventID: "r_01JABCDEF:42", Seq: 42, RunID: "r_01JABCDEF", SessionID: "s_01JABCDEF", Type: "token.delta",
		CreatedAt: 1778750000.123456, Payload: json.RawMessage(`{"message_id":"m1","text":"w41 "}`)}
	b.Run("protocol.EncodeEvent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			protocol.EncodeEvent(nil, &e)
		}
	})
	b.Run("EncodeEventFrame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			protocol.EncodeEventFrame(&e)
		}
	})
}
