// Package metrics holds runhub's Prometheus metrics. A process makes one
// Metrics (New) with a registry of its own — nothing is registered on the
// global default registry — and hands it to the parts that count: the hub
// (hub.Config.Metrics), the journal decorator and the Redis hook of
// cmd/hub. Every method is safe on a nil *Metrics (it does nothing), so a
// part built without metrics pays one nil check.
//
// Names follow Prometheus conventions (runhub_ prefix, _total counters,
// _seconds and _bytes units) and every label has a bounded set of values:
// event types, terminal states, control ops and statuses, journal
// operations, Redis error kinds, HTTP route patterns — never a run,
// session or socket id. Label children of the hot paths (events by type)
// are resolved once in New, so counting an event is a map lookup and an
// atomic add.
//
// docs/operations.md lists every metric and what it means.
package metrics

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/runhub/runhub/protocol"
)

// Namespace prefixes every runhub metric.
const Namespace = "runhub"

// Other is the label value of anything outside a label's known set (an
// unknown event type, op or status), so a label never grows unbounded.
const Other = "other"

// Journal operations (label op of the journal metrics).
const (
	OpAppend     = "append"
	OpRead       = "read"     // Log.Read: a page of a run's events
	OpRun        = "run"      // Log.Run: a run's meta
	OpSession    = "session"  // Registry.Session
	OpSessions   = "sessions" // Registry.Sessions: an owner's list
	OpActiveRuns = "active_runs"
)

// Redis error kinds (label kind of runhub_redis_errors_total).
const (
	RedisTimeout = "timeout" // a deadline passed (command or dial)
	RedisNetwork = "network" // the connection failed: refused, reset, closed
	RedisReply   = "reply"   // Redis answered an error (READONLY, OOM, LOADING, …)
)

// terminalStates are the run states a terminal event ends a run in.
var terminalStates = []protocol.Status{protocol.StatusCompleted, protocol.StatusCancelled,
	protocol.StatusFailed, protocol.StatusExpired, protocol.StatusInterrupted}

var (
	controlOps = []string{protocol.OpStart, protocol.OpCancel, protocol.OpApprove,
		protocol.OpClarify, protocol.OpQueue, protocol.OpGoal}
	readOps = []string{OpRead, OpRun, OpSession, OpSessions, OpActiveRuns}
)

// latencyBuckets suit a journal write or read: 50 µs (Redis on a LAN, a
// cached bbolt read) to 2.5 s (a stalled fsync or a Redis failover).
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// Metrics is one process's metrics. Make it with New.
type Metrics struct {
	reg *prometheus.Registry

	// hub: sockets and delivery
	delivered      map[protocol.EventType]prometheus.Counter
	deliveredOther prometheus.Counter
	frames         prometheus.Counter
	frameBytes     prometheus.Counter
	replays        prometheus.Counter
	replayed       prometheus.Counter
	slowDrops      prometheus.Counter
	slowCatchUps   prometheus.Counter
	controls       *prometheus.CounterVec
	httpRequests   *prometheus.CounterVec

	// journal
	appended      map[protocol.EventType]prometheus.Counter
	appendedOther prometheus.Counter
	outcomes      map[protocol.Status]prometheus.Counter
	appendSeconds prometheus.Observer
	readSeconds   map[string]prometheus.Observer
	journalErrors map[string]prometheus.Counter

	// Redis and runners
	redisErrors     map[string]prometheus.Counter
	redisReconnects prometheus.Counter
	leaseExpiries   prometheus.Counter
	fenced          prometheus.Counter
}

