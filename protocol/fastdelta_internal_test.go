package protocol

import (
	"encoding/json"
	"testing"
)

func deltaEvent(typ EventType, payload string) *Envelope {
	return &Envelope{RunID: "r_1", SessionID: "s_1", Type: typ, Payload: json.RawMessage(payload)}
}

// The delta shape drivers emit takes the short path; everything else,
// valid or not, goes the full path, which accepts or refuses it as before.
func TestValidDelta(t *testing.T) {
	for _, c := range []struct {
		payload string
		key     string
		fast    bool
	}{
		{`{"message_id":"m1","text":"w1 "}`, "message_id", true},
		{`{"text":"w1 ","message_id":"m1"}`, "message_id", true},
		{`{"message_id":"","text":""}`, "message_id", true},
		{`{"message_id":"m1","text":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00 é"}`, "message_id", true},
		{`{"block_id":"b1","text":"think"}`, "block_id", true},
		{`{"block_id":"b1","text":"think"}`, "message_id", false},             // the other type's key
		{`{"message_id":"m1"}`, "message_id", false},                          // text missing
		{`{"message_id":"m1","text":"a","x":1}`, "message_id", false},         // a third member
		{`{"message_id":"m1","message_id":"m2"}`, "message_id", false},        // repeated
		{`{"message_id":"m1", "text":"a"}`, "message_id", false},              // white space
		{`{"message_id":1,"text":"a"}`, "message_id", false},                  // not a string
		{`{"message_id":"m1","text":null}`, "message_id", false},              // null
		{`{"message_id":"m1","text":"a` + "\x01" + `"}`, "message_id", false}, // control character
		{`{"message_id":"m1","text":"\x"}`, "message_id", false},              // bad escape
		{`{"message_id":"m1","text":"\u12"}`, "message_id", false},            // short \u
		{`{"message_id":"m1","text":"a"`, "message_id", false},                // unclosed object
		{`{"message_id":"m1","text":"a}`, "message_id", false},                // unclosed string
		{`{"message_id":"m1","text":"a"}}`, "message_id", false},              // trailing byte
		{`{"mess\u0061ge_id":"m1","text":"a"}`, "message_id", false},          // escaped key
		{`[]`, "message_id", false},
		{``, "message_id", false},
	} {
		if got := validDelta([]byte(c.payload), c.key); got != c.fast {
			t.Errorf("validDelta(%s, %s) = %v, want %v", c.payload, c.key, got, c.fast)
		}
		if c.fast {
			typ := EventTokenDelta
			if c.key == "block_id" {
				typ = EventReasoningDelta
			}
			if err := validatePayload(deltaEvent(typ, c.payload)); err != nil {
				t.Errorf("%s takes the short path, but the full path refuses it: %v", c.payload, err)
			}
		}
	}
	// A terminal delta is refused as before, however it is shaped.
	e := deltaEvent(EventTokenDelta, `{"message_id":"m1","text":"a"}`)
	e.Terminal = true
	if err := ValidateEvent(e); err == nil {
		t.Error("a terminal token.delta was accepted")
	}
}

// The short path decodes nothing: a delta's check allocates nothing.
func TestValidateEvent_DeltaAllocatesNothing(t *testing.T) {
	e := deltaEvent(EventTokenDelta, `{"message_id":"m_0123456789","text":"w42 "}`)
	if n := testing.AllocsPerRun(100, func() {
		if err := ValidateEvent(e); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ValidateEvent of a token.delta: %v allocations, want 0", n)
	}
}

// Whatever the short path accepts, the full path accepts too.
func FuzzValidDelta(f *testing.F) {
	for _, s := range []string{
		`{"message_id":"m1","text":"w1 "}`, `{"text":"\u00e9","message_id":"m"}`,
		`{"block_id":"b","text":"a\nb"}`, `{"message_id":"m1","text":"a\"}`,
		`{"message_id":"m","text":"\ud83d"}`, "{\"message_id\":\"m\",\"text\":\"\xff\"}",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, payload string, token bool) {
		typ, key := EventTokenDelta, "message_id"
		if !token {
			typ, key = EventReasoningDelta, "block_id"
		}
		if !validDelta([]byte(payload), key) {
			return
		}
		if err := validatePayload(deltaEvent(typ, payload)); err != nil {
			t.Fatalf("%q takes the short path, but the full path refuses it: %v", payload, err)
		}
		var v map[string]string
		if err := json.Unmarshal([]byte(payload), &v); err != nil || len(v) != 2 {
			t.Fatalf("%q takes the short path, but is not a two-member object of strings: %v", payload, err)
		}
		// Compaction reads the two values without decoding the object:
		// the same strings encoding/json reads.
		id, text, ok := deltaFields([]byte(payload), key)
		if !ok || id != v[key] || text != v["text"] {
			t.Fatalf("%q: deltaFields = %q, %q, %v; encoding/json reads %q, %q", payload, id, text, ok, v[key], v["text"])
		}
	})
}
