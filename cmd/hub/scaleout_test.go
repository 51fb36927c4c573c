package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub/auth"
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

// sigterm sends SIGTERM to cmd's process and returns a func that waits
// for it to exit (SIGKILL past within) and returns its exit error.
func sigterm(cmd *exec.Cmd) func(within time.Duration) error {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func(within time.Duration) error {
		select {
		case err := <-done:
			return err
		case <-time.After(within):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			return fmt.Errorf("no exit within %v of SIGTERM", within)
		}
	}
}

func (r *runnerProcess) term(within time.Duration) error { return sigterm(r.cmd)(within) }

func (p *hubProcess) term(within time.Duration) error { return sigterm(p.cmd)(within) }

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

// The contract's Execution-Survives-WebUI-Restart gate, automated:
//
//  1. start a long-running run from a tab on hub A;
//  2. restart only the hub (SIGKILL A);
//  3. the run keeps executing outside it (in the runner);
//  4. reload: a tab on hub B rediscovers the active run;
//  5. it catches up from its cursor;
//  6. with no duplicate and no gap across both hubs' deliveries;
//  7. cancel through B works: exactly one terminal, cancelled, partial.
func TestScaleOut_ExecutionSurvivesHubRestart(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB")
	s.runner("r1")

	// 1.
	ta := dialTab(t, a)
	res := ta.start(`{"tokens":100000,"token_ms":5,"tools":0}`)
	runID, sid := res.RunID, res.SessionID
	ta.c.Focus(ta.ctx(), sid, "")
	ta.until(20*time.Second, "20 tokens through hub A", func() bool { return count(ta.run(runID), protocol.EventTokenDelta) >= 20 })

	// 2.
	a.kill()
	ta.drain(10 * time.Second)
	seenA := ta.run(runID)
	contiguous(t, "tab on hub A", seenA, 1)
	cursor, lastA := seenA[len(seenA)-1].EventID, seenA[len(seenA)-1].Seq

	// 3. The journal grows with no tab connected and hub A gone.
	waitFor(t, 20*time.Second, "the run to go on after hub A died", func() bool {
		return runStatus(t, b, runID).LastSeq >= lastA+20
	})
	if st := runStatus(t, b, runID); st.Terminal || st.Status != protocol.StatusRunning {
		t.Fatalf("after hub A died the run is %+v, want running", st)
	}

	// 4. Reload: the tab comes back on hub B and finds the run active.
	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), true)
	tb.until(10*time.Second, "the active run's status on hub B", func() bool {
		ss, ok := tb.status[sid]
		return ok && ss.RunID == runID && ss.Status == protocol.StatusRunning && !ss.Terminal
	})

	// 5. and 6.
	tb.c.Focus(tb.ctx(), sid, cursor)
	tb.until(20*time.Second, "catch-up and live tokens on hub B", func() bool {
		ev := tb.run(runID)
		return len(tb.replayed) > 0 && len(ev) > 0 && ev[len(ev)-1].Seq >= lastA+60
	})
	seenB := tb.run(runID)
	if len(tb.errs) > 0 {
		t.Fatalf("focus with cursor %s: %+v", cursor, tb.errs)
	}
	contiguous(t, "tab on hub B", seenB, lastA+1)
	if r := tb.replayed[0]; r.SessionID != sid || r.Count < 1 {
		t.Fatalf("replayed %+v", r)
	}

	// 7.
	cr, err := tb.c.Control(tb.ctx(), protocol.Control{Op: protocol.OpCancel, RunID: runID})
	if err != nil || cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel through hub B: %+v %v", cr, err)
	}
	tb.until(20*time.Second, "the terminal event on hub B", func() bool { return tb.terminal(runID) })
	seen := append(append([]protocol.Envelope{}, seenA...), tb.run(runID)...)
	contiguous(t, "tabs on A then B", seen, 1)
	last := seen[len(seen)-1]
	cp, _ := protocol.DecodePayload[protocol.CancelledPayload](&last)
	if terminals(seen) != 1 || last.Type != protocol.EventCancelled || !cp.Partial {
		t.Fatalf("%d terminal events, last %s %s", terminals(seen), last.Type, last.Payload)
	}
	if got, n := tokenText(seen), count(seen, protocol.EventTokenDelta); got != sim.Text(n) {
		t.Fatalf("the transcript across both hubs is not the run's text: %q", got)
	}
	sameEvents(t, "what the tabs got vs. the journal", seen, allEvents(t, b.URL(), runID))
	var ss protocol.SessionStatus
	call(t, "GET", b.URL()+"/v1/sessions/"+sid, nil, &ss)
	if ss.Status != protocol.StatusCancelled || !ss.Terminal {
		t.Fatalf("session status after cancel: %+v", ss)
	}
	again, err := tb.c.Control(tb.ctx(), protocol.Control{Op: protocol.OpCancel, RunID: runID})
	if err != nil || again.Status != protocol.ResultNotActive {
		t.Fatalf("second cancel: %+v %v", again, err)
	}
}

