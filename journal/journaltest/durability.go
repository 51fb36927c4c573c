package journaltest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

var durabilityTests = []subtest{
	{"Reopen", testReopen},
	{"Closed", testClosed},
	{"NoGoroutineLeak", testNoGoroutineLeak},
}

// snapshot is everything a store holds about some sessions.
type snapshot struct {
	sessions map[string]journal.SessionMeta
	owners   map[string][]journal.SessionMeta
	runs     map[string]journal.RunMeta
	events   map[string][]protocol.Envelope
	active   []string
}

func takeSnapshot(f *fixture, owners []string) snapshot {
	f.t.Helper()
	s := snapshot{sessions: map[string]journal.SessionMeta{}, owners: map[string][]journal.SessionMeta{},
		runs: map[string]journal.RunMeta{}, events: map[string][]protocol.Envelope{}}
	for _, o := range owners {
		list, err := f.s.Sessions(f.ctx, o)
		if err != nil {
			f.t.Fatalf("Sessions(%s): %v", o, err)
		}
		s.owners[o] = list
		for _, sm := range list {
			s.sessions[sm.ID] = sm
			for _, rid := range sm.Runs {
				s.runs[rid] = f.runMeta(rid)
				s.events[rid] = f.readAll(rid, 3)
			}
		}
	}
	active, err := f.s.ActiveRuns(f.ctx)
	if err != nil {
		f.t.Fatalf("ActiveRuns: %v", err)
	}
	for _, m := range active {
		s.active = append(s.active, m.ID)
	}
	sort.Strings(s.active)
	return s
}

// Closing and reopening keeps sessions, runs, meta, events, keys, the
// active run and the terminal state.
func testReopen(t *testing.T, b Backend) {
	f := newFixture(t, b)
	// alice: a finished run then an active one; bob: a run that failed.
	sa := f.session("alice")
	r1 := f.begin(sa)
	f.appendTokens(sa, r1, 5)
	term := f.append(doneEvent(t, sa, r1), "")
	r2 := f.begin(sa)
	f.appendTokens(sa, r2, 4)
	keyed := f.append(progressEvent(t, sa, r2, "keyed"), "k1")
	sb := f.session("bob")
	r3 := f.begin(sb)
	f.append(errorEvent(t, sb, r3, true), "")
	f.session("alice") // a session without runs
	owners := []string{"alice", "bob"}
	before := takeSnapshot(f, owners)

	f.s = b.Reopen(t, f.s)
	after := takeSnapshot(f, owners)
	if !reflect.DeepEqual(normalize(before), normalize(after)) {
		t.Fatalf("store changed across reopen:\nbefore %+v\nafter  %+v", before, after)
	}
	if !slices.Equal(after.active, []string{r2}) || after.sessions[sa].ActiveRun != r2 {
		t.Fatalf("after reopen: active runs %v, session active %q; want [%s]", after.active, after.sessions[sa].ActiveRun, r2)
	}

	// The reopened store continues where the old one stopped.
	got, err := f.s.Append(f.ctx, tokenEvent(t, sa, r1, "late"), "")
	wantErr(t, "append to a terminal run after reopen", err, journal.ErrTerminal)
	if got.Seq != term.Seq {
		t.Fatalf("terminal event after reopen: seq %d, want %d", got.Seq, term.Seq)
	}
	retry := f.append(progressEvent(t, sa, r2, "keyed"), "k1")
	if retry.Seq != keyed.Seq {
		t.Fatalf("keyed retry after reopen: seq %d, want %d", retry.Seq, keyed.Seq)
	}
	next := f.append(tokenEvent(t, sa, r2, "next"), "")
	if next.Seq != keyed.Seq+1 {
		t.Fatalf("append after reopen: seq %d, want %d", next.Seq, keyed.Seq+1)
	}
	err = f.s.BeginRun(f.ctx, journal.RunMeta{ID: f.id("run"), SessionID: sa})
	wantErr(t, "BeginRun while r2 is active after reopen", err, journal.ErrConflict)
	f.append(doneEvent(t, sa, r2), "")
	f.begin(sa)
	if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: sb, Owner: "bob"}); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("CreateSession of an existing id after reopen: %v, want ErrExists", err)
	}

	// A second reopen keeps what the reopened store wrote.
	before = takeSnapshot(f, owners)
	f.s = b.Reopen(t, f.s)
	if after := takeSnapshot(f, owners); !reflect.DeepEqual(normalize(before), normalize(after)) {
		t.Fatalf("store changed across the second reopen:\nbefore %+v\nafter  %+v", before, after)
	}
}

