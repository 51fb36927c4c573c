package metrics_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/protocol"
)

// Every metric follows Prometheus' naming conventions (promlint: _total
// counters, base units, help text) and carries the runhub_ prefix.
func TestNamesFollowConventions(t *testing.T) {
	m := metrics.New("test")
	m.GaugeFunc("runs_executing", "Runs executing.", func() float64 { return 0 })
	m.HubGauges(func() metrics.HubStats { return metrics.HubStats{Sockets: 1} })
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		name := mf.GetName()
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		n++
		if !strings.HasPrefix(name, "runhub_") {
			t.Errorf("%s: want the runhub_ prefix", name)
		}
	}
	if n < 15 {
		t.Fatalf("only %d runhub metrics gathered", n)
	}
}

// allowedLabels are the only labels runhub metrics may carry, each with a
// bounded set of values; ids (run, session, socket, request) are never
// labels.
var allowedLabels = map[string]bool{"type": true, "state": true, "op": true, "status": true, "kind": true,
	"method": true, "route": true, "code": true, "version": true, "goversion": true}

// Labels stay bounded whatever the inputs: unknown event types, ops and
// statuses count under "other", and no label is an id.
func TestLabelsAreBounded(t *testing.T) {
	m := metrics.New("test")
	for i := 0; i < 100; i++ {
		id := "r_" + strings.Repeat("x", i)
		m.EventDelivered(protocol.EventType(id), i%2 == 0)
		m.EventAppended(&protocol.Envelope{RunID: id, SessionID: "s_" + id, Type: protocol.EventType(id)})
		m.Control(id, id, nil)
		m.Control(protocol.OpStart, "", errors.New("boom "+id))
		m.JournalRead(id, time.Millisecond, true)
		m.RedisError(id)
		m.HTTPRequest("BREW"+id, "", 418)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "runhub_") {
			continue
		}
		if len(mf.GetMetric()) > 200 {
			t.Errorf("%s: %d series", mf.GetName(), len(mf.GetMetric()))
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if !allowedLabels[l.GetName()] {
					t.Errorf("%s: label %s is not in the bounded set", mf.GetName(), l.GetName())
				}
				if strings.HasPrefix(l.GetValue(), "r_") || strings.HasPrefix(l.GetValue(), "s_") {
					t.Errorf("%s: label %s=%q holds an id", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// Counters count what the hooks report.
func TestCounts(t *testing.T) {
	m := metrics.New("v1.2.3")
	tok := &protocol.Envelope{Type: protocol.EventTokenDelta}
	m.EventDelivered(protocol.EventTokenDelta, false)
	m.EventDelivered(protocol.EventTokenDelta, true)
	m.EventsDelivered(protocol.EventTokenDelta, 3)
	m.EventsDelivered(protocol.EventTokenDelta, 0)
	m.EventsDelivered("x.unknown", 2)
	m.EventAppended(tok)
	for _, e := range []protocol.Envelope{
		{Type: protocol.EventDone, Terminal: true},
		{Type: protocol.EventCancelled, Terminal: true},
		{Type: protocol.EventError, Terminal: true, Payload: []byte(`{"code":"interrupted","terminal":true}`)},
		{Type: protocol.EventError, Terminal: true, Payload: []byte(`{"code":"timeout","terminal":true}`)},
		{Type: protocol.EventError, Terminal: true, Payload: []byte(`{"code":"provider_error","terminal":true}`)},
		{Type: protocol.EventError, Payload: []byte(`{"code":"provider_error","terminal":false}`)},
	} {
		m.EventAppended(&e)
	}
	m.FrameWritten(100)
	m.FrameWritten(23)
	m.FramesWritten(2, 77)
	m.FramesWritten(0, 0)
	m.ReplayRequested()
	m.SlowConsumerDropped()
	m.SlowConsumerCaughtUp()
	m.Control(protocol.OpCancel, protocol.ResultNotActive, nil)
	m.Control(protocol.OpStart, "", protocol.Errorf(protocol.CodeLimitExceeded, "x"))
	m.JournalAppend(3*time.Millisecond, false)
	m.JournalRead(metrics.OpRead, time.Millisecond, false)
	m.RedisError(metrics.RedisNetwork)
	m.RedisReconnected()
	m.LeaseExpired()
	m.AppendFenced()
	m.AppendFenced()
	m.HTTPRequest("GET", "/v1/runs/:rid", 200)

	checks := map[string]float64{
		`runhub_events_delivered_total{type="token.delta"}`:                         5,
		`runhub_events_delivered_total{type="other"}`:                               2,
		`runhub_replayed_events_total`:                                              1,
		`runhub_events_appended_total{type="token.delta"}`:                          1,
		`runhub_events_appended_total{type="error"}`:                                4,
		`runhub_runs_ended_total{state="completed"}`:                                1,
		`runhub_runs_ended_total{state="cancelled"}`:                                1,
		`runhub_runs_ended_total{state="interrupted"}`:                              1,
		`runhub_runs_ended_total{state="expired"}`:                                  1,
		`runhub_runs_ended_total{state="failed"}`:                                   1,
		`runhub_socket_frames_written_total`:                                        4,
		`runhub_socket_written_bytes_total`:                                         200,
		`runhub_replay_requests_total`:                                              1,
		`runhub_slow_consumer_drops_total`:                                          1,
		`runhub_slow_consumer_catchups_total`:                                       1,
		`runhub_controls_total{op="cancel",status="not-active"}`:                    1,
		`runhub_controls_total{op="start",status="limit_exceeded"}`:                 1,
		`runhub_journal_append_duration_seconds_count`:                              1,
		`runhub_journal_read_duration_seconds_count{op="read"}`:                     1,
		`runhub_redis_errors_total{kind="network"}`:                                 1,
		`runhub_redis_reconnects_total`:                                             1,
		`runhub_lease_expiries_total`:                                               1,
		`runhub_journal_appends_fenced_total`:                                       2,
		`runhub_http_requests_total{code="200",method="GET",route="/v1/runs/:rid"}`: 1,
		`runhub_build_info{goversion="` + runtime.Version() + `",version="v1.2.3"}`: 1,
	}
	body := scrape(t, m)
	for series, v := range checks {
		if got, ok := sample(body, series); !ok || got != v {
			t.Errorf("%s = %v (found %v), want %v", series, got, ok, v)
		}
	}
}

// A nil *Metrics is off: every hook is a no-op.
func TestNilIsOff(t *testing.T) {
	var m *metrics.Metrics
	m.EventDelivered(protocol.EventDone, true)
	m.EventAppended(&protocol.Envelope{Type: protocol.EventDone, Terminal: true})
	m.FrameWritten(1)
	m.ReplayRequested()
	m.SlowConsumerDropped()
	m.SlowConsumerCaughtUp()
	m.Control(protocol.OpStart, protocol.ResultAccepted, nil)
	m.HTTPRequest("GET", "/", 200)
	m.AppendFenced()
	m.JournalAppend(time.Second, true)
	m.JournalRead(metrics.OpRun, time.Second, true)
	m.RedisError(metrics.RedisReply)
	m.RedisReconnected()
	m.LeaseExpired()
	m.GaugeFunc("x", "x", func() float64 { return 0 })
}

func TestTerminalState(t *testing.T) {
	for _, c := range []struct {
		e    protocol.Envelope
		want protocol.Status
	}{
		{protocol.Envelope{Type: protocol.EventDone}, protocol.StatusCompleted},
		{protocol.Envelope{Type: protocol.EventCancelled}, protocol.StatusCancelled},
		{protocol.Envelope{Type: protocol.EventError, Payload: []byte(`{"code":"interrupted"}`)}, protocol.StatusInterrupted},
		{protocol.Envelope{Type: protocol.EventError, Payload: []byte(`{"code":"timeout"}`)}, protocol.StatusExpired},
		{protocol.Envelope{Type: protocol.EventError, Payload: []byte(`{"code":"auth"}`)}, protocol.StatusFailed},
		{protocol.Envelope{Type: protocol.EventError, Payload: []byte(`not json`)}, protocol.StatusFailed},
	} {
		if got := metrics.TerminalState(&c.e); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.e.Type, c.e.Payload, got, c.want)
		}
	}
}

// Counting an event is cheap: no allocation on the hot path.
func TestHotPathDoesNotAllocate(t *testing.T) {
	m := metrics.New("test")
	e := &protocol.Envelope{Type: protocol.EventTokenDelta}
	if n := testing.AllocsPerRun(1000, func() {
		m.EventDelivered(protocol.EventTokenDelta, false)
		m.EventAppended(e)
		m.FrameWritten(512)
		m.JournalAppend(time.Millisecond, false)
		m.JournalRead(metrics.OpRead, time.Millisecond, false)
	}); n != 0 {
		t.Fatalf("%v allocations per event", n)
	}
}

func BenchmarkEventDelivered(b *testing.B) {
	m := metrics.New("test")
	b.ReportAllocs()
	for b.Loop() {
		m.EventDelivered(protocol.EventTokenDelta, false)
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return string(b)
}

// sample finds a series (name{labels sorted by name}) in an exposition.
func sample(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}
