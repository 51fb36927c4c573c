package hub_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/adaptertest"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testHub is a hub over a journal (in memory unless runtimeOpts.Bolt) and
// the in-process runtime, served by a real HTTP server on loopback.
type testHub struct {
	t     testing.TB
	hub   *hub.Hub
	rt    *executor.InProcess
	store journal.Store
	// path is the journal's file; set when runtimeOpts.Bolt.
	path string
	// shared says store is another test hub's (runtimeOpts.Shared).
	shared bool
	fault  *faultStore // set when runtimeOpts.Faults
	// counted counts the metas the hub and runtime read; set when
	// runtimeOpts.Counted.
	counted *adaptertest.MetaCounter
	srv     *httptest.Server
	URL     string // http://127.0.0.1:port
	WSURL   string // ws://…/v1/ws
}

func newTestHub(t testing.TB, cfg hub.Config) *testHub {
	return newTestHubListener(t, cfg, nil)
}

// newTestHubListener serves the hub on ln (nil: a default loopback one).
func newTestHubListener(t testing.TB, cfg hub.Config, ln net.Listener) *testHub {
	t.Helper()
	return newTestHubWith(t, cfg, ln, runtimeOpts{})
}

// runtimeOpts tune the in-process runtime of a test hub.
type runtimeOpts struct {
	// Adapter are the runtime's options; Drivers defaults to the simulator.
	Adapter executor.Options
	// ClarifyTimeout is the simulator's clarify expiry (0: none).
	ClarifyTimeout time.Duration
	// Faults puts a faultStore between the journal and the hub and runtime.
	Faults bool
	// Counted puts a counting store between the journal and the hub and
	// runtime (testHub.counted).
	Counted bool
	// Bolt journals to a bbolt file (testHub.path) instead of memory.
	Bolt bool
	// Shared, when set, is the journal of another test hub this one
	// shares (that hub closes it).
	Shared journal.Store
}

// faultStore is the journal with a switch: while failing, its reads and
// writes answer an internal error (the kind of text that must never reach
// a client).
type faultStore struct {
	journal.Store
	failing atomic.Bool
}

var errFault = errors.New("journal/bolt: tx 9: page 17 checksum mismatch: unexpected EOF")

func (f *faultStore) fail() error {
	if f.failing.Load() {
		return errFault
	}
	return nil
}

func (f *faultStore) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if err := f.fail(); err != nil {
		return protocol.Envelope{}, err
	}
	return f.Store.Append(ctx, e, key)
}

func (f *faultStore) Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.Read(ctx, runID, afterSeq, limit)
}

func (f *faultStore) Run(ctx context.Context, runID string) (journal.RunMeta, error) {
	if err := f.fail(); err != nil {
		return journal.RunMeta{}, err
	}
	return f.Store.Run(ctx, runID)
}

func (f *faultStore) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	if err := f.fail(); err != nil {
		return journal.SessionMeta{}, err
	}
	return f.Store.Session(ctx, id)
}

func (f *faultStore) CreateSession(ctx context.Context, s journal.SessionMeta) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.CreateSession(ctx, s)
}

func (f *faultStore) BeginRun(ctx context.Context, r journal.RunMeta) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.BeginRun(ctx, r)
}

func (f *faultStore) UpdateSession(ctx context.Context, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	if err := f.fail(); err != nil {
		return journal.SessionMeta{}, err
	}
	return f.Store.UpdateSession(ctx, id, fn)
}

// newTestHubRuntime is newTestHub with a tuned runtime.
func newTestHubRuntime(t testing.TB, cfg hub.Config, ro runtimeOpts) *testHub {
	t.Helper()
	return newTestHubWith(t, cfg, nil, ro)
}

