package main

import (
	"encoding/json"
	"testing"

	"github.com/runhub/runhub/protocol"
)

func TestClassifyEvent(t *testing.T) {
	e := protocol.Envelope{EventID: "r_1:42", Seq: 42, RunID: "r_1", SessionID: "s_1", Type: "token.delta",
		CreatedAt: 1778750000.123456, Payload: json.RawMessage(`{"message_id":"m1","text":"\"seq\":7 \"run_id\":\"x\""}`)}
	line, err := protocol.EncodeEvent(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	var ev eventHead
	var o other
	if k := classify(line, &ev, &o); k != kindEvent {
		t.Fatalf("kind %v", k)
	}
	want := eventHead{RunID: "r_1", SessionID: "s_1", Seq: 42, CreatedUS: 1778750000123456}
	if ev != want {
		t.Fatalf("got %+v want %+v", ev, want)
	}
	e.Terminal = true
	line, _ = protocol.EncodeEvent(nil, &e)
	if classify(line, &ev, &o) != kindEvent || !ev.Terminal {
		t.Fatalf("terminal: %+v", ev)
	}
	// Reordered fields still parse (slow path).
	ev = eventHead{}
	if k := classify([]byte(`{"event":{"payload":{},"terminal":false,"created_at":1.5,"seq":3,"run_id":"r_2","session_id":"s_2"},"type":"event"}`), &ev, &o); k != kindEvent ||
		ev.Seq != 3 || ev.RunID != "r_2" || ev.CreatedUS != 1_500_000 {
		t.Fatalf("slow path: %v %+v", k, ev)
	}
	for line, want := range map[string]msgKind{
		`{"type":"status","session":{"session_id":"s_1"}}`:                kindStatus,
		`{"type":"replayed","session_id":"s_1","cursor":"","count":0}`:    kindReplayed,
		`{"type":"error","code":"not_found","message":"x","ref":"focus"}`: kindError,
		`{"type":"pong","id":"p","time":1}`:                               kindOther,
		`garbage`:                                                         kindOther,
	} {
		if k := classify([]byte(line), &ev, &o); k != want {
			t.Errorf("%s: kind %v want %v", line, k, want)
		}
	}
}

func TestParseMicros(t *testing.T) {
	for in, want := range map[string]int64{"1778750000.123456": 1778750000123456, "1778750000.1": 1778750000100000,
		"1778750000": 1778750000000000, "1.5e3": 1500000000, "1778750000.1234567": 1778750000123456} {
		if got, ok := parseMicros([]byte(in)); !ok || got != want {
			t.Errorf("%s: %d %v", in, got, ok)
		}
	}
}

func TestSeqCheck(t *testing.T) {
	ev := func(run string, seq uint64, term bool) *eventHead {
		return &eventHead{RunID: run, Seq: seq, Terminal: term}
	}
	s := newSeqCheck()
	s.refocus("", 0)
	for i := uint64(1); i <= 5; i++ {
		s.event(ev("a", i, i == 5))
	}
	s.event(ev("b", 1, false))
	s.event(ev("b", 2, false))
	if s.dups != 0 || s.gaps != 0 {
		t.Fatalf("clean stream: dups %d gaps %d", s.dups, s.gaps)
	}
	// A refocus replays b from 1: reseen, not duplicates.
	s.refocus("", 0)
	s.event(ev("b", 1, false))
	s.event(ev("b", 2, false))
	s.event(ev("b", 3, false))
	if s.dups != 0 || s.gaps != 0 || s.reseen != 2 {
		t.Fatalf("seam: dups %d gaps %d reseen %d", s.dups, s.gaps, s.reseen)
	}
	s.event(ev("b", 3, false)) // true duplicate
	s.event(ev("b", 6, false)) // gap of 2
	if s.dups != 1 || s.gaps != 2 {
		t.Fatalf("dups %d gaps %d", s.dups, s.gaps)
	}
	s.event(ev("c", 1, false)) // b never ended
	if s.gaps != 3 {
		t.Fatalf("unterminated run not a gap: %d", s.gaps)
	}
	// A cursor focus starts after the cursor.
	s.refocus("c", 1)
	s.event(ev("c", 2, false))
	if s.gaps != 3 || s.dups != 1 {
		t.Fatalf("cursor: dups %d gaps %d", s.dups, s.gaps)
	}
	s.refocus("", 0)
	s.event(ev("c", 2, false)) // must start at 1
	if s.gaps != 4 {
		t.Fatalf("late start not a gap: %d", s.gaps)
	}
}

// A compacted record (compact_replay) is read with its seq_from, which
// the hub writes after the payload, and stands for every event it covers.
func TestClassifyCompacted(t *testing.T) {
	rec := struct {
		Type  string              `json:"type"`
		Event *protocol.Compacted `json:"event"`
	}{"event", &protocol.Compacted{Envelope: protocol.Envelope{EventID: "r_1:258", Seq: 258, RunID: "r_1", SessionID: "s_1",
		Type: "token.delta", CreatedAt: 1778750004.5, Payload: json.RawMessage(`{"message_id":"m1","text":"a \"seq_from\":9}}"}`)}, SeqFrom: 3}}
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var ev eventHead
	var o other
	if k := classify(line, &ev, &o); k != kindEvent || ev.Seq != 258 || ev.SeqFrom != 3 || ev.covered() != 256 {
		t.Fatalf("compacted: %v %+v (%s)", k, ev, line)
	}
	rec.Event.SeqFrom = 0
	line, _ = json.Marshal(rec)
	if k := classify(line, &ev, &o); k != kindEvent || ev.SeqFrom != 0 || ev.covered() != 1 {
		t.Fatalf("one event: %v %+v (%s)", k, ev, line)
	}

	s := newSeqCheck()
	s.refocus("", 0)
	s.event(&eventHead{RunID: "a", Seq: 1})
	s.event(&eventHead{RunID: "a", SeqFrom: 2, Seq: 10})
	s.event(&eventHead{RunID: "a", Seq: 11})
	if s.dups != 0 || s.gaps != 0 {
		t.Fatalf("records in order: dups %d gaps %d", s.dups, s.gaps)
	}
	s.event(&eventHead{RunID: "a", SeqFrom: 11, Seq: 12}) // overlaps 11: refused whole
	s.event(&eventHead{RunID: "a", SeqFrom: 15, Seq: 20}) // 12, 13, 14 missing
	if s.dups != 1 || s.gaps != 3 {
		t.Fatalf("overlap and gap: dups %d gaps %d", s.dups, s.gaps)
	}
}
