package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// compactEvents builds a run's events from fuzz input: each byte picks the
// event's kind (token or reasoning delta of one of two messages, an extra
// payload field, another type, terminal) and text takes the next bytes.
func compactEvents(spec []byte, text string) []protocol.Envelope {
	var out []protocol.Envelope
	for i, b := range spec {
		seq := uint64(i + 1)
		e := protocol.Envelope{EventID: protocol.EventID("r1", seq), Seq: seq, RunID: "r1", SessionID: "s1", CreatedAt: float64(seq)}
		piece := ""
		if len(text) > 0 {
			n := int(b>>4) % (len(text) + 1)
			piece, text = text[:n], text[n:]
		}
		pj, _ := json.Marshal(piece)
		id := []string{"m1", "m2"}[int(b>>3)&1]
		switch b & 7 {
		case 0, 1, 2:
			e.Type = protocol.EventTokenDelta
			e.Payload = json.RawMessage(`{"message_id":"` + id + `","text":` + string(pj) + `}`)
		case 3, 4:
			e.Type = protocol.EventReasoningDelta
			e.Payload = json.RawMessage(`{"block_id":"` + id + `","text":` + string(pj) + `}`)
		case 5:
			e.Type = protocol.EventTokenDelta
			e.Payload = json.RawMessage(`{"message_id":"m1","text":` + string(pj) + `,"extra":1}`)
		case 6:
			e.Type = protocol.EventProgress
			e.Payload = json.RawMessage(`{"text":` + string(pj) + `}`)
		default:
			e.Type = protocol.EventDone
			e.Terminal = true
			e.Payload = json.RawMessage(`{"status":"completed","usage":null}`)
		}
		out = append(out, e)
	}
	return out
}

func deltaOf(t *testing.T, e *protocol.Envelope) (id, text string) {
	var p map[string]any
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", e.Payload, err)
	}
	id, _ = p["message_id"].(string)
	if b, ok := p["block_id"].(string); ok {
		id = b
	}
	text, _ = p["text"].(string)
	return id, text
}

// checkCompact asserts what every client of compact_replay relies on: the
// records cover every event once, in order; a record's seq, event_id and
// created_at are its last event's (the cursor after it is exact); a merged
// record covers deltas of one type and one message only, and its text is
// theirs concatenated; an event alone is unchanged.
func checkCompact(t *testing.T, events []protocol.Envelope) int {
	merged := 0
	for i := 0; i < len(events); {
		rec, n := protocol.CompactNext(events[i:])
		if n < 1 || i+n > len(events) {
			t.Fatalf("at %d: covers %d of %d", i, n, len(events)-i)
		}
		last := events[i+n-1]
		if rec.First() != events[i].Seq || rec.Seq != last.Seq || rec.EventID != last.EventID || rec.CreatedAt != last.CreatedAt || rec.Terminal != last.Terminal {
			t.Fatalf("at %d: record %d..%d %s, want %d..%d %s", i, rec.First(), rec.Seq, rec.EventID, events[i].Seq, last.Seq, last.EventID)
		}
		if n == 1 {
			if rec.SeqFrom != 0 || string(rec.Payload) != string(events[i].Payload) || rec.Type != events[i].Type {
				t.Fatalf("at %d: a single event changed: %+v", i, rec)
			}
		} else {
			merged++
			if rec.Type != protocol.EventTokenDelta && rec.Type != protocol.EventReasoningDelta {
				t.Fatalf("at %d: merged %s", i, rec.Type)
			}
			id, text := deltaOf(t, &rec.Envelope)
			var want strings.Builder
			for _, e := range events[i : i+n] {
				eid, etext := deltaOf(t, &e)
				if e.Type != rec.Type || eid != id || e.Terminal {
					t.Fatalf("at %d: merged %s %q with %s %q", i, rec.Type, id, e.Type, eid)
				}
				want.WriteString(etext)
			}
			if text != want.String() {
				t.Fatalf("at %d: text %q, want %q", i, text, want.String())
			}
			if len(text) > protocol.MaxCompactedText {
				t.Fatalf("at %d: %d bytes of text", i, len(text))
			}
			// On the wire: the envelope's fields plus seq_from.
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			var back protocol.Compacted
			if err := json.Unmarshal(b, &back); err != nil || back.SeqFrom != rec.SeqFrom || back.Seq != rec.Seq || !strings.Contains(string(b), `"seq_from":`) {
				t.Fatalf("round trip of %s: %+v %v", b, back, err)
			}
		}
		i += n
	}
	return merged
}

