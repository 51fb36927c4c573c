// Package hubtest is the hub's core in memory for tests: a real hub.Hub
// over an in-memory journal (journal/mem; or a bbolt file) and the
// in-process runtime running the simulator, served on loopback with the
// edges a test names — what an edge's tests run against when they are not
// about the socket — and the helpers the core's and the edges' tests share
// (HTTP calls, tokens, the journal's view of a run).
package hubtest

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
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
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// Hub is a hub over a journal and the in-process runtime, served by a real
// HTTP server on loopback.
type Hub struct {
	Hub   *hub.Hub
	RT    *executor.InProcess
	Store journal.Store // the journal itself (not its Fault or Counted wrapper)
	// Path is the journal's file; set with Options.Bolt.
	Path string
	// Shared says Store is another test hub's (Options.Shared).
	Shared bool
	Fault  *FaultStore // set with Options.Faults
	// Counted counts the metas the hub and runtime read; set with
	// Options.Counted.
	Counted *adaptertest.MetaCounter
	Srv     *httptest.Server
	URL     string // http://127.0.0.1:port
	WSURL   string // ws://…/v1/ws
}

// Options tune a test hub.
type Options struct {
	// Adapter are the runtime's options; Drivers defaults to the simulator.
	Adapter executor.Options
	// ClarifyTimeout is the simulator's clarify expiry (0: none).
	ClarifyTimeout time.Duration
	// Faults puts a FaultStore between the journal and the hub and runtime.
	Faults bool
	// Counted puts a counting store between the journal and the hub and
	// runtime (Hub.Counted).
	Counted bool
	// Bolt journals to a bbolt file (Hub.Path) instead of memory.
	Bolt bool
	// Shared, when set, is the journal of another test hub this one
	// shares (that hub closes it).
	Shared journal.Store
	// Listener serves the hub (nil: a new loopback one).
	Listener net.Listener
	// Edges are mounted beside the tab socket.
	Edges []hub.Edge
}

// Serve starts a hub with cfg and o; the test's cleanup closes it.
func Serve(t testing.TB, cfg hub.Config, o Options) *Hub {
	t.Helper()
	var store journal.Store = mem.New(mem.Options{})
	path := ""
	switch {
	case o.Shared != nil:
		store = o.Shared
	case o.Bolt:
		// NoSync: these tests are about delivery, not durability (the
		// journal suite and the process tests cover that).
		path = filepath.Join(t.TempDir(), "journal.db")
		b, err := bolt.Open(path, bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		store = b
	}
	opts := o.Adapter
	if opts.Drivers == nil {
		opts.Drivers = map[string]driver.Driver{"sim": &sim.Driver{ClarifyTimeout: o.ClarifyTimeout}}
	}
	served := store
	var fault *FaultStore
	if o.Faults {
		fault = &FaultStore{Store: store}
		served = fault
	}
	var counted *adaptertest.MetaCounter
	if o.Counted {
		counted = &adaptertest.MetaCounter{}
		served = counted.Wrap(served)
	}
	rt := executor.New(served, opts)
	h := hub.New(cfg, served, adapter.NewRouter(served, rt, nil))
	e := echo.New()
	e.HTTPErrorHandler = httpx.ErrorHandler
	h.Routes(e, o.Edges...)
	srv := httptest.NewUnstartedServer(e)
	if o.Listener != nil {
		srv.Listener.Close()
		srv.Listener = o.Listener
	}
	srv.Start()
	th := &Hub{Hub: h, RT: rt, Store: store, Shared: o.Shared != nil, Path: path, Fault: fault, Counted: counted,
		Srv: srv, URL: srv.URL, WSURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"}
	t.Cleanup(th.Close)
	return th
}

// Close stops the hub, its server, its runtime and (unless shared) its
// journal.
func (th *Hub) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	th.Hub.Shutdown(ctx)
	th.Srv.Close()
	th.RT.Close()
	if !th.Shared {
		th.Store.Close()
	}
}

// Dial opens a tab socket (open mode).
func (th *Hub) Dial(t testing.TB) *client.Conn { t.Helper(); return th.DialToken(t, "") }

// DialToken opens a socket whose hello carries tok.
func (th *Hub) DialToken(t testing.TB, tok string) *client.Conn {
	t.Helper()
	c, err := client.Dial(Ctx(t, 10*time.Second), th.WSURL, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// FaultStore is the journal with a switch: while Failing, its reads and
// writes answer an internal error (the kind of text that must never reach
// a client).
type FaultStore struct {
	journal.Store
	Failing atomic.Bool
}

// ErrFault is what a failing FaultStore answers.
var ErrFault = errors.New("journal/bolt: tx 9: page 17 checksum mismatch: unexpected EOF")

func (f *FaultStore) fail() error {
	if f.Failing.Load() {
		return ErrFault
	}
	return nil
}

func (f *FaultStore) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if err := f.fail(); err != nil {
		return protocol.Envelope{}, err
	}
	return f.Store.Append(ctx, e, key)
}

func (f *FaultStore) Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.Read(ctx, runID, afterSeq, limit)
}

func (f *FaultStore) Run(ctx context.Context, runID string) (journal.RunMeta, error) {
	if err := f.fail(); err != nil {
		return journal.RunMeta{}, err
	}
	return f.Store.Run(ctx, runID)
}

func (f *FaultStore) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	if err := f.fail(); err != nil {
		return journal.SessionMeta{}, err
	}
	return f.Store.Session(ctx, id)
}

func (f *FaultStore) CreateSession(ctx context.Context, s journal.SessionMeta) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.CreateSession(ctx, s)
}

func (f *FaultStore) BeginRun(ctx context.Context, r journal.RunMeta) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.BeginRun(ctx, r)
}

func (f *FaultStore) UpdateSession(ctx context.Context, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	if err := f.fail(); err != nil {
		return journal.SessionMeta{}, err
	}
	return f.Store.UpdateSession(ctx, id, fn)
}

// Ctx is a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Server is a constructor of test hubs that mount edges (the edge's own
// tests' newTestHub).
func Server(edges ...hub.Edge) func(t testing.TB, cfg hub.Config) *Hub {
	return func(t testing.TB, cfg hub.Config) *Hub {
		t.Helper()
		return Serve(t, cfg, Options{Edges: edges})
	}
}
