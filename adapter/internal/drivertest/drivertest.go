// Package drivertest runs drivers for tests the way the hub does: a real
// executor (adapter/executor) behind the adapter's Router, over a real
// bolt journal, runs selected by profile, logs captured so a test can
// search them.
package drivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// Harness is an executor with a journal and captured logs.
type Harness struct {
	t     testing.TB
	Store *bolt.Store
	RT    *adapter.Router     // the runtime as the hub uses it
	Exec  *executor.InProcess // its executor
	Path  string              // the journal file
	Logs  *Buffer
	Log   *slog.Logger
}

// Buffer is a goroutine-safe bytes.Buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Logger returns a debug-level logger writing to a new Buffer.
func Logger() (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// Config configures a Harness.
type Config struct {
	Profiles       map[string]driver.Profile
	ClarifyTimeout time.Duration // default 5s
	Log            *slog.Logger  // with Logs; default: Logger()
	Logs           *Buffer
	// Capabilities is the executor's (nil: nothing is refused).
	Capabilities adapter.Capabilities
}

// New starts an executor whose profiles are the given drivers (plus the
// simulator as provider "sim").
func New(t testing.TB, cfg Config) *Harness {
	t.Helper()
	if cfg.ClarifyTimeout == 0 {
		cfg.ClarifyTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log, cfg.Logs = Logger()
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	store, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt := executor.New(store, executor.Options{
		Drivers:        map[string]driver.Driver{"sim": &sim.Driver{}},
		Profiles:       cfg.Profiles,
		ClarifyTimeout: cfg.ClarifyTimeout,
		Logger:         cfg.Log,
		Capabilities:   cfg.Capabilities,
	})
	h := &Harness{t: t, Store: store, RT: adapter.NewRouter(store, rt, nil), Exec: rt, Path: path, Logs: cfg.Logs, Log: cfg.Log}
	t.Cleanup(func() {
		rt.Close()
		store.Close()
	})
	return h
}

// Start starts a run and fails the test if the start is refused.
func (h *Harness) Start(req protocol.StartRunRequest) protocol.RunStartResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := h.RT.StartRun(ctx, "local", req)
	if err != nil {
		h.t.Fatalf("start: %v", err)
	}
	return r
}

// Refused starts req and fails the test unless the start is answered
// unsupported on the field need, naming need and the profile, with no
// session journaled.
func (h *Harness) Refused(req protocol.StartRunRequest, need string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.RT.StartRun(ctx, "local", req)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnsupported || pe.Field != need ||
		!strings.Contains(pe.Message, need) || !strings.Contains(pe.Message, `profile "`+req.Profile+`"`) {
		h.t.Fatalf("start with %s on profile %q: %v, want unsupported naming the profile and %s", need, req.Profile, err, need)
	}
	if list, err := h.Store.Sessions(ctx, "local"); err != nil || len(list) != 0 {
		h.t.Fatalf("the refused start journaled sessions %+v (%v)", list, err)
	}
}

// Events waits (at most within) for the run's terminal event and returns
// every event of the run.
func (h *Harness) Events(runID string, within time.Duration) []protocol.Envelope {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out []protocol.Envelope
	for e, err := range h.RT.ObserveRun(ctx, runID, 0) {
		if err != nil {
			h.t.Fatalf("observe %s: %v (events so far: %s)", runID, err, Types(out))
		}
		out = append(out, e)
	}
	if len(out) == 0 || !out[len(out)-1].Terminal {
		h.t.Fatalf("run %s did not end within %s; events: %s", runID, within, Types(out))
	}
	return out
}

// WaitFor waits until the run has an event for which match is true and
// returns it.
func (h *Harness) WaitFor(runID string, within time.Duration, match func(protocol.Envelope) bool) protocol.Envelope {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var seen []protocol.Envelope
	for e, err := range h.RT.ObserveRun(ctx, runID, 0) {
		if err != nil {
			break
		}
		seen = append(seen, e)
		if match(e) {
			return e
		}
	}
	h.t.Fatalf("run %s: no matching event within %s; events: %s", runID, within, Types(seen))
	return protocol.Envelope{}
}

// Control sends m through the runtime for the owner of the runs Start
// starts.
func (h *Harness) Control(ctx context.Context, m protocol.Control) (protocol.ControlResult, error) {
	return h.RT.Control(ctx, adapter.NewControl(&m, "local", ""))
}

// Cancel cancels a run and fails the test unless the cancel is accepted.
func (h *Harness) Cancel(runID string) {
	h.t.Helper()
	res, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpCancel, RunID: runID})
	if err != nil || !res.Accepted {
		h.t.Fatalf("cancel: %+v, %v", res, err)
	}
}

// JournalBytes returns the journal file's bytes.
func (h *Harness) JournalBytes() []byte {
	h.t.Helper()
	return JournalBytes(h.t, h.Path)
}

