package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// The scale-out tests run the scaled deployment as real processes: one
// redis-server, hub replicas (`hub serve`, RUNHUB_RUNTIME=runners) and
// runners (`hub runner`), all re-execs of the test binary, and tabs that
// talk to the hubs over WebSockets like a browser does.

// scaled is one scaled deployment under test.
type scaled struct {
	t        *testing.T
	rs       *redistest.Server // nil on a Cluster
	url      string            // RUNHUB_REDIS_URL without parameters
	leaseTTL time.Duration
	rdb      goredis.UniversalClient // the test's own view of Redis (lease owners)
	outs     []namedOutput
}

type namedOutput struct {
	name string
	out  *syncBuffer
}

func newScaled(t *testing.T, ro redistest.Options, leaseTTL time.Duration) *scaled {
	t.Helper()
	rs := redistest.Start(t, ro)
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: rs.Socket(), ClientName: "test"})
	return newScaledOn(t, rs, rs.URL(), rdb, leaseTTL)
}

// newScaledOn is a deployment on Redis at url (rs nil on a Cluster).
func newScaledOn(t *testing.T, rs *redistest.Server, url string, rdb goredis.UniversalClient, leaseTTL time.Duration) *scaled {
	s := &scaled{t: t, rs: rs, url: url, leaseTTL: leaseTTL, rdb: rdb}
	t.Cleanup(func() {
		rdb.Close()
		// The processes' logs, when the test failed or RUNHUB_TEST_LOGS is set.
		if t.Failed() || os.Getenv("RUNHUB_TEST_LOGS") != "" {
			for _, o := range s.outs {
				t.Logf("--- %s:\n%s", o.name, o.out.String())
			}
		}
	})
	return s
}

// env is what every process of the deployment gets; name is its node id
// and its Redis client name (CLIENT LIST shows whose a connection is).
func (s *scaled) env(name string) []string {
	return []string{"RUNHUB_REDIS_URL=" + s.url + "?client_name=" + name, "RUNHUB_NODE_ID=" + name,
		"RUNHUB_LEASE_TTL=" + s.leaseTTL.String(), "RUNHUB_LOG_LEVEL=warn"}
}

// hub starts a hub replica whose runs execute in the runners.
func (s *scaled) hub(name string, env ...string) *hubProcess {
	s.t.Helper()
	e := append(s.env(name), "RUNHUB_RUNTIME=runners", "RUNHUB_STATUS_INTERVAL=20ms")
	p := startHub(s.t, s.t.TempDir(), append(e, env...)...)
	s.outs = append(s.outs, namedOutput{"hub " + name, p.out})
	return p
}

// runner starts a runner and waits until it has started.
func (s *scaled) runner(name string, env ...string) *runnerProcess {
	s.t.Helper()
	r := startRunner(s.t, append(append(s.env(name), "RUNHUB_LOG_LEVEL=info"), env...)...)
	s.outs = append(s.outs, namedOutput{"runner " + name, r.out})
	waitFor(s.t, 20*time.Second, "runner "+name+" to start", func() bool {
		return strings.Contains(r.out.String(), "runhub runner started")
	})
	return r
}

// owner returns the node holding runID's lease ("" when none does).
func (s *scaled) owner(runID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := s.rdb.Get(ctx, "rh:run:{"+runID+"}:lease").Result()
	if err != nil {
		return ""
	}
	return v
}

