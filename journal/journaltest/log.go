package journaltest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var logTests = []subtest{
	{"ConcurrentAppendOneRun", testConcurrentAppendOneRun},
	{"ConcurrentAppendManyRuns", testConcurrentAppendManyRuns},
	{"AppendAfterTerminal", testAppendAfterTerminal},
	{"NonTerminalError", testNonTerminalError},
	{"ConcurrentTerminal", testConcurrentTerminal},
	{"IdempotentKey", testIdempotentKey},
	{"ConcurrentRetries", testConcurrentRetries},
	{"AppendUnknownRun", testAppendUnknownRun},
	{"InvalidEvent", testInvalidEvent},
	{"TooLarge", testTooLarge},
	{"AssignedFields", testAssignedFields},
}

// 50 writers on one run: seq 1..N, no gap, no duplicate, each writer's
// events in its own order.
func testConcurrentAppendOneRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	const writers, each = 50, 20
	seqs := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e, err := f.s.Append(f.ctx, tokenEvent(t, sid, rid, fmt.Sprintf("w%d-%d ", w, i)), "")
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				seqs[w] = append(seqs[w], e.Seq)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := make(map[uint64]int)
	for w, ss := range seqs {
		for i, s := range ss {
			if prev, dup := seen[s]; dup {
				t.Fatalf("seq %d returned to writer %d and writer %d", s, prev, w)
			}
			seen[s] = w
			if i > 0 && s <= ss[i-1] {
				t.Fatalf("writer %d: seq %d after %d", w, s, ss[i-1])
			}
		}
	}
	events := f.readAll(rid, 100)
	checkSeqs(t, "read back", rid, events, writers*each)
	for _, e := range events {
		var p protocol.TokenDeltaPayload
		if err := jsonUnmarshal(e.Payload, &p); err != nil {
			t.Fatalf("event %d payload: %v", e.Seq, err)
		}
		var w, i int
		if _, err := fmt.Sscanf(p.Text, "w%d-%d ", &w, &i); err != nil || seqs[w][i] != e.Seq {
			t.Fatalf("event %d holds %q, which writer %d got as seq %d", e.Seq, p.Text, w, seqs[w][i])
		}
	}
	if m := f.runMeta(rid); m.LastSeq != writers*each || m.Terminal {
		t.Fatalf("run meta: last_seq %d terminal %v, want %d false", m.LastSeq, m.Terminal, writers*each)
	}
}