// A tab on replica B watching all sessions gets the status of a run started
// through replica A at once and, focused, its tokens live; with two runners
// sharing the work, every run executes exactly once and both take runs.
func TestScaleOut_CrossReplicaStatusAndFocus(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB")
	// At most 4 runs each: 8 runs at once must use both runners.
	s.runner("r1", "RUNHUB_MAX_RUNS=4")
	s.runner("r2", "RUNHUB_MAX_RUNS=4")

	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), true)
	tb.ping()
	ta := dialTab(t, a)
	res := ta.start(`{"tokens":200,"token_ms":10,"tools":0}`)
	tb.until(10*time.Second, "hub B's status of the run started on hub A", func() bool {
		ss, ok := tb.status[res.SessionID]
		return ok && ss.RunID == res.RunID
	})
	if ss := tb.status[res.SessionID]; ss.Terminal {
		t.Fatalf("the first status on hub B came after the run ended: %+v", ss)
	}
	tb.c.Focus(tb.ctx(), res.SessionID, "")
	tb.until(20*time.Second, "the run's events on hub B", func() bool { return tb.terminal(res.RunID) })
	got := tb.run(res.RunID)
	checkDone(t, "tab on hub B", got, 200)
	if len(tb.replayed) != 1 || tb.replayed[0].Count >= len(got) {
		t.Fatalf("replayed %+v of %d events: nothing came live", tb.replayed, len(got))
	}
	if ss := tb.status[res.SessionID]; !ss.Terminal {
		// statuses are coalesced; the final one follows the terminal event
		tb.until(10*time.Second, "the final status on hub B", func() bool { return tb.status[res.SessionID].Terminal })
	}

	// N runs through both hubs, two runners.
	const n = 8
	runs := make([]protocol.RunStartResult, n)
	for i := range runs {
		p := a
		if i%2 == 1 {
			p = b
		}
		runs[i] = startHTTP(t, p, `{"tokens":50,"token_ms":20,"tools":0}`)
	}
	owners := map[string]string{}
	used := map[string]int{}
	waitFor(t, 30*time.Second, "every run to have had an owner", func() bool {
		for _, r := range runs {
			if owners[r.RunID] == "" {
				if o := s.owner(r.RunID); o != "" {
					owners[r.RunID] = o
					used[o]++
				}
			}
		}
		return len(owners) == n
	})
	for i, r := range runs {
		p := a
		if i%2 == 0 {
			p = b // read through the other replica
		}
		checkDone(t, "run "+r.RunID, waitTerminal(t, p, r.RunID, 30*time.Second), 50)
	}
	if used["r1"] == 0 || used["r2"] == 0 {
		t.Fatalf("runs per runner %v: want both runners used", used)
	}
	tb.until(10*time.Second, "hub B's final status of every run", func() bool {
		for _, r := range runs {
			if ss := tb.status[r.SessionID]; ss.RunID != r.RunID || ss.Status != protocol.StatusCompleted {
				return false
			}
		}
		return true
	})
	t.Logf("runs per runner: %v", used)
}