// runKey returns the journal key of runID's meta (suffix "") or events
// (":ev"), found by its pattern on the test server (which shard's hash
// tag it carries is the journal's business); "" when there is none.
func (s *scaled) runKey(runID, suffix string) string {
	s.t.Helper()
	keys, err := s.rdb.Keys(context.Background(), "rh:{*}:run:"+runID+suffix).Result()
	if err != nil {
		s.t.Fatalf("KEYS: %v", err)
	}
	if len(keys) > 1 {
		s.t.Fatalf("run %s%s has keys %v", runID, suffix, keys)
	}
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// waitOwner waits until some node holds runID's lease and returns it.
func (s *scaled) waitOwner(runID string) string {
	s.t.Helper()
	var o string
	waitFor(s.t, 20*time.Second, "a runner to take "+runID, func() bool {
		o = s.owner(runID)
		return o != ""
	})
	return o
}

// waitFor polls cond every 10 ms until it holds; past within the test
// fails.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tab is a browser tab: one socket and everything it has received.
type tab struct {
	t        *testing.T
	c        *client.Conn
	events   []protocol.Envelope
	status   map[string]protocol.SessionStatus // the newest per session
	replayed []protocol.Replayed
	goaway   []protocol.Goaway
	errs     []protocol.ErrorMessage
	closed   error // why the socket stopped, once it has
}

func dialTab(t *testing.T, p *hubProcess) *tab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatalf("dial %s: %v", p.addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &tab{t: t, c: c, status: map[string]protocol.SessionStatus{}}
}

// ctx is a bounded context for one call on the tab.
func (b *tab) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	b.t.Cleanup(cancel)
	return ctx
}

func (b *tab) record(m any) {
	switch m := m.(type) {
	case *protocol.EventMessage:
		b.events = append(b.events, *m.Event)
	case *protocol.StatusMessage:
		b.status[m.Session.SessionID] = *m.Session
	case *protocol.Replayed:
		b.replayed = append(b.replayed, *m)
	case *protocol.Goaway:
		b.goaway = append(b.goaway, *m)
	case *protocol.ErrorMessage:
		b.errs = append(b.errs, *m)
	}
}

// until reads messages until cond holds (checked first and after every
// message); past within, or when the socket closes first, the test fails.
func (b *tab) until(within time.Duration, what string, cond func() bool) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for !cond() {
		if b.closed != nil {
			b.t.Fatalf("tab closed (%v) while waiting for %s", b.closed, what)
		}
		m, err := b.c.Next(ctx)
		if ctx.Err() != nil {
			b.t.Fatalf("timed out after %v waiting for %s (tab got %d events)", within, what, len(b.events))
		}
		if err != nil {
			b.closed = err
			continue
		}
		b.record(m)
	}
}

// drain reads until the socket closes and returns why it did.
func (b *tab) drain(within time.Duration) error {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for b.closed == nil {
		m, err := b.c.Next(ctx)
		if ctx.Err() != nil {
			b.t.Fatalf("the tab's socket did not close within %v", within)
		}
		if err != nil {
			b.closed = err
			break
		}
		b.record(m)
	}
	return b.closed
}

// ping makes sure every message sent before it has been handled by the hub.
func (b *tab) ping() {
	b.t.Helper()
	id := fmt.Sprintf("p%d", time.Now().UnixNano())
	if err := b.c.Send(b.ctx(), protocol.Ping{Type: protocol.MsgPing, ID: id}); err != nil {
		b.t.Fatal(err)
	}
	got := false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !got {
		m, err := b.c.Next(ctx)
		if err != nil {
			b.t.Fatalf("waiting for pong: %v", err)
		}
		if p, ok := m.(*protocol.Pong); ok && p.ID == id {
			got = true
		}
		b.record(m)
	}
}

// run returns the tab's events of runID, in arrival order.
func (b *tab) run(runID string) []protocol.Envelope {
	var out []protocol.Envelope
	for _, e := range b.events {
		if e.RunID == runID {
			out = append(out, e)
		}
	}
	return out
}

func (b *tab) terminal(runID string) bool {
	ev := b.run(runID)
	return len(ev) > 0 && ev[len(ev)-1].Terminal
}

func count(events []protocol.Envelope, typ protocol.EventType) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func terminals(events []protocol.Envelope) int {
	n := 0
	for _, e := range events {
		if e.Terminal {
			n++
		}
	}
	return n
}

// contiguous fails the test unless events have the seqs from, from+1, …
// (no gap, no duplicate).
func contiguous(t testing.TB, what string, events []protocol.Envelope, from uint64) {
	t.Helper()
	for i, e := range events {
		if e.Seq != from+uint64(i) {
			t.Fatalf("%s: event %d has seq %d, want %d (gap or duplicate)", what, i, e.Seq, from+uint64(i))
		}
	}
}