// New makes a process's metrics on a new registry, with the Go runtime and
// process collectors and runhub_build_info{version}.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{reg: reg}
	f := factory{reg}

	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels name the build.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}}, func() float64 { return 1 }))

	delivered := f.counterVec("events_delivered_total", "Events queued to tab sockets (live and replayed), by event type.", "type")
	appended := f.counterVec("events_appended_total", "Events this process appended to the journal, by event type (an idempotent retry of a stored event is not counted).", "type")
	m.delivered, m.appended = map[protocol.EventType]prometheus.Counter{}, map[protocol.EventType]prometheus.Counter{}
	for _, t := range protocol.EventTypes() {
		m.delivered[t] = delivered.WithLabelValues(string(t))
		m.appended[t] = appended.WithLabelValues(string(t))
	}
	m.deliveredOther, m.appendedOther = delivered.WithLabelValues(Other), appended.WithLabelValues(Other)

	m.frames = f.counter("socket_frames_written_total", "WebSocket frames written to tabs (one frame is an NDJSON batch of messages).")
	m.frameBytes = f.counter("socket_written_bytes_total", "Bytes of WebSocket frames written to tabs (payload, without framing).")
	m.replays = f.counter("replay_requests_total", "Focus requests: each replays the session's events from the journal (from a cursor or the latest run) before live delivery.")
	m.replayed = f.counter("replayed_events_total", "Events sent to tabs from journal reads (focus replays and slow-consumer catch-ups) rather than live.")
	m.slowDrops = f.counter("slow_consumer_drops_total", "Times a tab's event queue was full: live delivery to it stopped and it catches up from the journal.")
	m.slowCatchUps = f.counter("slow_consumer_catchups_total", "Slow tabs that caught up from the journal and resumed live delivery.")
	m.controls = f.counterVec("controls_total", "Controls (WebSocket and HTTP) by op and outcome: a ControlResult status (accepted, not-active, expired, conflict, unsupported) or an error code.", "op", "status")
	for _, op := range controlOps {
		m.controls.WithLabelValues(op, protocol.ResultAccepted) // shown from the start, at 0
	}
	m.httpRequests = f.counterVec("http_requests_total", "HTTP requests by method, route pattern and status code.", "method", "route", "code")

	outcomes := f.counterVec("runs_ended_total", "Runs whose terminal event this process journaled, by terminal state.", "state")
	m.outcomes = map[protocol.Status]prometheus.Counter{}
	for _, s := range terminalStates {
		m.outcomes[s] = outcomes.WithLabelValues(string(s))
	}

	appendSec := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "journal_append_duration_seconds",
		Help: "Latency of one journal append (durable when it returns), including the backend's batching.", Buckets: latencyBuckets})
	reg.MustRegister(appendSec)
	m.appendSeconds = appendSec
	readSec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "journal_read_duration_seconds",
		Help: "Latency of journal reads by operation: read (a page of events), run, session, sessions, active_runs.", Buckets: latencyBuckets}, []string{"op"})
	reg.MustRegister(readSec)
	m.readSeconds = map[string]prometheus.Observer{}
	for _, op := range readOps {
		m.readSeconds[op] = readSec.WithLabelValues(op)
	}
	jerr := f.counterVec("journal_errors_total", "Journal operations that failed (not counting not-found, terminal and cancelled), by operation.", "op")
	m.journalErrors = map[string]prometheus.Counter{}
	for _, op := range append([]string{OpAppend}, readOps...) {
		m.journalErrors[op] = jerr.WithLabelValues(op)
	}

	rerr := f.counterVec("redis_errors_total", "Redis commands and dials that failed, by kind: timeout, network, reply.", "kind")
	m.redisErrors = map[string]prometheus.Counter{}
	for _, k := range []string{RedisTimeout, RedisNetwork, RedisReply} {
		m.redisErrors[k] = rerr.WithLabelValues(k)
	}
	m.redisReconnects = f.counter("redis_reconnects_total", "Connections to Redis made again after a connection failed (recoveries from an outage or a failover).")
	m.leaseExpiries = f.counter("lease_expiries_total", "Runs this process's reaper ended as interrupted because their executor stopped renewing its lease.")
	m.fenced = f.counter("journal_appends_fenced_total", "Appends the journal refused because the run had already ended: the late writes of an executor whose run another process ended (its lease lapsed and a reaper journaled interrupted), or a reaper another was first to.")
	return m
}

type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

// Registry returns the process's registry (to register more collectors,
// or to gather in tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// GaugeFunc registers a gauge runhub_<name> whose value fn computes at
// each scrape (fn must be cheap and safe for concurrent use).
func (m *Metrics) GaugeFunc(name, help string, fn func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, fn))
}

// CounterFunc registers a counter runhub_<name> whose value fn computes
// at each scrape (fn must be cheap, safe for concurrent use and never
// decrease).
func (m *Metrics) CounterFunc(name, help string, fn func() float64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, fn))
}