// What changes a session without an event reaches a tab on the other
// replica at once: a session created through hub A, a run started through
// A that no runner has taken yet (queued, no event journaled), a message
// queued behind it and a goal set on an idle session. Then a runner comes
// and the run completes, also seen on B.
func TestScaleOut_ChangesWithoutEventsReachOtherReplicas(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB") // no runner yet: runs stay queued
	tb := dialTab(t, b)
	tb.c.Watch(tb.ctx(), true)
	tb.ping()

	var sess protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "made on A"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	tb.until(10*time.Second, "hub B's status of the session created on hub A", func() bool {
		ss, ok := tb.status[sess.SessionID]
		return ok && ss.Title == "made on A"
	})

	var run protocol.RunStartResult
	body := map[string]any{"message": "wait for a runner", "metadata": map[string]any{"sim": jsonRaw(`{"tokens":20,"token_ms":5,"tools":0}`)}}
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	tb.until(10*time.Second, "hub B's status of the queued run", func() bool {
		ss := tb.status[sess.SessionID]
		return ss.RunID == run.RunID && ss.Status == protocol.StatusQueued
	})
	if s.runKey(run.RunID, "") == "" {
		t.Fatalf("the queued run %s has no meta in Redis", run.RunID)
	}
	if k := s.runKey(run.RunID, ":ev"); k != "" {
		n, _ := s.rdb.XLen(context.Background(), k).Result()
		t.Fatalf("the queued run has %d journaled events, want none (the status must not have come from an event)", n)
	}

	var qres protocol.ControlResult
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+sess.SessionID+"/queue", map[string]string{"message": "then this"}, &qres); code != 200 || !qres.Accepted {
		t.Fatalf("queue: %d %+v", code, qres)
	}
	tb.until(10*time.Second, "hub B's queue depth", func() bool { return tb.status[sess.SessionID].QueueDepth == 1 })

	var idle protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "idle"}, &idle); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var gres protocol.ControlResult
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+idle.SessionID+"/goal",
		map[string]string{"action": "set", "text": "ship the release"}, &gres); code != 200 || !gres.Accepted {
		t.Fatalf("goal: %d %+v", code, gres)
	}
	tb.until(10*time.Second, "hub B's status of the goal set on hub A", func() bool {
		g := tb.status[idle.SessionID].Goal
		return g != nil && g.Text == "ship the release"
	})

	s.runner("r1")
	tb.until(30*time.Second, "hub B's status of the queued message's run completed", func() bool {
		ss := tb.status[sess.SessionID]
		return ss.RunID != "" && ss.RunID != run.RunID && ss.Status == protocol.StatusCompleted && ss.QueueDepth == 0
	})
	checkDone(t, "the first run", waitTerminal(t, b, run.RunID, 10*time.Second), 20)
	// Runs of queued messages executed by a runner begin run.started,
	// queue.updated (the queue left), as in-process ones do: the one the
	// runner started after the first run, and one a message on an idle
	// session started through hub A (dispatched to the runner).
	var fresh protocol.CreateSessionResult
	if code := call(t, "POST", a.URL()+"/v1/sessions", map[string]string{"title": "fresh"}, &fresh); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var started protocol.ControlResult
	if code := call(t, "POST", a.URL()+"/v1/sessions/"+fresh.SessionID+"/queue", map[string]string{"message": "go at once"}, &started); code != 200 || started.RunID == "" {
		t.Fatalf("queue on an idle session: %d %+v", code, started)
	}
	for _, rid := range []string{tb.status[sess.SessionID].RunID, started.RunID} {
		evs := waitTerminal(t, b, rid, 20*time.Second)
		if len(evs) < 2 || evs[0].Type != protocol.EventRunStarted || evs[1].Type != protocol.EventQueueUpdated {
			var types []protocol.EventType
			for _, e := range evs[:min(len(evs), 2)] {
				types = append(types, e.Type)
			}
			t.Fatalf("run %s of a queued message begins %v, want run.started, queue.updated", rid, types)
		}
		var q protocol.QueueUpdatedPayload
		if err := json.Unmarshal(evs[1].Payload, &q); err != nil || q.Depth != 0 {
			t.Fatalf("queue.updated %s: %v", evs[1].Payload, err)
		}
	}
}

