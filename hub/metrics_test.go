package hub_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/protocol"
)

// metricValue reads one series (name{labels sorted by name}) from the
// registry's exposition; 0 when absent.
func metricValue(t testing.TB, m *metrics.Metrics, series string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			buf.WriteString(mf.GetName())
			if len(s.GetLabel()) > 0 {
				buf.WriteByte('{')
				for i, l := range s.GetLabel() {
					if i > 0 {
						buf.WriteByte(',')
					}
					buf.WriteString(l.GetName() + `="` + l.GetValue() + `"`)
				}
				buf.WriteByte('}')
			}
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
			buf.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		}
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
}

// waitMetric polls a series until it reaches want.
func waitMetric(t testing.TB, m *metrics.Metrics, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, m, series) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", series, metricValue(t, m, series), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The hub counts what its sockets deliver: live events by type, frames and
// their bytes, focus replays and the events replayed from the journal, and
// controls by op and outcome; Stats reports watched sessions and focused
// runs.
func TestMetrics_DeliveryReplayControls(t *testing.T) {
	m := metrics.New("test")
	th := newTestHub(t, hub.Config{Metrics: m})
	tab := th.Dial(t)
	ctx := ctxT(t, time.Minute)

	first := startRun(t, tab, simStart("", 1, 0, `,"tools":0`))
	waitTerminal(t, th, first.RunID)
	if err := tab.Watch(ctx, false, first.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := tab.Focus(ctx, first.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	col.Until(t, tab, 10*time.Second, "replay of the first run", func() bool { return len(col.Replayed) == 1 })
	replayed := len(col.Events)
	if replayed == 0 {
		t.Fatal("nothing replayed")
	}
	if got := metricValue(t, m, "runhub_replayed_events_total"); got != float64(replayed) {
		t.Fatalf("replayed_events_total %v, the tab got %d", got, replayed)
	}
	if got := metricValue(t, m, "runhub_replay_requests_total"); got != 1 {
		t.Fatalf("replay_requests_total %v, want 1", got)
	}

	// A second run streams live to the focused tab.
	run := startRun(t, tab, simStart(first.SessionID, 20, 1, `,"tools":0`))
	col.Until(t, tab, 20*time.Second, "the live run", func() bool { return col.TerminalOf(run.RunID) })
	byType := map[protocol.EventType]int{}
	for _, e := range col.Events {
		byType[e.Type]++
	}
	for typ, n := range byType {
		series := `runhub_events_delivered_total{type="` + string(typ) + `"}`
		waitMetric(t, m, series, float64(n)) // the router counts a live event once it has offered it to every socket
		if got := metricValue(t, m, series); got != float64(n) {
			t.Errorf("%s = %v, the tab got %d", series, got, n)
		}
	}
	if got := metricValue(t, m, `runhub_events_delivered_total{type="token.delta"}`); got < 21 {
		t.Errorf("token.delta delivered %v, want at least 21", got)
	}
	frames := metricValue(t, m, "runhub_socket_frames_written_total")
	written := metricValue(t, m, "runhub_socket_written_bytes_total")
	if frames < 2 || written < frames*20 {
		t.Errorf("frames %v, bytes %v", frames, written)
	}
	waitMetric(t, m, `runhub_controls_total{op="start",status="accepted"}`, 2)

	// A refused control counts under its outcome, an unknown run under
	// not_found.
	if _, err := tab.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: run.RunID}); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: "r_nope"}); err == nil {
		t.Fatal("cancel of an unknown run accepted")
	}
	waitMetric(t, m, `runhub_controls_total{op="cancel",status="not-active"}`, 1)
	waitMetric(t, m, `runhub_controls_total{op="cancel",status="not_found"}`, 1)

	// HTTP starts count too.
	resp, err := http.Post(th.URL+"/v1/sessions/"+first.SessionID+"/runs", "application/json",
		strings.NewReader(`{"message":"hi","metadata":{"sim":{"tokens":1,"token_ms":0,"tools":0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("HTTP start: %d", resp.StatusCode)
	}
	waitMetric(t, m, `runhub_controls_total{op="start",status="accepted"}`, 3)

	st := th.Hub.Stats()
	if st.Watched != 1 || st.FocusedRuns != 1 || st.FocusedSockets != 1 || st.Sockets != 1 {
		t.Fatalf("stats %+v: want 1 watched session, 1 focused run, 1 focused socket, 1 socket", st)
	}
}

// A tab that stops reading is counted once as a slow-consumer drop and,
// when it reads again and is caught up from the journal, as a catch-up.
func TestMetrics_SlowConsumer(t *testing.T) {
	const queue = 64
	m := metrics.New("test")
	lc := net.ListenConfig{Control: sockBuf(syscall.SO_SNDBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	th := newTestHubListener(t, hub.Config{QueueEvents: queue, MaxBatchBytes: 8 << 10, WriteTimeout: 2 * time.Minute, Metrics: m}, ln)
	ctl := th.Dial(t)
	ctx := ctxT(t, 2*time.Minute)
	sess := startRun(t, ctl, simStart("", 1, 0, `,"tools":0`))
	waitTerminal(t, th, sess.RunID)

	dialer := &net.Dialer{Control: sockBuf(syscall.SO_RCVBUF)}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	defer hc.CloseIdleConnections()
	stalled, err := client.Dial(ctx, th.WSURL, client.Options{Inbox: 1, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Focus(ctx, sess.SessionID, "")
	// The focus is in place (its replay has ended) before the run starts:
	// the run's events must reach the tab live, not in a later replay.
	for {
		m, err := stalled.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(*protocol.Replayed); ok {
			break
		}
	}

	// The run waits for an approval first, and the tab reads until it has
	// the request: by then its focus is on the new run and live (the run's
	// start made it read the journal, see router.resubscribe; a tab that
	// stalls while it reads the journal is behind, but fills no queue).
	// Then the tab stops reading and the approval lets 5,000 tokens loose.
	run := startRun(t, ctl, simStart(sess.SessionID, 5000, 0, `,"tools":0,"approval":true`))
	var approvalID string
	for approvalID == "" {
		m, err := stalled.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if em, ok := m.(*protocol.EventMessage); ok && em.Event.Type == protocol.EventApprovalReq {
			p, err := protocol.DecodePayload[protocol.ApprovalRequestedPayload](em.Event)
			if err != nil {
				t.Fatal(err)
			}
			approvalID = p.ApprovalID
		}
	}
	if _, err := ctl.Control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: run.RunID, ApprovalID: approvalID, Choice: "once"}); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, th, run.RunID)
	// The drop is counted when the hub gives up on the tab's queue, which
	// may come a moment after the run's end reached the journal.
	waitMetric(t, m, "runhub_slow_consumer_drops_total", 1)
	if got := metricValue(t, m, "runhub_slow_consumer_catchups_total"); got != 0 {
		t.Fatalf("slow_consumer_catchups_total %v before the tab read again", got)
	}
	col := newCollector()
	col.Until(t, stalled, time.Minute, "stalled tab catches up", func() bool { return col.TerminalOf(run.RunID) })
	waitMetric(t, m, "runhub_slow_consumer_catchups_total", 1)
	if drops, ups := metricValue(t, m, "runhub_slow_consumer_drops_total"), metricValue(t, m, "runhub_slow_consumer_catchups_total"); ups > drops {
		t.Fatalf("%v catch-ups for %v drops", ups, drops)
	}
}

// A control that fails inside the hub is logged with the socket's conn_id
// and the control's session_id and run_id (never the journal's error text
// to the tab), and counted under its error code.
func TestMetrics_ControlFailureLoggedWithIDs(t *testing.T) {
	var logs syncBuf
	m := metrics.New("test")
	th := newTestHubRuntime(t, hub.Config{Metrics: m, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, runtimeOpts{Faults: true})
	tab := th.Dial(t)
	ctx := ctxT(t, 30*time.Second)
	run := startRun(t, tab, simStart("", 1, 0, `,"tools":0`))
	waitTerminal(t, th, run.RunID)
	th.Fault.Failing.Store(true)
	defer th.Fault.Failing.Store(false)
	if _, err := tab.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: run.RunID}); err == nil {
		t.Fatal("cancel with the journal failing did not fail")
	}
	waitMetric(t, m, `runhub_controls_total{op="cancel",status="internal"}`, 1)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `"msg":"control failed"`) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"control failed"`) {
			line = l
		}
	}
	for _, want := range []string{`"conn_id":"c_`, `"run_id":"` + run.RunID + `"`, `"op":"cancel"`, `"code":"internal"`} {
		if !strings.Contains(line, want) {
			t.Fatalf("control failure log %q lacks %s", line, want)
		}
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