// EventDelivered counts an event queued to a tab socket; replayed marks
// one read from the journal rather than delivered live.
func (m *Metrics) EventDelivered(t protocol.EventType, replayed bool) {
	if m == nil {
		return
	}
	if c, ok := m.delivered[t]; ok {
		c.Inc()
	} else {
		m.deliveredOther.Inc()
	}
	if replayed {
		m.replayed.Inc()
	}
}

// EventsDelivered counts one live event queued to n tab sockets at once
// (one update of the shared counter per event, not one per socket).
func (m *Metrics) EventsDelivered(t protocol.EventType, n int) {
	if m == nil || n == 0 {
		return
	}
	if c, ok := m.delivered[t]; ok {
		c.Add(float64(n))
	} else {
		m.deliveredOther.Add(float64(n))
	}
}

// FramesWritten counts n frames of bytes bytes in all written to tabs.
func (m *Metrics) FramesWritten(n, bytes int) {
	if m == nil || n == 0 {
		return
	}
	m.frames.Add(float64(n))
	m.frameBytes.Add(float64(bytes))
}

// FrameWritten counts one frame of n bytes written to a tab.
func (m *Metrics) FrameWritten(n int) {
	if m == nil {
		return
	}
	m.frames.Inc()
	m.frameBytes.Add(float64(n))
}

// ReplayRequested counts a focus request (a replay from the journal).
func (m *Metrics) ReplayRequested() {
	if m == nil {
		return
	}
	m.replays.Inc()
}

// SlowConsumerDropped counts a tab whose event queue filled up.
func (m *Metrics) SlowConsumerDropped() {
	if m == nil {
		return
	}
	m.slowDrops.Inc()
}

// SlowConsumerCaughtUp counts a slow tab back on live delivery.
func (m *Metrics) SlowConsumerCaughtUp() {
	if m == nil {
		return
	}
	m.slowCatchUps.Inc()
}

// Control counts a control's outcome: its result status, or the code of
// the error that answered it (err's *protocol.Error code; internal for any
// other error).
func (m *Metrics) Control(op, status string, err error) {
	if m == nil {
		return
	}
	if err != nil {
		status = string(protocol.CodeOf(err))
	}
	m.controls.WithLabelValues(bounded(op, controlOps), boundedStatus(status)).Inc()
}

// HTTPRequest counts an HTTP request by method, route pattern (never the
// raw path: it holds ids) and status code.
func (m *Metrics) HTTPRequest(method, route string, code int) {
	if m == nil {
		return
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = Other
	}
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
}

// EventAppended counts an event this process journaled and, for a
// terminal event, the run's outcome.
func (m *Metrics) EventAppended(e *protocol.Envelope) {
	if m == nil {
		return
	}
	if c, ok := m.appended[e.Type]; ok {
		c.Inc()
	} else {
		m.appendedOther.Inc()
	}
	if e.Terminal {
		if c, ok := m.outcomes[TerminalState(e)]; ok {
			c.Inc()
		}
	}
}

// JournalAppend observes an append's latency and counts a failure.
func (m *Metrics) JournalAppend(d time.Duration, failed bool) {
	if m == nil {
		return
	}
	m.appendSeconds.Observe(d.Seconds())
	if failed {
		m.journalErrors[OpAppend].Inc()
	}
}

// AppendFenced counts an append the journal refused because its run had
// ended (journal.ErrTerminal).
func (m *Metrics) AppendFenced() {
	if m == nil {
		return
	}
	m.fenced.Inc()
}

// JournalRead observes a read's latency (op: OpRead, OpRun, OpSession,
// OpSessions, OpActiveRuns) and counts a failure.
func (m *Metrics) JournalRead(op string, d time.Duration, failed bool) {
	if m == nil {
		return
	}
	if o, ok := m.readSeconds[op]; ok {
		o.Observe(d.Seconds())
	}
	if failed {
		if c, ok := m.journalErrors[op]; ok {
			c.Inc()
		}
	}
}

// RedisError counts a failed Redis command or dial of kind RedisTimeout,
// RedisNetwork or RedisReply.
func (m *Metrics) RedisError(kind string) {
	if m == nil {
		return
	}
	if c, ok := m.redisErrors[kind]; ok {
		c.Inc()
	}
}

// RedisReconnected counts a connection made again after a failure.
func (m *Metrics) RedisReconnected() {
	if m == nil {
		return
	}
	m.redisReconnects.Inc()
}