// SIGKILL the runner executing a run: its lease lapses and the run ends
// with exactly one terminal error "interrupted" within a few lease TTLs,
// while two hubs and the other runner all reap; the other runner keeps
// serving new runs, and a run slower than the lease TTL between events is
// not interrupted.
func TestScaleOut_RunnerKilledInterruptsOnce(t *testing.T) {
	ttl := time.Second
	s := newScaled(t, redistest.Options{}, ttl)
	a, b := s.hub("hubA"), s.hub("hubB")
	procs := map[string]*runnerProcess{"r1": s.runner("r1"), "r2": s.runner("r2")}

	run := startHTTP(t, a, `{"tokens":100000,"token_ms":5,"tools":0}`)
	tb := dialTab(t, b)
	tb.c.Focus(tb.ctx(), run.SessionID, "")
	owner := s.waitOwner(run.RunID)
	tb.until(20*time.Second, "10 tokens", func() bool { return count(tb.run(run.RunID), protocol.EventTokenDelta) >= 10 })
	survivor := "r1"
	if owner == "r1" {
		survivor = "r2"
	}
	// A message queued behind the run: it must go on once the run is
	// reaped, as it does when a run ends.
	var qr protocol.ControlResult
	if code := call(t, "POST", b.URL()+"/v1/sessions/"+run.SessionID+"/queue", map[string]string{"message": "after"}, &qr); code != 200 || !qr.Accepted {
		t.Fatalf("queue: %d %+v", code, qr)
	}
	procs[owner].kill()
	killed := time.Now()
	var events []protocol.Envelope
	waitFor(t, 20*time.Second, "the interrupted terminal", func() bool {
		events = allEvents(t, a.URL(), run.RunID)
		return events[len(events)-1].Terminal
	})
	took := time.Since(killed)
	checkInterrupted(t, "journal", events)
	if took > 5*ttl {
		t.Fatalf("the run ended %v after its runner died: want within 5 lease TTLs (%v)", took, 5*ttl)
	}
	tb.until(10*time.Second, "the terminal event on the tab", func() bool { return tb.terminal(run.RunID) })
	sameEvents(t, "tab on hub B", tb.run(run.RunID), events)
	t.Logf("interrupted %v after SIGKILL (lease TTL %v)", took.Round(time.Millisecond), ttl)

	// The queued message starts the session's next run, on the survivor.
	var ss protocol.SessionStatus
	waitFor(t, 20*time.Second, "the queued message to start a run", func() bool {
		call(t, "GET", a.URL()+"/v1/sessions/"+run.SessionID, nil, &ss)
		return ss.RunID != run.RunID && ss.RunID != "" && ss.Status == protocol.StatusRunning
	})
	if o := s.waitOwner(ss.RunID); o != survivor {
		t.Fatalf("the queued message's run taken by %q, want the survivor %s", o, survivor)
	}
	if cr := cancelHTTP(t, a, ss.RunID); cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel the queued message's run: %+v", cr)
	}
	checkTerminal(t, "queued message's run", waitTerminal(t, b, ss.RunID, 20*time.Second), protocol.EventCancelled)

	// The survivor serves new runs: a quick one, and a slow one whose pauses
	// are longer than the lease TTL.
	quick := startHTTP(t, b, `{"tokens":20,"token_ms":5,"tools":0}`)
	slow := startHTTP(t, a, `{"tokens":3,"token_ms":1500,"tools":0}`)
	for _, r := range []protocol.RunStartResult{quick, slow} {
		if o := s.waitOwner(r.RunID); o != survivor {
			t.Fatalf("run %s taken by %q, want the survivor %s", r.RunID, o, survivor)
		}
	}
	checkDone(t, "quick run", waitTerminal(t, a, quick.RunID, 20*time.Second), 20)
	checkDone(t, "slow run", waitTerminal(t, b, slow.RunID, 30*time.Second), 3)
}

// Restart redis-server (AOF on) mid-run, down for longer than a run's
// journal appends used to be retried: nothing journaled is lost or
// duplicated, the run completes, the focused tab keeps receiving, and
// /readyz is 503 while Redis is down and 200 after. The fault suite
// (TestFault_RedisKilledMidRun) kills it instead.
func TestScaleOut_RedisRestartAOF(t *testing.T) {
	redisOutageMidRun(t, (*redistest.Server).Stop)
}

// redisOutageMidRun takes Redis (AOF on, fsync always) away with stop in
// the middle of a run focused by a tab, for 6 s, and starts it again.
func redisOutageMidRun(t *testing.T, stop func(*redistest.Server)) {
	// The outage must stay under the lease TTL less one renewal period, and
	// some slack for reconnecting (a lease lives on in the AOF with its
	// absolute expiry): 15 s leases are renewed every 5 s, so one lives at
	// least 10 s past the stop, and a 6 s outage never lapses it. Before
	// appends were retried for up to the lease TTL, a run failed after
	// ~4.7 s of outage.
	const outage = 6 * time.Second
	s := newScaled(t, redistest.Options{AOF: true}, 15*time.Second)
	a := s.hub("hubA")
	s.runner("r1")
	const n = 200
	ta := dialTab(t, a)
	res := ta.start(fmt.Sprintf(`{"tokens":%d,"token_ms":10,"tools":0}`, n))
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "50 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 50 })
	before := append([]protocol.Envelope{}, ta.run(res.RunID)...)
	if code := readyz(a); code != 200 {
		t.Fatalf("/readyz before the restart: %d", code)
	}

	down := time.Now()
	stop(s.rs)
	waitFor(t, 10*time.Second, "/readyz 503 while Redis is down", func() bool { return readyz(a) == 503 })
	time.Sleep(time.Until(down.Add(outage))) // the fault's length, not a wait for a condition
	s.rs.Restart(t)
	waitFor(t, 20*time.Second, "/readyz 200 after Redis is back", func() bool { return readyz(a) == 200 })
	if st := runStatus(t, a, res.RunID); st.Terminal {
		t.Fatalf("the run ended during the outage: %+v", st)
	}

	// The tab keeps receiving; should its socket drop, it reconnects with
	// its cursor as a browser would.
	deadline := time.Now().Add(40 * time.Second)
	for !ta.terminal(res.RunID) {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end; the tab has %d events", len(ta.run(res.RunID)))
		}
		if ta.closed != nil {
			seen := ta.run(res.RunID)
			next := dialTab(t, a)
			next.events = seen
			next.c.Focus(next.ctx(), res.SessionID, seen[len(seen)-1].EventID)
			ta = next
			t.Logf("the tab reconnected")
		}
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Until(deadline))
			defer cancel()
			m, err := ta.c.Next(ctx)
			if err != nil {
				ta.closed = err
				return
			}
			ta.record(m)
		}()
	}
	journal := allEvents(t, a.URL(), res.RunID)
	checkDone(t, "journal after the restart", journal, n)
	sameEvents(t, "events seen before the restart vs. the journal", before, journal[:len(before)])
	sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), journal)
}

