package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Crash points for the queue hand-off tests. A hub (or runner) child
// started with RUNHUB_TEST_CRASH_AFTER_TERMINAL=<n> kills itself (SIGKILL)
// right after the n-th journal write that follows the first terminal event
// it journals (n = 0: right after that terminal event). Between a run's
// terminal event and the run.started of the message queued behind it the
// executor writes: the queue pop with the next run's registration (1), its
// run.started (2). The hook exists only in the test binary (which doubles
// as the hub binary).
func init() {
	if os.Getenv("RUNHUB_TEST_AS_HUB") != "1" {
		return
	}
	v := os.Getenv("RUNHUB_TEST_CRASH_AFTER_TERMINAL")
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		panic("RUNHUB_TEST_CRASH_AFTER_TERMINAL: " + v)
	}
	testStoreHook = func(s journal.Store) journal.Store { return &crashStore{Store: s, after: int32(n)} }
}

// crashStore is the journal with the crash point.
type crashStore struct {
	journal.Store
	after  int32
	armed  atomic.Bool
	writes atomic.Int32
}

// wrote counts a successful write once armed, and crashes at the point.
func (s *crashStore) wrote(err error) {
	if err != nil || !s.armed.Load() {
		return
	}
	if s.writes.Add(1) == s.after {
		s.crash()
	}
}

func (s *crashStore) crash() {
	fmt.Fprintf(os.Stderr, "crash point: killed after %d journal writes past a terminal event\n", s.after)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

func (s *crashStore) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	out, err := s.Store.Append(ctx, e, key)
	if err == nil && out.Terminal && s.armed.CompareAndSwap(false, true) {
		if s.after == 0 {
			s.crash()
		}
		return out, err
	}
	s.wrote(err)
	return out, err
}

func (s *crashStore) BeginRun(ctx context.Context, r journal.RunMeta) error {
	err := s.Store.BeginRun(ctx, r)
	s.wrote(err)
	return err
}

func (s *crashStore) BeginRunUpdate(ctx context.Context, r journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	m, err := s.Store.BeginRunUpdate(ctx, r, fn)
	s.wrote(err)
	return m, err
}

func (s *crashStore) UpdateSession(ctx context.Context, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	m, err := s.Store.UpdateSession(ctx, id, fn)
	s.wrote(err)
	return m, err
}

// queueCrashPoints are the crash points between run 1's terminal event and
// run 2's run.started (see init).
var queueCrashPoints = []int{0, 1, 2}

// queueCrash is one deployment of the queue crash test: start runs the
// process that executes runs with the crash point set (env) and returns
// the URL to talk to and a channel closed when that process has exited;
// restart brings up what replaces it and returns the URL.
type queueCrash struct {
	start   func(t *testing.T, env ...string) (url string, exited <-chan struct{})
	restart func(t *testing.T) string
}

// embeddedQueueCrash is a hub on the embedded journal, restarted on the
// same data directory.
func embeddedQueueCrash() queueCrash {
	var data, addr string
	return queueCrash{
		start: func(t *testing.T, env ...string) (string, <-chan struct{}) {
			data = t.TempDir()
			p := startHub(t, data, env...)
			addr = p.addr
			return p.URL(), p.done
		},
		restart: func(t *testing.T) string {
			return startHubAt(t, addr, data).URL()
		},
	}
}

// redisQueueCrash is a hub executing its runs itself (RUNHUB_RUNTIME
// inprocess) on Redis; another hub replaces it.
func redisQueueCrash() queueCrash {
	var rs *redistest.Server
	env := func() []string {
		return []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_RUNTIME=inprocess", "RUNHUB_LEASE_TTL=1s"}
	}
	return queueCrash{
		start: func(t *testing.T, extra ...string) (string, <-chan struct{}) {
			rs = redistest.Start(t, redistest.Options{})
			p := startHub(t, t.TempDir(), append(env(), extra...)...)
			return p.URL(), p.done
		},
		restart: func(t *testing.T) string {
			return startHub(t, t.TempDir(), env()...).URL()
		},
	}
}

// runnersQueueCrash is a hub dispatching to a runner on Redis; the runner
// executes the runs and crashes; another runner replaces it.
func runnersQueueCrash() queueCrash {
	var rs *redistest.Server
	var url string
	env := func() []string {
		return []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=1s"}
	}
	return queueCrash{
		start: func(t *testing.T, extra ...string) (string, <-chan struct{}) {
			rs = redistest.Start(t, redistest.Options{})
			url = startHub(t, t.TempDir(), env()...).URL()
			r := startRunner(t, append(env(), extra...)...)
			return url, r.done
		},
		restart: func(t *testing.T) string {
			startRunner(t, env()...)
			return url
		},
	}
}