// LeaseExpired counts a run the reaper ended because its lease lapsed.
func (m *Metrics) LeaseExpired() {
	if m == nil {
		return
	}
	m.leaseExpiries.Inc()
}

// TerminalState is the state a terminal event ends its run in (as
// session.Run folds it): done completed, cancelled cancelled, error
// interrupted, expired (code timeout) or failed.
func TerminalState(e *protocol.Envelope) protocol.Status {
	switch e.Type {
	case protocol.EventDone:
		return protocol.StatusCompleted
	case protocol.EventCancelled:
		return protocol.StatusCancelled
	}
	var p struct {
		Code string `json:"code"`
	}
	json.Unmarshal(e.Payload, &p)
	switch p.Code {
	case protocol.ErrorInterrupted:
		return protocol.StatusInterrupted
	case protocol.ErrorTimeout:
		return protocol.StatusExpired
	}
	return protocol.StatusFailed
}

func bounded(v string, known []string) string {
	for _, k := range known {
		if v == k {
			return v
		}
	}
	return Other
}

// controlStatuses are the ControlResult statuses and the error codes a
// control may end with.
var controlStatuses = map[string]bool{
	protocol.ResultAccepted: true, protocol.ResultNotActive: true, protocol.ResultExpired: true,
	protocol.ResultConflict: true, protocol.ResultUnsupported: true,
}

func init() {
	for _, c := range []protocol.Code{protocol.CodeBadRequest, protocol.CodeTooLarge, protocol.CodeBadCursor,
		protocol.CodeNotFound, protocol.CodeConflict, protocol.CodeUnauthorized, protocol.CodeForbidden,
		protocol.CodeRateLimited, protocol.CodeLimitExceeded, protocol.CodeUnsupported, protocol.CodeInternal,
		protocol.CodeUnavailable, protocol.CodeProtocol, protocol.CodeTerminal, protocol.CodeNotActive,
		protocol.CodeSlowConsumer, protocol.CodeInvalidPayload} {
		controlStatuses[string(c)] = true
	}
}

func boundedStatus(s string) string {
	if controlStatuses[s] {
		return s
	}
	return Other
}

// HubStats is a snapshot of a hub's sockets (what hub.Hub.Stats returns;
// MaxQueueEvents is no gauge).
type HubStats struct {
	Sockets        int // open tab sockets
	Watched        int // sessions whose status the hub tracks for its sockets
	FocusedSockets int // sockets with a focused session
	FocusedRuns    int // runs the hub tails for focusing sockets
	Lagging        int // sockets catching up from the journal
	QueuedEvents   int // events queued over all sockets
	MaxQueueEvents int // the longest event queue of one socket
	QueuedBytes    int // bytes queued over all sockets (events, statuses, messages)
}

// HubGauges registers the gauges of a hub's sockets, computed from one
// stats snapshot per scrape.
func (m *Metrics) HubGauges(stats func() HubStats) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&hubCollector{stats: stats})
}

var hubGaugeDescs = []*prometheus.Desc{
	prometheus.NewDesc(Namespace+"_sockets_open", "Open tab sockets (WebSockets).", nil, nil),
	prometheus.NewDesc(Namespace+"_watched_sessions", "Sessions whose status the hub tracks for its sockets' watches.", nil, nil),
	prometheus.NewDesc(Namespace+"_focused_sockets", "Sockets with a focused session.", nil, nil),
	prometheus.NewDesc(Namespace+"_focused_runs", "Runs the hub tails for focusing sockets (one tail per focused session, shared by its sockets).", nil, nil),
	prometheus.NewDesc(Namespace+"_lagging_sockets", "Sockets catching up from the journal (slow consumers and focus replays in progress).", nil, nil),
	prometheus.NewDesc(Namespace+"_socket_queued_events", "Events queued for writing over all sockets.", nil, nil),
	prometheus.NewDesc(Namespace+"_socket_queued_bytes", "Bytes queued for writing over all sockets (events, statuses, messages).", nil, nil),
}

type hubCollector struct{ stats func() HubStats }

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range hubGaugeDescs {
		ch <- d
	}
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for i, v := range []int{s.Sockets, s.Watched, s.FocusedSockets, s.FocusedRuns, s.Lagging, s.QueuedEvents, s.QueuedBytes} {
		ch <- prometheus.MustNewConstMetric(hubGaugeDescs[i], prometheus.GaugeValue, float64(v))
	}
}