func newTestHubWith(t testing.TB, cfg hub.Config, ln net.Listener, ro runtimeOpts) *testHub {
	t.Helper()
	var store journal.Store = mem.New(mem.Options{})
	path := ""
	switch {
	case ro.Shared != nil:
		store = ro.Shared
	case ro.Bolt:
		// NoSync: these tests are about delivery, not durability (the
		// journal suite and the process tests cover that).
		path = filepath.Join(t.TempDir(), "journal.db")
		b, err := bolt.Open(path, bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		store = b
	}
	opts := ro.Adapter
	if opts.Drivers == nil {
		opts.Drivers = map[string]driver.Driver{"sim": &sim.Driver{ClarifyTimeout: ro.ClarifyTimeout}}
	}
	var served journal.Store = store
	var fault *faultStore
	if ro.Faults {
		fault = &faultStore{Store: store}
		served = fault
	}
	var counted *adaptertest.MetaCounter
	if ro.Counted {
		counted = &adaptertest.MetaCounter{}
		served = counted.Wrap(served)
	}
	rt := executor.New(served, opts)
	h := hub.New(cfg, served, adapter.NewRouter(served, rt, nil))
	e := echo.New()
	e.HTTPErrorHandler = hub.ErrorHandler
	h.Routes(e)
	srv := httptest.NewUnstartedServer(e)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	th := &testHub{t: t, hub: h, rt: rt, store: store, shared: ro.Shared != nil, path: path, fault: fault, counted: counted, srv: srv, URL: srv.URL, WSURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"}
	t.Cleanup(th.close)
	return th
}

func (th *testHub) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	th.hub.Shutdown(ctx)
	th.srv.Close()
	th.rt.Close()
	if !th.shared {
		th.store.Close()
	}
}

func (th *testHub) dial(t testing.TB) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, th.WSURL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// simStart builds a start control for the simulator.
func simStart(sessionID string, tokens, tokenMS int, extra string) protocol.Control {
	md := `{"sim":{"tokens":` + itoa(tokens) + `,"token_ms":` + itoa(tokenMS) + `,"tools":1` + extra + `}}`
	return protocol.Control{Op: protocol.OpStart, SessionID: sessionID, Message: "hello sim", Metadata: []byte(md)}
}

func itoa(i int) string { return strconv.Itoa(i) }

func startRun(t testing.TB, c *client.Conn, m protocol.Control) protocol.ControlResult {
	t.Helper()
	res, err := c.Control(ctxT(t, 10*time.Second), m)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if !res.Accepted {
		t.Fatalf("start not accepted: %+v", res)
	}
	return res
}

// collector gathers what a socket receives.
type collector struct {
	events   []protocol.Envelope
	statuses map[string]protocol.SessionStatus
	replayed []protocol.Replayed
	errors   []protocol.ErrorMessage
	other    []any
}

func newCollector() *collector { return &collector{statuses: map[string]protocol.SessionStatus{}} }

func (col *collector) add(m any) {
	switch v := m.(type) {
	case *protocol.EventMessage:
		col.events = append(col.events, *v.Event)
	case *protocol.StatusMessage:
		col.statuses[v.Session.SessionID] = *v.Session
	case *protocol.Replayed:
		col.replayed = append(col.replayed, *v)
	case *protocol.ErrorMessage:
		col.errors = append(col.errors, *v)
	default:
		col.other = append(col.other, m)
	}
}

// until reads messages into col until cond holds or the deadline passes.
func (col *collector) until(t testing.TB, c *client.Conn, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v (events %d, statuses %v, errors %v)", what, err, len(col.events), col.statuses, col.errors)
		}
		col.add(m)
	}
}

// terminalOf reports whether col has the terminal event of run.
func (col *collector) terminalOf(runID string) bool {
	for _, e := range col.events {
		if e.RunID == runID && e.Terminal {
			return true
		}
	}
	return false
}

// checkRun asserts the events of run in col are seq 1..N contiguous with
// exactly one terminal, last, and returns the concatenated token text.
func checkRun(t testing.TB, events []protocol.Envelope, runID string) string {
	t.Helper()
	var text strings.Builder
	var want uint64 = 1
	terminals := 0
	for _, e := range events {
		if e.RunID != runID {
			continue
		}
		if e.Seq != want {
			t.Fatalf("run %s: got seq %d, want %d", runID, e.Seq, want)
		}
		want++
		if e.Terminal {
			terminals++
		} else if terminals > 0 {
			t.Fatalf("run %s: event %d after the terminal event", runID, e.Seq)
		}
		if e.Type == protocol.EventTokenDelta {
			p, err := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			if err != nil {
				t.Fatal(err)
			}
			text.WriteString(p.Text)
		}
	}
	if terminals != 1 {
		t.Fatalf("run %s: %d terminal events, want 1", runID, terminals)
	}
	return text.String()
}
