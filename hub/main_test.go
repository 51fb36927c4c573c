package hub_test

import (
	"context"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testHub is a hub over a bbolt journal and the in-process runtime, served
// by a real HTTP server on loopback.
type testHub struct {
	t     testing.TB
	hub   *hub.Hub
	rt    *adapter.InProcess
	store *bolt.Store
	srv   *httptest.Server
	URL   string // http://127.0.0.1:port
	WSURL string // ws://…/v1/ws
}

func newTestHub(t testing.TB, cfg hub.Config) *testHub {
	return newTestHubListener(t, cfg, nil)
}

// newTestHubListener serves the hub on ln (nil: a default loopback one).
func newTestHubListener(t testing.TB, cfg hub.Config, ln net.Listener) *testHub {
	t.Helper()
	store, err := // NoSync: these tests are about delivery, not durability (the journal
		// suite and the process tests cover that), and a sim run emits its
		// events one after another, each waiting for its commit.
		bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rt := adapter.NewInProcess(store, adapter.Options{Drivers: map[string]adapter.Driver{"sim": &sim.Driver{}}})
	h := hub.New(cfg, store, rt)
	e := echo.New()
	e.HTTPErrorHandler = hub.ErrorHandler
	h.Routes(e)
	srv := httptest.NewUnstartedServer(e)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	th := &testHub{t: t, hub: h, rt: rt, store: store, srv: srv, URL: srv.URL, WSURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"}
	t.Cleanup(th.close)
	return th
}

func (th *testHub) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	th.hub.Shutdown(ctx)
	th.srv.Close()
	th.rt.Close()
	th.store.Close()
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