func TestCompactNext(t *testing.T) {
	if rec, n := protocol.CompactNext(nil); n != 0 || rec.Seq != 0 {
		t.Fatalf("empty: %+v %d", rec, n)
	}
	// Three tokens of m1, a progress, two of m2, a terminal.
	events := compactEvents([]byte{0x10, 0x10, 0x10, 0x16, 0x18, 0x18, 0x07}, "abcdefghijklmnop")
	if merged := checkCompact(t, events); merged != 2 {
		t.Fatalf("merged %d records, want 2", merged)
	}
	rec, n := protocol.CompactNext(events)
	if n != 3 || rec.SeqFrom != 1 || rec.Seq != 3 || rec.EventID != "r1:3" {
		t.Fatalf("first record %+v covers %d", rec, n)
	}
	// A gap in seq stops the merge.
	gap := compactEvents([]byte{0x10, 0x10}, "ab")
	gap[1].Seq = 5
	if _, n := protocol.CompactNext(gap); n != 1 {
		t.Fatalf("merged across a gap: %d", n)
	}
	// Text past MaxCompactedText makes a new record.
	big := strings.Repeat("x", protocol.MaxCompactedText/2+1)
	pj, _ := json.Marshal(big)
	long := compactEvents([]byte{0, 0, 0}, "")
	for i := range long {
		long[i].Payload = json.RawMessage(`{"message_id":"m1","text":` + string(pj) + `}`)
	}
	if _, n := protocol.CompactNext(long); n != 1 {
		t.Fatalf("merged %d events past the text bound", n)
	}
	checkCompact(t, long)
}

func FuzzCompact(f *testing.F) {
	f.Add([]byte{0x10, 0x10, 0x10, 0x16, 0x18, 0x18, 0x07}, "abcdefghijklmnop")
	f.Add([]byte{0x13, 0x13, 0x1b, 0x15, 0x10, 0x10}, "r0 r1 r2 \u00e9\u2028<x>")
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, "")
	f.Fuzz(func(t *testing.T, spec []byte, text string) {
		if len(spec) > 512 {
			spec = spec[:512]
		}
		checkCompact(t, compactEvents(spec, text))
	})
}

func TestDecodeHelloCapabilities(t *testing.T) {
	m, err := protocol.DecodeClient([]byte(`{"type":"hello","client":"c","capabilities":["compact_replay","later"]}`))
	if err != nil || len(m.Hello.Capabilities) != 2 || m.Hello.Capabilities[0] != protocol.CapCompactReplay {
		t.Fatalf("%+v %v", m.Hello, err)
	}
	many := `{"type":"hello","client":"c","capabilities":[` + strings.Repeat(`"x",`, protocol.MaxCapabilities) + `"x"]}`
	if _, err := protocol.DecodeClient([]byte(many)); err == nil || !strings.Contains(err.Error(), "capabilities") {
		t.Fatalf("17 capabilities: %v", err)
	}
	long := `{"type":"hello","client":"c","capabilities":["` + strings.Repeat("x", protocol.MaxShortBytes+1) + `"]}`
	if _, err := protocol.DecodeClient([]byte(long)); err == nil || !strings.Contains(err.Error(), "capabilities[0]") {
		t.Fatalf("long capability: %v", err)
	}
	if _, err := protocol.DecodeClient([]byte(`{"type":"hello","client":"c","capabilities":"compact_replay"}`)); err == nil {
		t.Fatal("a string for capabilities was accepted")
	}
}