// A runner asked to stop (SIGTERM) lets a short run finish within the
// grace, and ends a long one with exactly one interrupted terminal before
// it exits; a hub asked to stop sends goaway, and its tab's run goes on in
// the runner.
func TestScaleOut_RunnerSIGTERM(t *testing.T) {
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	a, b := s.hub("hubA"), s.hub("hubB")

	// A generous grace: the run in flight completes.
	r1 := s.runner("r1", "RUNHUB_SHUTDOWN_GRACE=30s")
	short := startHTTP(t, a, `{"tokens":100,"token_ms":10,"tools":0}`)
	if o := s.waitOwner(short.RunID); o != "r1" {
		t.Fatalf("owner %q", o)
	}
	waitFor(t, 10*time.Second, "tokens of the short run", func() bool { return runStatus(t, a, short.RunID).LastSeq >= 10 })
	if err := r1.term(40 * time.Second); err != nil {
		t.Fatalf("runner r1: %v\n%s", err, r1.out.String())
	}
	// The runner waited for it: its terminal is journaled when it exits.
	events := allEvents(t, b.URL(), short.RunID)
	checkDone(t, "short run", events, 100)

	// A short grace: the long run ends interrupted, by the runner itself.
	r2 := s.runner("r2", "RUNHUB_SHUTDOWN_GRACE=300ms")
	long := startHTTP(t, a, `{"tokens":100000,"token_ms":5,"tools":0}`)
	if o := s.waitOwner(long.RunID); o != "r2" {
		t.Fatalf("owner %q", o)
	}
	waitFor(t, 10*time.Second, "tokens of the long run", func() bool { return runStatus(t, a, long.RunID).LastSeq >= 10 })
	exited := sigterm(r2.cmd)
	// The runner ends the run itself, before it exits.
	events = waitTerminal(t, b, long.RunID, 10*time.Second)
	checkInterrupted(t, "long run", events)
	// A run queued while the runner is on its way out is not its to take:
	// it is handed back and another runner executes it.
	next := startHTTP(t, a, `{"tokens":20,"token_ms":5,"tools":0}`)
	if err := exited(20 * time.Second); err != nil {
		t.Fatalf("runner r2: %v\n%s", err, r2.out.String())
	}
	if o := s.owner(long.RunID); o != "" {
		t.Fatalf("lease still held by %q after the runner exited", o)
	}
	s.runner("r3")
	checkDone(t, "run queued while r2 stopped", waitTerminal(t, b, next.RunID, 20*time.Second), 20)
	sameEvents(t, "long run after r2 exited", allEvents(t, b.URL(), long.RunID), events)

	// A hub asked to stop: goaway, and the run goes on.
	ta := dialTab(t, a)
	res := ta.start(`{"tokens":200,"token_ms":10,"tools":0}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(20*time.Second, "10 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 10 })
	if err := a.term(20 * time.Second); err != nil {
		t.Fatalf("hub A: %v\n%s", err, a.out.String())
	}
	cerr := ta.drain(10 * time.Second)
	if len(ta.goaway) != 1 || client.CloseStatus(cerr) != protocol.CloseServiceRestart {
		t.Fatalf("goaway %+v, close %v", ta.goaway, cerr)
	}
	seenA := ta.run(res.RunID)
	if ta.terminal(res.RunID) {
		t.Fatalf("the run ended before the hub stopped; make it longer")
	}
	tb := dialTab(t, b)
	tb.c.Focus(tb.ctx(), res.SessionID, seenA[len(seenA)-1].EventID)
	tb.until(20*time.Second, "the rest of the run on hub B", func() bool { return tb.terminal(res.RunID) })
	seen := append(append([]protocol.Envelope{}, seenA...), tb.run(res.RunID)...)
	checkDone(t, "tabs on A then B", seen, 200)
	sameEvents(t, "tabs vs. journal", seen, allEvents(t, b.URL(), res.RunID))
}

// A runner frozen (SIGSTOP) for longer than the lease TTL is, to everyone
// else, dead: its run is reaped as interrupted, exactly once. When it wakes
// up it must give the run up rather than execute it on: here the run waits
// for an approval that can no longer come, and the runner has room for one
// run only, so it serves the next run only if it let go of the first.
func TestScaleOut_FrozenRunnerLetsGo(t *testing.T) {
	ttl := time.Second
	s := newScaled(t, redistest.Options{}, ttl)
	a := s.hub("hubA")
	r1 := s.runner("r1", "RUNHUB_MAX_RUNS=1")
	first := startHTTP(t, a, `{"tokens":5,"token_ms":1,"tools":0,"approval":true}`)
	waitFor(t, 20*time.Second, "the approval prompt", func() bool {
		return runStatus(t, a, first.RunID).Status == protocol.StatusAwaitingApproval
	})
	if err := r1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	events := waitTerminal(t, a, first.RunID, 5*ttl)
	checkInterrupted(t, "frozen runner's run", events)
	if err := r1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	next := startHTTP(t, a, `{"tokens":10,"token_ms":1,"tools":0}`)
	checkDone(t, "next run on the thawed runner", waitTerminal(t, a, next.RunID, 20*time.Second), 10)
	sameEvents(t, "the reaped run after the thaw", allEvents(t, a.URL(), first.RunID), events)
}

// TestScaleOut_MeasureRedisCost measures what the scaled fan-out costs
// Redis (docs/benchmarks.md, "Scale-out (Redis, 2 replicas)"). It is a
// measurement, not a pass/fail test: it runs only with
// RUNHUB_MEASURE_SCALEOUT=1 and logs a table.
//
// Each row runs R sim runs of K tokens at once in two runners while T tabs
// focus them, spread over two hub replicas: with T = R each run has one tab
// (runs split between the replicas), with T = 2R one tab on each replica,
// with T = 4R two on each. Tabs focus before the runs start. Redis's CPU
// (INFO cpu) and per-command time (INFO commandstats) are read before and
// after; the row with T = 0 is the cost of executing and journaling the
// same runs with nobody focused, so a row's cost above it is the
// fan-out's. Connections per process (CLIENT LIST, by client name) are
// sampled while the runs stream: all of them, and those blocked in a read.
func TestScaleOut_MeasureRedisCost(t *testing.T) {
	if os.Getenv("RUNHUB_MEASURE_SCALEOUT") == "" {
		t.Skip("a measurement: set RUNHUB_MEASURE_SCALEOUT=1 to run it")
	}
	reps := 3
	if n, err := strconv.Atoi(os.Getenv("RUNHUB_MEASURE_REPS")); err == nil && n > 0 {
		reps = n
	}
	const k = 1000
	script := fmt.Sprintf(`{"tokens":%d,"token_ms":5,"tools":0}`, k)
	s := newScaled(t, redistest.Options{}, 10*time.Second)
	hubs := []*hubProcess{s.hub("hubA"), s.hub("hubB")}
	s.runner("r1")
	s.runner("r2")

	type config struct{ r, tabsPerRun int }
	var configs []config
	for _, r := range []int{1, 10, 50} {
		for _, tp := range []int{0, 1, 2, 4} {
			configs = append(configs, config{r, tp})
		}
	}
	// Every repetition measures every row, the row with no tab just before
	// the others of its R: each fan-out figure is computed against the
	// baseline of its own repetition.
	type derived struct{ jrnl, cpuDlv, cpuTail, xDlv, xTail, xCallsTail float64 }
	results := map[config][]derived{}
	last := map[config]costRow{}
	conns, blocked := map[config]map[string]int{}, map[config]map[string]int{}
	for rep := range reps {
		base := map[int]costRow{}
		for _, c := range configs {
			rw := measureRow(t, s, hubs, script, c.r, c.r*c.tabsPerRun)
			if c.tabsPerRun == 0 {
				base[c.r] = rw
			}
			b := base[c.r]
			// This row's cost above the same runs with no tab, scaled to the
			// events journaled (runs differ by a few events).
			scale := float64(rw.journaled) / float64(max(b.journaled, 1))
			fanCPU := rw.cpuUS - b.cpuUS*scale
			fanX := float64(rw.cmd["xread"].usec) - float64(b.cmd["xread"].usec)*scale
			fanCalls := float64(rw.cmd["xread"].calls) - float64(b.cmd["xread"].calls)*scale
			d := derived{jrnl: rw.cpuUS / float64(rw.journaled)}
			if rw.delivered > 0 {
				d.cpuDlv, d.cpuTail = fanCPU/float64(rw.delivered), fanCPU/float64(rw.tailed)
				d.xDlv, d.xTail = fanX/float64(rw.delivered), fanX/float64(rw.tailed)
				d.xCallsTail = fanCalls / float64(rw.tailed)
			}
			results[c] = append(results[c], d)
			last[c] = rw
			if conns[c] == nil {
				conns[c], blocked[c] = map[string]int{}, map[string]int{}
			}
			for name, n := range rw.conns {
				conns[c][name] = max(conns[c][name], n)
				blocked[c][name] = max(blocked[c][name], rw.blocked[name])
			}
			t.Logf("rep %d R=%d T=%d: redis %.0f µs for %d events journaled, %d delivered", rep+1, rw.r, rw.t, rw.cpuUS, rw.journaled, rw.delivered)
		}
	}
	// median (min–max) of one derived figure over the repetitions
	stat := func(ds []derived, f func(derived) float64) string {
		v := make([]float64, len(ds))
		for i, d := range ds {
			v[i] = f(d)
		}
		slices.Sort(v)
		return fmt.Sprintf("%.1f (%.1f–%.1f)", v[len(v)/2], v[0], v[len(v)-1])
	}
	t.Logf("K=%d tokens per run, one every 5 ms; %d repetitions; figures are median (min–max) µs of Redis time", k, reps)
	t.Logf("| R | T | journaled | delivered | tailed | Redis CPU per journaled event | fan-out CPU per delivered event | per tailed event | XREAD time per delivered event | per tailed event | XREAD calls per tailed event | connections per process, max (blocked in a read) |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range configs {
		rw, ds := last[c], results[c]
		var cs []string
		for name, n := range conns[c] {
			cs = append(cs, fmt.Sprintf("%s %d (%d)", name, n, blocked[c][name]))
		}
		slices.Sort(cs)
		fan := func(f func(derived) float64) string {
			if c.tabsPerRun == 0 {
				return "–"
			}
			return stat(ds, f)
		}
		t.Logf("| %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |", rw.r, rw.t, rw.journaled, rw.delivered, rw.tailed,
			stat(ds, func(d derived) float64 { return d.jrnl }),
			fan(func(d derived) float64 { return d.cpuDlv }), fan(func(d derived) float64 { return d.cpuTail }),
			fan(func(d derived) float64 { return d.xDlv }), fan(func(d derived) float64 { return d.xTail }),
			fan(func(d derived) float64 { return d.xCallsTail }), strings.Join(cs, ", "))
	}
	for _, c := range configs {
		rw := last[c]
		var names []string
		for name, st := range rw.cmd {
			if st.usec*100 >= int64(rw.cpuUS) { // the commands over 1% of the CPU
				names = append(names, fmt.Sprintf("%s=%d/%dµs", name, st.calls, st.usec))
			}
		}
		slices.Sort(names)
		t.Logf("last rep R=%d T=%d commands over 1%% of Redis CPU (calls/µs): %s", rw.r, rw.t, strings.Join(names, " "))
	}
}

// costRow is one row of TestScaleOut_MeasureRedisCost.
type costRow struct {
	r, t                 int
	journaled, delivered int
	tailed               int     // Σ over replicas of the events of the runs it tails
	cpuUS                float64 // Redis user+sys CPU
	cmd                  map[string]cmdStat
	conns, blocked       map[string]int // max per client name while streaming
}

// measureRow measures nRuns runs of script with nTabs tabs focusing them.
func measureRow(t *testing.T, s *scaled, hubs []*hubProcess, script string, nRuns, nTabs int) costRow {
	ctx := context.Background()
	rw := costRow{r: nRuns, t: nTabs, conns: map[string]int{}, blocked: map[string]int{}}
	// Sessions first, so the tabs focus them before their runs start.
	sids := make([]string, nRuns)
	for i := range sids {
		var sess protocol.CreateSessionResult
		if code := call(t, "POST", hubs[i%2].URL()+"/v1/sessions", map[string]string{"title": "m"}, &sess); code != 201 {
			t.Fatalf("create session: %d", code)
		}
		sids[i] = sess.SessionID
	}
	focusedOn := make([]map[int]bool, nRuns) // run → the replicas tailing it
	for i := range focusedOn {
		focusedOn[i] = map[int]bool{}
	}
	type result struct {
		n   int
		err error
	}
	results := make(chan result, nTabs)
	var tabs []*client.Conn
	for i := range nTabs {
		run, replica := i%nRuns, (i/nRuns+i%nRuns)%2
		focusedOn[run][replica] = true
		c, err := client.Dial(ctx, "ws://"+hubs[replica].addr+"/v1/ws", client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, c)
		if err := c.Focus(ctx, sids[run], ""); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range tabs {
			c.Close()
		}
	}()
	for _, c := range tabs {
		ping(t, c) // the focus is in force
	}
	s.rdb.ConfigResetStat(ctx)
	cpu0 := redisCPU(t, s.rdb)
	for _, c := range tabs {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 120*time.Second)
			defer cancel()
			n := 0
			for {
				m, err := c.Next(rctx)
				if err != nil {
					results <- result{n, err}
					return
				}
				if em, ok := m.(*protocol.EventMessage); ok {
					n++
					if em.Event.Terminal {
						results <- result{n, nil}
						return
					}
				}
			}
		}()
	}
	runs := make([]string, nRuns)
	for i, sid := range sids {
		var run protocol.RunStartResult
		body := map[string]any{"message": "measure", "metadata": map[string]any{"sim": jsonRaw(script)}}
		if code := call(t, "POST", hubs[i%2].URL()+"/v1/sessions/"+sid+"/runs", body, &run); code != 202 {
			t.Fatalf("start: %d", code)
		}
		runs[i] = run.RunID
	}
	metas := map[string]string{} // run id → its meta hash's key
	for _, id := range runs {
		metas[id] = s.runKey(id, "")
	}
	// Sample connections while the runs stream, until every run ended
	// (read straight from the run hashes: cheap, unlike a fold).
	deadline := time.Now().Add(120 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("runs did not end")
		}
		all, blocked := clientsByName(t, s.rdb)
		for name, n := range all {
			rw.conns[name] = max(rw.conns[name], n)
			rw.blocked[name] = max(rw.blocked[name], blocked[name])
		}
		cmds, _ := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, id := range runs {
				p.HGet(ctx, metas[id], "terminal")
			}
			return nil
		})
		ended := 0
		for _, c := range cmds {
			if v, _ := c.(*goredis.StringCmd).Result(); v == "1" {
				ended++
			}
		}
		if ended == nRuns {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range nTabs {
		res := <-results
		if res.err != nil {
			t.Fatalf("tab: %v", res.err)
		}
		rw.delivered += res.n
	}
	rw.cpuUS = redisCPU(t, s.rdb) - cpu0
	rw.cmd = commandStats(t, s.rdb)
	for i, id := range runs {
		n, err := s.rdb.HGet(ctx, metas[id], "last_seq").Int()
		if err != nil {
			t.Fatal(err)
		}
		rw.journaled += n
		rw.tailed += n * len(focusedOn[i])
	}
	return rw
}

type cmdStat struct{ calls, usec int64 }

// redisCPU is Redis's used_cpu_sys + used_cpu_user in µs.
func redisCPU(t testing.TB, rdb goredis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f * 1e6
		}
	}
	return total
}

// commandStats reads INFO commandstats: calls and µs per command.
func commandStats(t testing.TB, rdb goredis.UniversalClient) map[string]cmdStat {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// clientsByName counts Redis connections per client name, all and those
// blocked in a read (the test's own excluded).
func clientsByName(t testing.TB, rdb goredis.UniversalClient) (all, blocked map[string]int) {
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	all, blocked = map[string]int{}, map[string]int{}
	for _, line := range strings.Split(list, "\n") {
		var name string
		isBlocked := false
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "name="); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(v, "b") {
				isBlocked = true
			}
		}
		if name == "" || name == "test" {
			continue
		}
		all[name]++
		if isBlocked {
			blocked[name]++
		}
	}
	return all, blocked
}

// ping waits until the hub has handled everything c sent before it.
func ping(t testing.TB, c *client.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "sync"}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for pong: %v", err)
		}
		if p, ok := m.(*protocol.Pong); ok && p.ID == "sync" {
			return
		}
	}
}

// RUNHUB_MAX_SOCKETS_PER_SUBJECT bounds a subject's sockets over every hub
// sharing the Redis, not per hub: with a limit of 2, alice's third socket
// is refused on either hub (limit_exceeded), bob is counted apart, and a
// socket alice closes on one hub frees a place on the other.
func TestScaleOut_SocketLimitAcrossHubs(t *testing.T) {
	secret := strings.Repeat("s", 32)
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	env := []string{"RUNHUB_JWT_SECRET=" + secret, "RUNHUB_MAX_SOCKETS_PER_SUBJECT=2"}
	a, b := s.hub("hubA", env...), s.hub("hubB", env...)
	token := func(sub string) string {
		tok, err := auth.Sign([]byte(secret), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: sub,
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	dial := func(p *hubProcess, sub string) (*client.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{Token: token(sub)})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	first, err := dial(a, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(b, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*hubProcess{a, b} {
		if _, err := dial(p, "alice"); err == nil || !strings.Contains(err.Error(), string(protocol.CodeLimitExceeded)) {
			t.Fatalf("alice's third socket on %s: %v, want limit_exceeded", p.addr, err)
		}
	}
	if _, err := dial(b, "bob"); err != nil {
		t.Fatalf("bob: %v", err)
	}
	first.Close()
	waitFor(t, 10*time.Second, "alice's closed socket to free a place on hub B", func() bool {
		c, err := dial(b, "alice")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}
