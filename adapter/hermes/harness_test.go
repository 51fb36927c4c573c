package hermes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testKey is the Hermes API key of the tests. It matches none of the
// journal's secret patterns, so finding it nowhere proves the driver never
// wrote it, not that redaction caught it.
const testKey = "hk-test-7Q2mZ4vR9xLw3NbT"

// harness is a real in-process runtime over a bolt journal, with the
// hermes driver pointed at a fake Hermes server.
type harness struct {
	t              *testing.T
	fake           *fakeHermes
	store          *bolt.Store
	rt             *adapter.Router     // the runtime as the hub uses it
	exec           *executor.InProcess // its executor
	logs           *drivertest.Buffer
	dbPath         string
	runs           []string
	drv            *hermes.Driver
	logger         *slog.Logger
	clarifyTimeout time.Duration
}

// newHarness builds the runtime; cfg adjusts the driver's configuration
// (its defaults here are short timeouts for tests).
func newHarness(t *testing.T, script func(fr *fakeRun, n, sub int, w *sseWriter), cfg func(*hermes.Config)) *harness {
	t.Helper()
	logger, logs := drivertest.Logger()
	h := &harness{t: t, fake: newFakeHermes(t, testKey), logs: logs}
	h.fake.script = script
	h.dbPath = filepath.Join(t.TempDir(), "journal.db")
	store, err := bolt.Open(h.dbPath, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h.store = store
	c := hermes.Config{BaseURL: h.fake.srv.URL, APIKey: profile.NewSecret(testKey), Logger: logger,
		RequestTimeout: 5 * time.Second, StopTimeout: 2 * time.Second, StreamIdleTimeout: 5 * time.Second,
		EventIdleTimeout: 30 * time.Second, PollInterval: 20 * time.Millisecond}
	if cfg != nil {
		cfg(&c)
	}
	d, err := hermes.New(c)
	if err != nil {
		t.Fatal(err)
	}
	h.drv, h.logger, h.clarifyTimeout = d, logger, 10*time.Second
	h.newExec(false)
	t.Cleanup(h.close)
	return h
}

// newExec builds the runtime's executor (and router) over the harness's
// journal and driver; detach is its Options.Detach.
func (h *harness) newExec(detach bool) {
	h.exec = executor.New(h.store, executor.Options{Drivers: map[string]driver.Driver{"hermes": h.drv},
		DefaultDriver: "hermes", Logger: h.logger, ClarifyTimeout: h.clarifyTimeout, Detach: detach})
	h.rt = adapter.NewRouter(h.store, h.exec, nil)
}

// close stops the runtime and proves the API key is nowhere: not in any
// journaled event or run meta, not in the logs, not in the journal file.
func (h *harness) close() {
	t := h.t
	h.exec.Close()
	ctx := context.Background()
	for _, id := range h.runs {
		meta, err := h.store.Run(ctx, id)
		if err != nil {
			t.Errorf("run %s: %v", id, err)
			continue
		}
		if strings.Contains(string(meta.Request), testKey) {
			t.Errorf("run %s: the API key is in the journaled request", id)
		}
		for _, e := range h.events(id) {
			if strings.Contains(string(e.Payload), testKey) {
				t.Errorf("run %s: the API key is in %s %s", id, e.Type, e.Payload)
			}
		}
	}
	h.store.Close()
	if strings.Contains(h.logs.String(), testKey) {
		t.Errorf("the API key is in the logs:\n%s", h.logs.String())
	}
	if raw := drivertest.JournalBytes(t, h.dbPath); bytes.Contains(raw, []byte(testKey)) {
		t.Errorf("the API key is in the journal file")
	}
	if t.Failed() {
		t.Logf("logs:\n%s", h.logs.String())
	}
}

// control sends m through the runtime for the owner of the runs start
// starts.
func (h *harness) control(ctx context.Context, m protocol.Control) (protocol.ControlResult, error) {
	return h.rt.Control(ctx, adapter.NewControl(&m, "local", ""))
}

// start starts a run (in session sid, or a new one).
func (h *harness) start(sid, message string) protocol.RunStartResult {
	h.t.Helper()
	res, err := h.rt.StartRun(context.Background(), "local", protocol.StartRunRequest{SessionID: sid, Message: message})
	if err != nil {
		h.t.Fatalf("start: %v", err)
	}
	h.runs = append(h.runs, res.RunID)
	return res
}

// watch streams the run's events (replay then live) until its terminal
// event.
func (h *harness) watch(runID string) <-chan protocol.Envelope {
	ch := make(chan protocol.Envelope, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	go func() {
		defer cancel()
		defer close(ch)
		for e, err := range h.rt.ObserveRun(ctx, runID, 0) {
			if err != nil {
				h.t.Errorf("observe %s: %v", runID, err)
				return
			}
			ch <- e
		}
	}()
	return ch
}

// until reads ch up to the first event of type typ.
func (h *harness) until(ch <-chan protocol.Envelope, typ protocol.EventType) protocol.Envelope {
	h.t.Helper()
	for e := range ch {
		if e.Type == typ {
			return e
		}
		if e.Terminal {
			h.t.Fatalf("run ended (%s %s) before %s", e.Type, e.Payload, typ)
		}
	}
	h.t.Fatalf("no %s event", typ)
	return protocol.Envelope{}
}

// finish waits for the run's terminal event and returns all its events,
// checking the contract: seq contiguous from 1, exactly one terminal event
// and it is the last.
func (h *harness) finish(runID string) []protocol.Envelope {
	h.t.Helper()
	for e := range h.watch(runID) {
		if e.Terminal {
			break
		}
	}
	evs := h.events(runID)
	terminals := 0
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			h.t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Terminal {
			terminals++
		}
	}
	if terminals != 1 || !evs[len(evs)-1].Terminal {
		h.t.Fatalf("%d terminal events (last %s), want exactly one, last:\n%s", terminals, evs[len(evs)-1].Type, dump(evs))
	}
	return evs
}

func (h *harness) events(runID string) []protocol.Envelope {
	var out []protocol.Envelope
	if err := journal.ReadAll(context.Background(), h.store, runID, 0, func(e protocol.Envelope) error {
		out = append(out, e)
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func dump(evs []protocol.Envelope) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("  " + string(e.Type) + " " + string(e.Payload) + "\n")
	}
	return b.String()
}

// types lists the event types of evs.
func types(evs []protocol.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(e.Type)
	}
	return out
}

// ofType returns the events of type typ.
func ofType(evs []protocol.Envelope, typ protocol.EventType) []protocol.Envelope {
	var out []protocol.Envelope
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// notes returns the progress events but the one journaling the upstream
// run id after the start.
func notes(evs []protocol.Envelope) []protocol.Envelope {
	var out []protocol.Envelope
	for _, e := range ofType(evs, protocol.EventProgress) {
		if !strings.HasPrefix(payload[protocol.ProgressPayload](e).Text, "started Hermes run ") {
			out = append(out, e)
		}
	}
	return out
}

// text joins the token.delta text of evs.
func text(evs []protocol.Envelope) string {
	var b strings.Builder
	for _, e := range ofType(evs, protocol.EventTokenDelta) {
		b.WriteString(payload[protocol.TokenDeltaPayload](e).Text)
	}
	return b.String()
}

func payload[T any](e protocol.Envelope) T {
	var v T
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		panic(err)
	}
	return v
}

// terminal returns the run's terminal event.
func terminal(evs []protocol.Envelope) protocol.Envelope { return evs[len(evs)-1] }

// wantError checks the terminal event is an error with code.
func wantError(t *testing.T, evs []protocol.Envelope, code string) protocol.ErrorPayload {
	t.Helper()
	e := terminal(evs)
	if e.Type != protocol.EventError {
		t.Fatalf("terminal %s %s, want error %s\n%s", e.Type, e.Payload, code, dump(evs))
	}
	p := payload[protocol.ErrorPayload](e)
	if p.Code != code || !p.Terminal || p.Message == "" {
		t.Fatalf("terminal error %+v, want code %s with a message", p, code)
	}
	return p
}