// normalize makes empty and nil slices compare equal and payloads compare
// by text.
func normalize(s snapshot) string {
	out := fmt.Sprintf("active %v\n", s.active)
	keys := func(m any) []string {
		var ks []string
		for _, k := range reflect.ValueOf(m).MapKeys() {
			ks = append(ks, k.String())
		}
		sort.Strings(ks)
		return ks
	}
	for _, k := range keys(s.sessions) {
		m := s.sessions[k]
		out += fmt.Sprintf("session %s %s %q %v runs %v active %q\n", m.ID, m.Owner, m.Title, m.CreatedAt, m.Runs, m.ActiveRun)
	}
	for _, k := range keys(s.owners) {
		var ids []string
		for _, m := range s.owners[k] {
			ids = append(ids, m.ID)
		}
		out += fmt.Sprintf("owner %s %v\n", k, ids)
	}
	for _, k := range keys(s.runs) {
		m := s.runs[k]
		out += fmt.Sprintf("run %s %s %s %v %s %d %v %s %v\n", m.ID, m.SessionID, m.Owner, m.CreatedAt, m.Request,
			m.LastSeq, m.Terminal, m.TerminalType, m.TerminalAt)
	}
	for _, k := range keys(s.events) {
		for _, e := range s.events[k] {
			out += fmt.Sprintf("event %s %d %s %s %v %v %s\n", e.EventID, e.Seq, e.SessionID, e.Type, e.CreatedAt, e.Terminal, e.Payload)
		}
	}
	return out
}

// After Close every method fails with ErrClosed and no callback runs.
func testClosed(t *testing.T, b Backend) {
	f := newFixture(t, b)
	sid, rid := f.run()
	f.appendTokens(sid, rid, 2)
	var c collector
	f.s.SubscribeRun(rid, c.add)
	if err := f.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := f.s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("second Close: %v, want nil or ErrClosed", err)
	}
	_, err := f.s.Append(f.ctx, tokenEvent(t, sid, rid, "x"), "")
	wantErr(t, "Append after Close", err, journal.ErrClosed)
	_, err = f.s.Read(f.ctx, rid, 0, 10)
	wantErr(t, "Read after Close", err, journal.ErrClosed)
	_, err = f.s.Run(f.ctx, rid)
	wantErr(t, "Run after Close", err, journal.ErrClosed)
	wantErr(t, "CreateSession after Close", f.s.CreateSession(f.ctx, journal.SessionMeta{ID: "x", Owner: "o"}), journal.ErrClosed)
	_, err = f.s.Session(f.ctx, sid)
	wantErr(t, "Session after Close", err, journal.ErrClosed)
	_, err = f.s.Sessions(f.ctx, "alice")
	wantErr(t, "Sessions after Close", err, journal.ErrClosed)
	wantErr(t, "BeginRun after Close", f.s.BeginRun(f.ctx, journal.RunMeta{ID: "y", SessionID: sid}), journal.ErrClosed)
	_, err = f.s.ActiveRuns(f.ctx)
	wantErr(t, "ActiveRuns after Close", err, journal.ErrClosed)
	_, err = f.s.Trim(f.ctx, time.Now())
	wantErr(t, "Trim after Close", err, journal.ErrClosed)
	cancel := f.s.SubscribeFeed(c.add)
	cancel()
	if c.len() != 0 {
		t.Fatalf("subscriber received %d events it subscribed to after they were appended", c.len())
	}
}

// A store's goroutines end with Close, subscriptions and all.
func testNoGoroutineLeak(t *testing.T, b Backend) {
	ignore := goleak.IgnoreCurrent()
	f := newFixture(t, b)
	sid, rid := f.run()
	var c collector
	f.s.SubscribeRun(rid, c.add) // left subscribed: Close ends it
	cancel := f.s.SubscribeFeed(c.add)
	f.appendTokens(sid, rid, 20)
	f.append(doneEvent(t, sid, rid), "")
	waitFor(t, "delivery", func() bool { return c.len() == 42 })
	cancel()
	if err := f.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}
