package journaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Backend opens the stores a conformance run uses.
type Backend struct {
	// Open returns a fresh, empty store. It should register a t.Cleanup that
	// closes the store; that cleanup must accept a store the suite already
	// closed (Close returning nil or ErrClosed).
	Open func(t testing.TB) journal.Store
	// Reopen closes s and opens the same underlying data again (durability
	// check). The returned store is closed by the cleanup Reopen registers.
	Reopen func(t testing.TB, s journal.Store) journal.Store
}

// waitTimeout bounds every wait for asynchronous delivery.
const waitTimeout = 10 * time.Second

// Run runs every conformance subtest against b.
func Run(t *testing.T, b Backend) {
	if b.Open == nil || b.Reopen == nil {
		t.Fatal("journaltest: Backend needs Open and Reopen")
	}
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"Log", logTests},
		{"Read", readTests},
		{"Registry", registryTests},
		{"Trim", trimTests},
		{"Bus", busTests},
		{"Redaction", redactionTests},
		{"Durability", durabilityTests},
		{"UpdateSession", updateTests},
		{"DeleteSession", deleteTests},
		{"Queues", queueTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					st.fn(t, b)
				})
			}
		})
	}
}

// subtest is one named conformance check.
type subtest struct {
	name string
	fn   func(t *testing.T, b Backend)
}

// fixture is a store under test plus helpers that fail the test on error.
type fixture struct {
	t   testing.TB
	s   journal.Store
	ctx context.Context
	ids atomic.Int64
}

func newFixture(t testing.TB, b Backend) *fixture {
	return &fixture{t: t, s: b.Open(t), ctx: context.Background()}
}

// id returns a new identifier with the given prefix, unique in the fixture.
func (f *fixture) id(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, f.ids.Add(1))
}

// session creates a session of owner and returns its id.
func (f *fixture) session(owner string) string {
	f.t.Helper()
	id := f.id("sess")
	if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: id, Owner: owner, Title: "title of " + id}); err != nil {
		f.t.Fatalf("CreateSession(%s): %v", id, err)
	}
	return id
}

// begin begins a new run in session sid and returns its id.
func (f *fixture) begin(sid string) string {
	f.t.Helper()
	id := f.id("run")
	if err := f.s.BeginRun(f.ctx, journal.RunMeta{ID: id, SessionID: sid}); err != nil {
		f.t.Fatalf("BeginRun(%s in %s): %v", id, sid, err)
	}
	return id
}

// run creates a session of owner "alice" with one active run and returns
// (session id, run id).
func (f *fixture) run() (string, string) {
	f.t.Helper()
	sid := f.session("alice")
	return sid, f.begin(sid)
}

// append journals e with key and fails the test on error.
func (f *fixture) append(e protocol.Envelope, key string) protocol.Envelope {
	f.t.Helper()
	got, err := f.s.Append(f.ctx, e, key)
	if err != nil {
		f.t.Fatalf("Append(%s %s key %q): %v", e.RunID, e.Type, key, err)
	}
	return got
}

// appendTokens appends n token.delta events to the run.
func (f *fixture) appendTokens(sid, rid string, n int) []protocol.Envelope {
	f.t.Helper()
	out := make([]protocol.Envelope, 0, n)
	for i := range n {
		out = append(out, f.append(tokenEvent(f.t, sid, rid, fmt.Sprintf("tok%d ", i)), ""))
	}
	return out
}

// readAll reads every event of the run in pages of limit.
func (f *fixture) readAll(rid string, limit int) []protocol.Envelope {
	f.t.Helper()
	var out []protocol.Envelope
	var after uint64
	for {
		page, err := f.s.Read(f.ctx, rid, after, limit)
		if err != nil {
			f.t.Fatalf("Read(%s, %d, %d): %v", rid, after, limit, err)
		}
		if len(page) > limit {
			f.t.Fatalf("Read(%s, %d, %d) returned %d events", rid, after, limit, len(page))
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// runMeta returns the run's meta and fails the test on error.
func (f *fixture) runMeta(rid string) journal.RunMeta {
	f.t.Helper()
	m, err := f.s.Run(f.ctx, rid)
	if err != nil {
		f.t.Fatalf("Run(%s): %v", rid, err)
	}
	return m
}

// sessionMeta returns the session's meta and fails the test on error.
func (f *fixture) sessionMeta(sid string) journal.SessionMeta {
	f.t.Helper()
	m, err := f.s.Session(f.ctx, sid)
	if err != nil {
		f.t.Fatalf("Session(%s): %v", sid, err)
	}
	return m
}

// checkSeqs fails unless events are exactly seq 1..n of run rid, in order,
// with event ids rid:seq.
func checkSeqs(t testing.TB, what, rid string, events []protocol.Envelope, n int) {
	t.Helper()
	if len(events) != n {
		t.Fatalf("%s: got %d events, want %d", what, len(events), n)
	}
	for i, e := range events {
		want := uint64(i + 1)
		if e.Seq != want {
			t.Fatalf("%s: event %d has seq %d, want %d (gap or duplicate)", what, i, e.Seq, want)
		}
		if e.RunID != rid {
			t.Fatalf("%s: event %d has run %q, want %q", what, i, e.RunID, rid)
		}
		if id := fmt.Sprintf("%s:%d", rid, want); e.EventID != id {
			t.Fatalf("%s: event %d has event_id %q, want %q", what, i, e.EventID, id)
		}
	}
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// wantCode fails unless err is a *protocol.Error with the code.
func wantCode(t testing.TB, what string, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: err = %v (%T), want a *protocol.Error with code %s", what, err, err, code)
	}
	if pe.Code != code {
		t.Fatalf("%s: code = %s (%v), want %s", what, pe.Code, err, code)
	}
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// collector gathers what a subscription delivers: events, and apart from
// them the feed's session change records (journal.SessionChanged).
type collector struct {
	mu      sync.Mutex
	events  []protocol.Envelope
	changes []protocol.Envelope
}

func (c *collector) add(e protocol.Envelope) {
	c.mu.Lock()
	if e.Type == journal.SessionChanged {
		c.changes = append(c.changes, e)
	} else {
		c.events = append(c.events, e)
	}
	c.mu.Unlock()
}

// changed counts the session change records for sid.
func (c *collector) changed(sid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.changes {
		if e.SessionID == sid {
			n++
		}
	}
	return n
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func (c *collector) snapshot() []protocol.Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]protocol.Envelope(nil), c.events...)
}

// byRun splits events by run, keeping their order.
func byRun(events []protocol.Envelope) map[string][]protocol.Envelope {
	m := make(map[string][]protocol.Envelope)
	for _, e := range events {
		m[e.RunID] = append(m[e.RunID], e)
	}
	return m
}

// journalRun is the meta of a run to begin.
func journalRun(rid, sid string) journal.RunMeta {
	return journal.RunMeta{ID: rid, SessionID: sid}
}