// testQueueCrash starts run "one", queues "two" and "three" behind it
// (both answered 200 queued), lets the executing process crash at point,
// restarts, and checks that every message started exactly once, in order:
// the session ends with three runs whose run.started carry one, two,
// three, and an empty queue.
func testQueueCrash(t *testing.T, d queueCrash, point int) {
	url, exited := d.start(t, "RUNHUB_TEST_CRASH_AFTER_TERMINAL="+strconv.Itoa(point))
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", url+"/v1/sessions", map[string]string{"title": "queue crash"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	before := focusTab(t, url, sess.SessionID, "")
	sim := map[string]any{"sim": map[string]any{"tokens": 40, "token_ms": 10}}
	var run protocol.RunStartResult
	if code := call(t, "POST", url+"/v1/sessions/"+sess.SessionID+"/runs", map[string]any{"message": "one", "metadata": sim}, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	for _, m := range []string{"two", "three"} {
		var res protocol.ControlResult
		if code := call(t, "POST", url+"/v1/sessions/"+sess.SessionID+"/queue", map[string]string{"message": m}, &res); code != 200 || res.Message != "queued" {
			t.Fatalf("queue %q: %d %+v (run one ended too soon?)", m, code, res)
		}
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the process did not reach crash point %d", point)
	}
	url = d.restart(t)
	// The tab focused throughout reconnects and focuses from the last event
	// it got (as a browser tab does after a restart).
	seen := before.close()
	cursor := ""
	if len(seen) > 0 {
		cursor = seen[len(seen)-1].EventID
	}
	after := focusTab(t, url, sess.SessionID, cursor)
	var got []string
	waitFor(t, 60*time.Second, "three runs, all ended, and an empty queue", func() bool {
		var ss protocol.SessionStatus
		if call(t, "GET", url+"/v1/sessions/"+sess.SessionID, nil, &ss) != 200 || ss.QueueDepth != 0 || !ss.Terminal {
			return false
		}
		var list protocol.RunList
		if call(t, "GET", url+"/v1/sessions/"+sess.SessionID+"/runs", nil, &list) != 200 {
			return false
		}
		got = got[:0]
		for i := len(list.Runs) - 1; i >= 0; i-- { // oldest first
			r := list.Runs[i]
			if !r.Terminal {
				return false
			}
			for _, e := range allEvents(t, url, r.RunID) {
				if e.Type == protocol.EventRunStarted {
					p, _ := protocol.DecodePayload[protocol.RunStartedPayload](&e)
					got = append(got, p.Message)
				}
			}
		}
		return len(list.Runs) >= 3
	})
	if fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("crash point %d: the runs started with %q, want one, two, three, each once", point, got)
	}
	// The tab got, over its two sockets, every event of the three runs
	// once and in order; the second focus repeats nothing of the first.
	var list protocol.RunList
	call(t, "GET", url+"/v1/sessions/"+sess.SessionID+"/runs", nil, &list)
	newest := list.Runs[0].RunID
	waitFor(t, 30*time.Second, "the tab to get the last run's terminal event", func() bool {
		for _, e := range after.events() {
			if e.RunID == newest && e.Terminal {
				return true
			}
		}
		return false
	})
	all := append(seen, after.close()...)
	for i := len(list.Runs) - 1; i >= 0; i-- {
		r := list.Runs[i]
		want := uint64(1)
		for _, e := range all {
			if e.RunID != r.RunID {
				continue
			}
			if e.Seq != want {
				t.Fatalf("crash point %d: the tab got seq %d of run %s, want %d (a duplicate or a gap; cursor %q)", point, e.Seq, r.RunID, want, cursor)
			}
			want++
		}
		if want != r.LastSeq+1 {
			t.Fatalf("crash point %d: the tab got run %s up to seq %d, want %d", point, r.RunID, want-1, r.LastSeq)
		}
	}
}

// focusedTab is a socket focused on a session, collecting its events.
type focusedTab struct {
	c    *client.Conn
	mu   sync.Mutex
	got  []protocol.Envelope
	done chan struct{}
}

// focusTab dials url's hub and focuses sid from cursor.
func focusTab(t *testing.T, url, sid, cursor string) *focusedTab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Focus(ctx, sid, cursor); err != nil {
		t.Fatal(err)
	}
	ft := &focusedTab{c: c, done: make(chan struct{})}
	go func() {
		defer close(ft.done)
		for {
			m, err := c.Next(context.Background())
			if err != nil {
				return
			}
			if em, ok := m.(*protocol.EventMessage); ok {
				ft.mu.Lock()
				ft.got = append(ft.got, *em.Event)
				ft.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { ft.close() })
	return ft
}

func (ft *focusedTab) events() []protocol.Envelope {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return slices.Clone(ft.got)
}

// close ends the socket and returns what it got.
func (ft *focusedTab) close() []protocol.Envelope {
	ft.c.Close()
	<-ft.done
	return ft.events()
}

// SIGKILL at every point between a run's terminal event and the run.started
// of the message queued behind it, on the embedded journal: after a
// restart on the same data directory every accepted queued message starts
// exactly once, in order.
func TestProcess_QueueCrashPoints(t *testing.T) {
	for _, point := range queueCrashPoints {
		t.Run(strconv.Itoa(point), func(t *testing.T) { testQueueCrash(t, embeddedQueueCrash(), point) })
	}
}

// The same on Redis, with a hub that executes its runs: the replacement
// hub's reaper drains the idle queue or starts the registered run.
func TestProcess_QueueCrashPointsRedis(t *testing.T) {
	for _, point := range queueCrashPoints {
		t.Run(strconv.Itoa(point), func(t *testing.T) { testQueueCrash(t, redisQueueCrash(), point) })
	}
}

// The same with runners: the runner executing the runs crashes; the
// replacement runner (or the hub's reaper, dispatching) goes on.
func TestProcess_QueueCrashPointsRunners(t *testing.T) {
	for _, point := range queueCrashPoints {
		t.Run(strconv.Itoa(point), func(t *testing.T) { testQueueCrash(t, runnersQueueCrash(), point) })
	}
}
