package protocol_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// frameCase builds the envelope the tests and the fuzzer encode.
func frameCase(payload, sid string, created float64, reasoning, terminal bool) protocol.Envelope {
	typ := protocol.EventTokenDelta
	if reasoning {
		typ = protocol.EventReasoningDelta
	}
	return protocol.Envelope{EventID: "r_1:7", Seq: 7, RunID: "r_1", SessionID: sid, Type: typ,
		CreatedAt: created, Terminal: terminal, Payload: json.RawMessage(payload)}
}

// checkFrame: whatever AppendEventFrame writes is EncodeEvent's bytes,
// appended after what dst held; when it declines it appends nothing.
func checkFrame(t *testing.T, e protocol.Envelope) bool {
	t.Helper()
	prefix := []byte("xyz")
	got, ok := protocol.AppendEventFrame(bytes.Clone(prefix), &e)
	if !ok {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("declined %+v but appended %q", e, got[len(prefix):])
		}
		return false
	}
	want, err := protocol.EncodeEvent(bytes.Clone(prefix), &e)
	if err != nil {
		t.Fatalf("fast path took %+v, which encoding/json refuses: %v", e, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%+v:\n got %s\nwant %s", e, got, want)
	}
	return true
}

func TestAppendEventFrame(t *testing.T) {
	for _, c := range []struct {
		payload, sid string
		created      float64
		reasoning    bool
		fast         bool
	}{
		{`{"message_id":"m1","text":"w1 "}`, "s_1", 1778750000.123456, false, true},
		{`{"text":"é 😀 \"q\" \\ \n","message_id":"m1"}`, "s_1", 1778750000.5, false, true},
		{`{"block_id":"b1","text":"thinking"}`, "s_1", 0, true, true},
		{`{"message_id":"m1","text":"a <b>"}`, "s_1", 1, false, false},          // HTML: escaped by encoding/json
		{`{"message_id":"m1","text":"a & b"}`, "s_1", 1, false, false},          // likewise
		{"{\"message_id\":\"m1\",\"text\":\"\u2028\"}", "s_1", 1, false, false}, // U+2028: escaped
		{`{ "message_id":"m1","text":"x"}`, "s_1", 1, false, false},             // not compact
		{`{"message_id":"m1","text":"x","n":1}`, "s_1", 1, false, false},        // another member
		{`{"message_id":"m1","text":"x"}`, "s_<1>", 1, false, false},            // an id encoding/json escapes
		{`{"message_id":"m1","text":"x"}`, "s_é", 1, false, false},              // non-ASCII id
		{`{"message_id":"m1","text":"x"}`, "s_1", 1e-7, false, false},           // 'e' form
		{`{"message_id":"m1","text":"x"}`, "s_1", 1e21, false, false},           // 'e' form
		{`{"message_id":"m1","text":"x"}`, "s_1", math.Inf(1), false, false},    // refused by encoding/json
		{`{"message_id":"m1","text":"x"}`, "s_1", math.NaN(), false, false},     // refused by encoding/json
		{`{"message_id":"m1","text":"x"`, "s_1", 1, false, false},               // invalid JSON
		{`{"block_id":"b1","text":"x"}`, "s_1", 1, false, false},                // a token delta's id is message_id
	} {
		e := frameCase(c.payload, c.sid, c.created, c.reasoning, false)
		if got := checkFrame(t, e); got != c.fast {
			t.Errorf("%s (session %q, created_at %v): fast path %v, want %v", c.payload, c.sid, c.created, got, c.fast)
		}
	}
	e := frameCase(`{"message_id":"m1","text":"x"}`, "s_1", 2, false, false)
	e.Type = protocol.EventStatus
	if checkFrame(t, e) {
		t.Error("a status event took the fast path")
	}
	e = frameCase(`{"message_id":"m1","text":"x"}`, "s_1", 2, false, true)
	if !checkFrame(t, e) {
		t.Error("terminal flag: no fast path")
	}
}

func TestAppendEventFrame_AllocatesNothingInPlace(t *testing.T) {
	e := frameCase(`{"message_id":"m1","text":"w1 "}`, "s_1", 1778750000.123456, false, false)
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { protocol.AppendEventFrame(buf[:0], &e) }); n != 0 {
		t.Fatalf("%v allocations per frame, want 0", n)
	}
}

// FuzzAppendEventFrame: the fast path writes exactly what encoding/json
// writes, or declines.
func FuzzAppendEventFrame(f *testing.F) {
	for _, s := range []string{
		`{"message_id":"m1","text":"w1 "}`, `{"text":"\u00e9<","message_id":"m"}`,
		`{"block_id":"b","text":"a\nb"}`, "{\"message_id\":\"m\",\"text\":\"\xff\u2029\"}",
	} {
		f.Add(s, "s_1", 1778750000.123456, false, false)
		f.Add(s, "s&1", 1e-9, true, true)
	}
	f.Fuzz(func(t *testing.T, payload, sid string, created float64, reasoning, terminal bool) {
		checkFrame(t, frameCase(payload, sid, created, reasoning, terminal))
	})
}

func BenchmarkAppendEventFrame(b *testing.B) {
	e := frameCase(`{"message_id":"m1","text":"w41 "}`, "s_01JABCDEF", 1778750000.123456, false, false)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = protocol.AppendEventFrame(buf[:0], &e)
	}
}
