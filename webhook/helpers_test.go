package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/webhook"
)

// testSecret is a whsec_ secret of 36 bytes.
var testKey = []byte("runhub-webhook-test-secret-32-bytes!")
var testSecret = "whsec_" + base64.StdEncoding.EncodeToString(testKey)

// store is the journal a test works on: the outbox-capable backend.
type store interface {
	journal.Store
	webhook.Outbox
}

func openBolt(t *testing.T, dir string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(dir, "journal.db"), bolt.Options{Outbox: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newRun makes session sid with run rid.
func newRun(t *testing.T, s journal.Store, sid, rid string) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "alice", Title: "title of " + sid}); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}

func appendEv(t *testing.T, s journal.Store, sid, rid string, typ protocol.EventType, p any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent(rid, sid, typ, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Append(context.Background(), e, "")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func approval(t *testing.T, s journal.Store, sid, rid string) protocol.Envelope {
	return appendEv(t, s, sid, rid, protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{
		ApprovalID: "a1", Summary: "delete the files?", Risk: "high", Choices: []string{"once", "deny"}})
}

func done(t *testing.T, s journal.Store, sid, rid string) protocol.Envelope {
	return appendEv(t, s, sid, rid, protocol.EventDone, protocol.DonePayload{Status: "completed",
		Usage: &protocol.Usage{InputTokens: 3, OutputTokens: 5, Model: "sim"}})
}

// request is one request a receiver saw.
type request struct {
	id, ts, sig string
	body        []byte
	answered    int
}

// receiver is a local webhook receiver whose answers a test scripts.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	reqs   []request
	answer func(n int, r *http.Request) int // n: 1-based index of the request with this id
	perID  map[string]int
	block  chan struct{} // when set, requests wait until it closes
	got    chan struct{}
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request) int) *receiver {
	rc := &receiver{t: t, answer: answer, perID: map[string]int{}, got: make(chan struct{}, 1000)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	block := rc.block
	id := r.Header.Get(webhook.HeaderID)
	rc.perID[id]++
	n := rc.perID[id]
	code := 204
	if rc.answer != nil {
		code = rc.answer(n, r)
	}
	rc.reqs = append(rc.reqs, request{id: id, ts: r.Header.Get(webhook.HeaderTimestamp),
		sig: r.Header.Get(webhook.HeaderSignature), body: body, answered: code})
	rc.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}
	if err := webhook.Verify(testKey, r.Header, body, time.Now()); err != nil {
		rc.t.Errorf("request %s: %v", id, err)
	}
	w.WriteHeader(code)
	rc.got <- struct{}{}
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

// acked is the requests answered 2xx, by webhook-id.
func (rc *receiver) acked() map[string]int {
	out := map[string]int{}
	for _, r := range rc.requests() {
		if r.answered >= 200 && r.answered < 300 {
			out[r.id]++
		}
	}
	return out
}

// eventually polls cond until it holds or 20s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fast is a retry schedule for tests.
var fast = webhook.Retry{Min: 20 * time.Millisecond, Max: 80 * time.Millisecond, GiveUp: time.Hour}

// logBuffer collects a sender's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSender starts a sender on s for endpoints; it stops with the test.
func startSender(t *testing.T, s store, o webhook.Options, eps ...webhook.Endpoint) (*webhook.Sender, *logBuffer, *webhook.Metrics, *prometheus.Registry) {
	t.Helper()
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	m := webhook.NewMetrics(reg)
	o.Endpoints, o.Outbox, o.Journal, o.Wake = eps, s, s, s.SubscribeFeed
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Metrics = m
	if o.Retry == (webhook.Retry{}) {
		o.Retry = fast
	}
	if o.Poll == 0 {
		o.Poll = 20 * time.Millisecond
	}
	sn, err := webhook.New(o)
	if err != nil {
		t.Fatal(err)
	}
	sn.Start()
	t.Cleanup(sn.Stop)
	return sn, logs, m, reg
}

func endpoint(url string, events ...string) webhook.Endpoint {
	return webhook.Endpoint{Name: "test", URL: url, Secret: testSecret, Events: events}
}

// metric reads a counter or gauge of reg by name and label value.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, l := range m.GetLabel() {
				ok = ok || l.GetValue() == label
			}
			if !ok {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}
