package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzNewEventDelta: a token delta's payload is what json.Marshal makes of
// it, whether NewEvent writes it itself or declines to; plain strings take
// the fast path.
func FuzzNewEventDelta(f *testing.F) {
	for _, s := range [][2]string{
		{"m1", "w1 "}, {"m", ""}, {"m", "a\nb"}, {"m", `"q"`}, {"m", `back\slash`}, {"m<", "x"},
		{"m", "é"}, {"m", "\u2028"}, {"m", "\xff"}, {"m", "a&b"}, {"m", "\x7f"}, {"", " ~"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, id, text string) {
		p := TokenDeltaPayload{MessageID: id, Text: text}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEvent("r_1", "s_1", EventTokenDelta, p)
		if err != nil || !bytes.Equal(e.Payload, want) {
			t.Fatalf("NewEvent(%q, %q) payload %s, %v; json.Marshal %s", id, text, e.Payload, err, want)
		}
		fast, ok := appendTokenDelta(nil, p)
		if ok != (plainJSON(id) && plainJSON(text)) || (ok && !bytes.Equal(fast, want)) {
			t.Fatalf("appendTokenDelta(%q, %q) = %s, %v; want %s", id, text, fast, ok, want)
		}
	})
}

// Only a TokenDeltaPayload value takes the fast path.
func TestAppendTokenDeltaOtherPayloads(t *testing.T) {
	for _, p := range []any{&TokenDeltaPayload{MessageID: "m", Text: "t"}, ReasoningPayload{}, map[string]string{"text": "t"}, nil} {
		if b, ok := appendTokenDelta(nil, p); ok || b != nil {
			t.Errorf("appendTokenDelta(%T) = %s, %v; want declined", p, b, ok)
		}
	}
}