// sameEvents fails the test unless got and want are the same events.
func sameEvents(t testing.TB, what string, got, want []protocol.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.EventID != w.EventID || g.Seq != w.Seq || g.Type != w.Type || g.Terminal != w.Terminal || string(g.Payload) != string(w.Payload) {
			t.Fatalf("%s: event %d is %s %s %s, want %s %s %s", what, i, g.EventID, g.Type, g.Payload, w.EventID, w.Type, w.Payload)
		}
	}
}

// runStatus is GET /v1/runs/{id} on a hub.
func runStatus(t testing.TB, p *hubProcess, runID string) protocol.RunStatus {
	t.Helper()
	var st protocol.RunStatus
	if code := call(t, "GET", p.URL()+"/v1/runs/"+runID, nil, &st); code != 200 {
		t.Fatalf("run status of %s: %d", runID, code)
	}
	return st
}

// startHTTP creates a session on p and starts a sim run in it.
func startHTTP(t testing.TB, p *hubProcess, script string) protocol.RunStartResult {
	t.Helper()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "scale"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	body := map[string]any{"message": "scale out", "metadata": map[string]any{"sim": jsonRaw(script)}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return run
}

type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// startWS starts a sim run in a new session through a tab.
func (b *tab) start(script string) protocol.ControlResult {
	b.t.Helper()
	res, err := b.c.Control(b.ctx(), protocol.Control{Op: protocol.OpStart, Message: "scale out",
		Metadata: []byte(`{"sim":` + script + `}`)})
	if err != nil || !res.Accepted {
		b.t.Fatalf("start: %+v %v", res, err)
	}
	return res
}

// waitTerminal polls a hub until runID's journal ends with its terminal
// event and returns every event.
func waitTerminal(t testing.TB, p *hubProcess, runID string, within time.Duration) []protocol.Envelope {
	t.Helper()
	var events []protocol.Envelope
	waitFor(t, within, "the terminal event of "+runID, func() bool {
		events = allEvents(t, p.URL(), runID)
		return len(events) > 0 && events[len(events)-1].Terminal
	})
	return events
}

func readyz(p *hubProcess) int {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.URL() + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkDone fails the test unless events are a whole completed sim run of
// n tokens: seqs 1…, one run.started, one terminal done, the full text.
func checkDone(t testing.TB, what string, events []protocol.Envelope, n int) {
	t.Helper()
	contiguous(t, what, events, 1)
	if s := count(events, protocol.EventRunStarted); s != 1 {
		t.Fatalf("%s: %d run.started events (executed %d times)", what, s, s)
	}
	if k := terminals(events); k != 1 || events[len(events)-1].Type != protocol.EventDone {
		t.Fatalf("%s: %d terminal events, last %s", what, k, events[len(events)-1].Type)
	}
	if got := tokenText(events); got != sim.Text(n) {
		t.Fatalf("%s: text %q, want %q", what, got, sim.Text(n))
	}
}

// cancelHTTP is POST /v1/runs/{id}/cancel on a hub.
func cancelHTTP(t testing.TB, p *hubProcess, runID string) protocol.ControlResult {
	t.Helper()
	var cr protocol.ControlResult
	call(t, "POST", p.URL()+"/v1/runs/"+runID+"/cancel", nil, &cr)
	return cr
}

// checkTerminal fails the test unless events are contiguous from 1 with
// exactly one terminal event, the last, of type typ.
func checkTerminal(t testing.TB, what string, events []protocol.Envelope, typ protocol.EventType) {
	t.Helper()
	contiguous(t, what, events, 1)
	if k, last := terminals(events), events[len(events)-1]; k != 1 || last.Type != typ {
		t.Fatalf("%s: %d terminal events, last %s %s", what, k, last.Type, last.Payload)
	}
}

// checkInterrupted fails the test unless events end with exactly one
// terminal event, an error "interrupted" carrying the seq before it.
func checkInterrupted(t testing.TB, what string, events []protocol.Envelope) {
	t.Helper()
	contiguous(t, what, events, 1)
	last := events[len(events)-1]
	ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&last)
	if k := terminals(events); k != 1 || last.Type != protocol.EventError || ep.Code != protocol.ErrorInterrupted || ep.LastSeq != last.Seq-1 {
		t.Fatalf("%s: %d terminal events, last %s %s", what, k, last.Type, last.Payload)
	}
}