// Writers on many runs at once: every run gets its own contiguous seqs.
func testConcurrentAppendManyRuns(t *testing.T, b Backend) {
	f := newFixture(t, b)
	const runs, writers, each = 10, 5, 20
	type run struct{ sid, rid string }
	rs := make([]run, runs)
	for i := range rs {
		rs[i].sid, rs[i].rid = f.run()
	}
	var wg sync.WaitGroup
	for _, r := range rs {
		for range writers {
			wg.Go(func() {
				for range each {
					if _, err := f.s.Append(f.ctx, tokenEvent(t, r.sid, r.rid, "x"), ""); err != nil {
						t.Errorf("append to %s: %v", r.rid, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, r := range rs {
		checkSeqs(t, r.rid, r.rid, f.readAll(r.rid, 1000), writers*each)
	}
}

// Exactly one terminal event; appends after it fail with ErrTerminal and
// report it; the session's active run clears.
func testAppendAfterTerminal(t *testing.T, b Backend) {
	f := newFixture(t, b)
	for kind := range terminalEvents(t, "x", "x") {
		t.Run(kind, func(t *testing.T) {
			sid, rid := f.run()
			f.appendTokens(sid, rid, 3)
			term := f.append(terminalEvents(t, sid, rid)[kind], "")
			if !term.Terminal || term.Seq != 4 {
				t.Fatalf("terminal append: terminal %v seq %d, want true 4", term.Terminal, term.Seq)
			}
			m := f.runMeta(rid)
			if !m.Terminal || m.LastSeq != 4 || m.TerminalType != term.Type || m.TerminalAt != term.CreatedAt {
				t.Fatalf("run meta after terminal: %+v, want terminal, last_seq 4, type %s, terminal_at %v", m, term.Type, term.CreatedAt)
			}
			if s := f.sessionMeta(sid); s.ActiveRun != "" {
				t.Fatalf("session active run after terminal = %q, want none", s.ActiveRun)
			}
			attempts := map[string]protocol.Envelope{"token": tokenEvent(t, sid, rid, "late")}
			for k, e := range terminalEvents(t, sid, rid) {
				attempts["second "+k] = e
			}
			for what, e := range attempts {
				got, err := f.s.Append(f.ctx, e, "")
				wantErr(t, what+" after terminal", err, journal.ErrTerminal)
				if got.Seq != term.Seq || got.Type != term.Type || !got.Terminal || got.EventID != term.EventID {
					t.Fatalf("%s after terminal returned %s seq %d, want the terminal event %s seq %d", what, got.Type, got.Seq, term.Type, term.Seq)
				}
			}
			events := f.readAll(rid, 10)
			checkSeqs(t, "after terminal", rid, events, 4)
			if !events[3].Terminal || events[0].Terminal || events[2].Terminal {
				t.Fatalf("only the last event may be terminal: %+v", events)
			}
			if m := f.runMeta(rid); m.LastSeq != 4 || m.TerminalType != term.Type {
				t.Fatalf("run meta changed by refused appends: %+v", m)
			}
		})
	}
}

// An error event with terminal false does not end the run.
func testNonTerminalError(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	e := f.append(errorEvent(t, sid, rid, false), "")
	if e.Terminal {
		t.Fatal("non-terminal error stored as terminal")
	}
	f.append(tokenEvent(t, sid, rid, "more"), "")
	if m := f.runMeta(rid); m.Terminal || m.LastSeq != 2 {
		t.Fatalf("run meta: %+v, want active with last_seq 2", m)
	}
	if s := f.sessionMeta(sid); s.ActiveRun != rid {
		t.Fatalf("session active run = %q, want %q", s.ActiveRun, rid)
	}
}

// Many concurrent terminal attempts: exactly one wins, the rest report it.
func testConcurrentTerminal(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	f.appendTokens(sid, rid, 2)
	const n = 20
	results := make([]protocol.Envelope, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := doneEvent(t, sid, rid)
			if i%2 == 1 {
				e = cancelledEvent(t, sid, rid)
			}
			results[i], errs[i] = f.s.Append(f.ctx, e, "")
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("two terminal appends succeeded: seq %d and %d", results[winner].Seq, results[i].Seq)
			}
			winner = i
		case !errors.Is(err, journal.ErrTerminal):
			t.Fatalf("terminal attempt %d: %v, want nil or ErrTerminal", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no terminal append succeeded")
	}
	w := results[winner]
	if w.Seq != 3 {
		t.Fatalf("terminal seq = %d, want 3", w.Seq)
	}
	for i, r := range results {
		if r.Seq != w.Seq || r.Type != w.Type || r.EventID != w.EventID {
			t.Fatalf("attempt %d reported %s seq %d, want the terminal %s seq %d", i, r.Type, r.Seq, w.Type, w.Seq)
		}
	}
	checkSeqs(t, "after concurrent terminals", rid, f.readAll(rid, 100), 3)
}

// An append retried with the same key returns the stored event, creates
// one row; keys are per run; a terminal append's retry succeeds.
func testIdempotentKey(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	first := f.append(tokenEvent(t, sid, rid, "hello"), "k1")
	retry := f.append(tokenEvent(t, sid, rid, "hello again"), "k1")
	if retry.Seq != first.Seq || retry.EventID != first.EventID || !jsonEqual(retry.Payload, first.Payload) || retry.CreatedAt != first.CreatedAt {
		t.Fatalf("retry with key k1 returned %+v, want the first event %+v", retry, first)
	}
	second := f.append(tokenEvent(t, sid, rid, "world"), "k2")
	if second.Seq != 2 {
		t.Fatalf("append with a new key: seq %d, want 2", second.Seq)
	}
	f.append(tokenEvent(t, sid, rid, "a"), "")
	f.append(tokenEvent(t, sid, rid, "a"), "")
	checkSeqs(t, "keyed appends", rid, f.readAll(rid, 100), 4)

	// The same key on another run is another event.
	sid2, rid2 := f.run()
	other := f.append(tokenEvent(t, sid2, rid2, "elsewhere"), "k1")
	if other.RunID != rid2 || other.Seq != 1 {
		t.Fatalf("key k1 on another run returned %s seq %d, want %s seq 1", other.RunID, other.Seq, rid2)
	}

	term := f.append(doneEvent(t, sid, rid), "kd")
	again, err := f.s.Append(f.ctx, doneEvent(t, sid, rid), "kd")
	if err != nil || again.Seq != term.Seq || !again.Terminal {
		t.Fatalf("retry of the terminal append: %+v, %v; want seq %d and no error", again, err, term.Seq)
	}
	old := f.append(tokenEvent(t, sid, rid, "ignored"), "k2")
	if old.Seq != second.Seq || !jsonEqual(old.Payload, second.Payload) {
		t.Fatalf("retry of k2 after terminal returned seq %d, want %d", old.Seq, second.Seq)
	}
	_, err = f.s.Append(f.ctx, tokenEvent(t, sid, rid, "late"), "k-new")
	wantErr(t, "new key after terminal", err, journal.ErrTerminal)
	checkSeqs(t, "after keyed terminal", rid, f.readAll(rid, 100), 5)
}

// Concurrent retries of one keyed append store it once.
func testConcurrentRetries(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	const n = 20
	got := make([]protocol.Envelope, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			got[i], err = f.s.Append(f.ctx, tokenEvent(t, sid, rid, "once"), "same-key")
			if err != nil {
				t.Errorf("retry %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, e := range got {
		if e.Seq != 1 || e.EventID != got[0].EventID {
			t.Fatalf("retry %d returned seq %d, want 1", i, e.Seq)
		}
	}
	checkSeqs(t, "concurrent retries", rid, f.readAll(rid, 100), 1)
}

func testAppendUnknownRun(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid := f.session("alice")
	_, err := f.s.Append(f.ctx, tokenEvent(t, sid, "no-such-run", "x"), "")
	wantErr(t, "append to an unknown run", err, journal.ErrNotFound)
	_, err = f.s.Append(f.ctx, tokenEvent(t, "no-such-session", "no-such-run", "x"), "k")
	wantErr(t, "append to an unknown run and session", err, journal.ErrNotFound)
}

// Invalid events are refused with a typed error and write nothing.
func testInvalidEvent(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	inconsistent := doneEvent(t, sid, rid)
	inconsistent.Terminal = false
	cases := []struct {
		name string
		e    protocol.Envelope
		code protocol.Code
	}{
		{"unknown type", rawEvent(sid, rid, "token.bogus", `{"text":"x"}`), protocol.CodeBadRequest},
		{"missing field", rawEvent(sid, rid, protocol.EventTokenDelta, `{"message_id":"m1"}`), protocol.CodeInvalidPayload},
		{"payload not an object", rawEvent(sid, rid, protocol.EventProgress, `["text"]`), protocol.CodeInvalidPayload},
		{"payload not JSON", rawEvent(sid, rid, protocol.EventProgress, `{"text":`), protocol.CodeInvalidPayload},
		{"terminal flag inconsistent", inconsistent, protocol.CodeBadRequest},
		{"bad run id", tokenEvent(t, sid, "run id with spaces", "x"), protocol.CodeBadRequest},
		{"no session id", tokenEvent(t, "", rid, "x"), protocol.CodeBadRequest},
	}
	for _, c := range cases {
		_, err := f.s.Append(f.ctx, c.e, "key-"+c.name)
		wantCode(t, c.name, err, c.code)
	}
	if m := f.runMeta(rid); m.LastSeq != 0 {
		t.Fatalf("last_seq = %d after refused appends, want 0", m.LastSeq)
	}
	if got := f.readAll(rid, 10); len(got) != 0 {
		t.Fatalf("refused appends wrote %d events", len(got))
	}
	// The keys of refused appends were not consumed.
	e := f.append(tokenEvent(t, sid, rid, "valid"), "key-missing field")
	if e.Seq != 1 {
		t.Fatalf("first valid append: seq %d, want 1", e.Seq)
	}
}

// A payload over MaxPayloadBytes is too_large and writes nothing.
func testTooLarge(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	f.appendTokens(sid, rid, 2)
	big := progressEvent(t, sid, rid, strings.Repeat("x", protocol.MaxPayloadBytes))
	_, err := f.s.Append(f.ctx, big, "")
	wantCode(t, "oversized payload", err, protocol.CodeTooLarge)
	_, err = f.s.Append(f.ctx, big, "big-key")
	wantCode(t, "oversized payload with key", err, protocol.CodeTooLarge)
	if m := f.runMeta(rid); m.LastSeq != 2 {
		t.Fatalf("last_seq = %d after a refused append, want 2", m.LastSeq)
	}
	checkSeqs(t, "after too large", rid, f.readAll(rid, 10), 2)

	// Just under the bound is stored whole.
	okText := strings.Repeat("y", protocol.MaxPayloadBytes-64)
	e := f.append(progressEvent(t, sid, rid, okText), "")
	events := f.readAll(rid, 10)
	checkSeqs(t, "after a large append", rid, events, 3)
	var p protocol.ProgressPayload
	if err := jsonUnmarshal(events[2].Payload, &p); err != nil || p.Text != okText || e.Seq != 3 {
		t.Fatalf("large payload read back with %d bytes of text (%v), want %d", len(p.Text), err, len(okText))
	}
}

// Seq and EventID are assigned; created_at is set when zero, kept when given.
func testAssignedFields(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	e := tokenEvent(t, sid, rid, "x")
	e.Seq, e.EventID = 99, "bogus:99"
	got := f.append(e, "")
	if got.Seq != 1 || got.EventID != rid+":1" || got.SessionID != sid || got.Type != protocol.EventTokenDelta {
		t.Fatalf("stored %+v, want seq 1, event_id %s:1", got, rid)
	}
	if got.CreatedAt == 0 {
		t.Fatal("created_at not set on an event without one")
	}
	const given = 1764460800.123456
	e = tokenEvent(t, sid, rid, "y")
	e.CreatedAt = given
	if got := f.append(e, ""); got.CreatedAt != given {
		t.Fatalf("created_at = %v, want the given %v", got.CreatedAt, given)
	}
	events := f.readAll(rid, 10)
	if events[0].CreatedAt == 0 || events[1].CreatedAt != given {
		t.Fatalf("created_at read back: %v, %v; want set, %v", events[0].CreatedAt, events[1].CreatedAt, given)
	}
}