// JournalBytes reads every file of the bolt journal at path (the journal
// file and its event log), for a search of what was written to disk.
func JournalBytes(t testing.TB, path string) []byte {
	t.Helper()
	files, err := bolt.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// Types lists event types, for messages.
func Types(events []protocol.Envelope) string {
	s := make([]string, len(events))
	for i, e := range events {
		s[i] = string(e.Type)
	}
	return strings.Join(s, " ")
}

// Terminal checks the run ended with exactly one terminal event, the last,
// of type typ, and returns it.
func Terminal(t testing.TB, events []protocol.Envelope, typ protocol.EventType) protocol.Envelope {
	t.Helper()
	n := 0
	for _, e := range events {
		if e.Terminal {
			n++
		}
	}
	last := events[len(events)-1]
	if n != 1 || !last.Terminal || last.Type != typ {
		t.Fatalf("want exactly one terminal event, %s, last; got %d terminal, events: %s", typ, n, Types(events))
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at %d: not contiguous", e.Seq, i)
		}
	}
	return last
}

// ErrorOf decodes a terminal error event's payload.
func ErrorOf(t testing.TB, e protocol.Envelope) protocol.ErrorPayload {
	t.Helper()
	p, err := protocol.DecodePayload[protocol.ErrorPayload](&e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Secret is a real-looking credential an upstream may spill, and the text
// around it that makes the journal's redaction recognize it.
type Secret struct {
	Name, Value string
	Context     string // Value in the text an upstream would write
}

// Secrets are real-looking credentials of every shape the journal redacts
// (each value unique, so finding it anywhere is a leak).
var Secrets = []Secret{
	{"openai key", "sk-proj-Q3vT8mWz1LpR7xKc2NbY9fHd4JsA", "your key is sk-proj-Q3vT8mWz1LpR7xKc2NbY9fHd4JsA keep it safe"},
	{"github token", "ghp_R8tY2uI6oP0aS4dF8gH2jK6lZ0xC4vB8nM2q", "export GITHUB_TOKEN=ghp_R8tY2uI6oP0aS4dF8gH2jK6lZ0xC4vB8nM2q"},
	{"aws key", "AKIAQ7XW3RZ5T2YV8NPL", "aws_access_key_id AKIAQ7XW3RZ5T2YV8NPL"},
	{"jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzdmMtZGVwbG95In0.Q2xMzT9fVbR4kW8nJ1pL6sD3gH7yA0cE5uI2oX", "issued eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzdmMtZGVwbG95In0.Q2xMzT9fVbR4kW8nJ1pL6sD3gH7yA0cE5uI2oX for the deploy"},
	{"bearer", "mF9vQ2xL7pZ4tR8wK1nB6cJ3yH5sD0gA", "curl -H 'Authorization: Bearer mF9vQ2xL7pZ4tR8wK1nB6cJ3yH5sD0gA' https://api.example.com"},
	{"password", "Tr0ub4dor-and-3-horses", "logging in with password=Tr0ub4dor-and-3-horses now"},
	{"api key field", "k9-Hq2Lm7Vx4Rt8Zp1Wn", `{"api_key": "k9-Hq2Lm7Vx4Rt8Zp1Wn"}`},
}

// Marker is plain text next to the secrets: finding it proves a search
// looked at plaintext.
const Marker = "REDACTION-MARKER-visible"

// SecretText is a text holding every secret in context, and the marker.
func SecretText() string {
	parts := []string{Marker}
	for _, s := range Secrets {
		parts = append(parts, s.Context)
	}
	return strings.Join(parts, " \n") + " " + Marker + " end."
}

// Chunks cuts s into pieces of 1 to max bytes (on rune boundaries), the way
// a model streams tokens: seed picks the cuts.
func Chunks(s string, max int, seed uint64) []string {
	var out []string
	r := seed*6364136223846793005 + 1442695040888963407
	for len(s) > 0 {
		r = r*6364136223846793005 + 1442695040888963407
		n := 1 + int((r>>33)%uint64(max))
		if n > len(s) {
			n = len(s)
		}
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// NoLeak fails the test if any secret's value is in the journal file, the
// logs or an event's payload (what a tab's frames carry), and checks the
// search saw plaintext: the marker must be in the journal file and in an
// event (pass wantMarker false where the upstream's text is not journaled).
func NoLeak(t testing.TB, h *Harness, events []protocol.Envelope, wantMarker bool) {
	t.Helper()
	NoLeakIn(t, h.JournalBytes(), h.Logs.String(), events, wantMarker)
}

// NoLeakIn is NoLeak over a journal file's bytes and logs.
func NoLeakIn(t testing.TB, file []byte, logs string, events []protocol.Envelope, wantMarker bool) {
	t.Helper()
	var payloads []byte
	for _, e := range events {
		payloads = append(append(payloads, e.Payload...), '\n')
	}
	for _, s := range Secrets {
		for where, b := range map[string]string{"the journal file": string(file), "the logs": logs, "an event": string(payloads)} {
			if strings.Contains(b, s.Value) {
				t.Errorf("the %s (%s) is in %s", s.Name, s.Value, where)
			}
		}
	}
	if wantMarker && (!bytes.Contains(file, []byte(Marker)) || !bytes.Contains(payloads, []byte(Marker))) {
		t.Errorf("the marker is not in the journal file and events: the search did not see plaintext")
	}
	if t.Failed() {
		t.Logf("events:\n%s\nlogs:\n%s", payloads, logs)
	}
}

// StreamText joins the text of the run's events of type typ (token.delta,
// reasoning.delta, tool.updated).
func StreamText(t testing.TB, events []protocol.Envelope, typ protocol.EventType) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		if e.Type != typ {
			continue
		}
		var p struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		b.WriteString(p.Text)
	}
	return b.String()
}
