package hub

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Config configures a Hub. Zero fields take the documented defaults.
type Config struct {
	// HubID names this replica in welcome messages (default: a new id).
	HubID string
	// MaxFrameBytes bounds one client frame; larger frames close the socket
	// with 1009 (default 1 MiB).
	MaxFrameBytes int64
	// MaxWatch bounds the sessions one socket watches by id (default 1000).
	MaxWatch int
	// QueueEvents bounds the events queued for one socket; past it the socket
	// drops live events and catches up from the journal (default 1024).
	QueueEvents int
	// QueueMessages bounds other queued messages (control results, errors,
	// pongs); past it the socket is closed with 1008 (default 256).
	QueueMessages int
	// MaxBatchBytes bounds one outgoing NDJSON frame (default 256 KiB).
	MaxBatchBytes int
	// StatusInterval is the least time between two status messages of one
	// session that change only its progress (tokens, last_seq,
	// last_event_id, updated_at, progress, usage); the progress is merged
	// into one status per interval. A status whose meaning changes (status,
	// pending prompt, terminal, title, queue, goal, run) goes out at once
	// (default 1 s).
	StatusInterval time.Duration
	// WriteTimeout bounds one frame write; a socket whose write exceeds it is
	// closed (default 10 s). Danger: too small closes tabs on slow links.
	WriteTimeout time.Duration
	// HelloTimeout bounds the time from the upgrade to the first valid
	// hello; a socket that has not sent one by then gets error
	// protocol_error and close 4400 (default 10 s; negative: no bound).
	// Danger: without it a socket that never says hello holds its slot,
	// goroutine and buffers for as long as the peer keeps TCP open.
	HelloTimeout time.Duration
	// ReplayPage is the journal page size of catch-up reads (default 256).
	ReplayPage int
	// GoawayReconnect is the reconnect_after_ms sent in goaway (default 1000).
	GoawayReconnect time.Duration
	// OriginPatterns are extra allowed browser origins of the WebSocket
	// upgrade and the HTTP API: host patterns (path.Match, case-insensitive),
	// or scheme://host patterns, as websocket.AcceptOptions. Same-origin and
	// requests without an Origin header are always allowed; any other
	// origin gets 403 forbidden (default: none). Danger: a pattern such as
	// "*" lets any web page drive the hub with a visitor's credentials.
	OriginPatterns []string
	// Authenticator verifies bearer tokens (hello.token, Authorization).
	// Nil runs the hub open: every caller is subject OpenSubject ("local")
	// and tokens are ignored. Danger: open is for a loopback address only.
	Authenticator Authenticator
	// MessagesPerSecond is the sustained rate of client messages one socket
	// may send (a token bucket of MessageBurst); a message over it is
	// refused with error rate_limited, and a socket that has more than
	// MessageBurst messages refused within one second is closed with 1008
	// (default 50; negative: no limit).
	MessagesPerSecond float64
	// MessageBurst is the bucket size of MessagesPerSecond (default 100).
	MessageBurst int
	// MaxSocketsPerSubject bounds the open sockets of one subject on this
	// hub (on all hubs, with a SocketCounter); the hello past it gets error limit_exceeded and close 1008
	// (default 64 with an Authenticator, no limit in open mode; negative: no
	// limit).
	MaxSocketsPerSubject int
	// SocketCounter, when set, counts sockets per subject over every hub
	// that shares it (hub/redislimit), so that MaxSocketsPerSubject bounds
	// a subject in the whole deployment; nil: per hub. Should it fail, the
	// socket is admitted under this hub's own count.
	SocketCounter SocketCounter
	// PresenceStore, when set, shares who watches and focuses each session
	// with every hub that shares it (hub/redispresence), so that a
	// session's presence counts the tabs of all replicas; nil: this hub's
	// tabs only.
	PresenceStore PresenceStore
	// MaxRunsPerSubject bounds the active runs of one subject (sessions
	// with a run not yet ended); a start (or a queue or goal control that
	// would start a run on an idle session) past it gets limit_exceeded
	// (default 32 with an Authenticator, no limit in open mode; negative: no
	// limit). Replicas count from the shared journal, so concurrent starts
	// through different hubs may overshoot by their number.
	MaxRunsPerSubject int
	// SSEKeepAlive is how often every SSE stream (the run events, the
	// AG-UI export and run endpoint, the AI SDK chat streams) sends a
	// keep-alive comment, so that proxies do not close a quiet stream
	// (default 15 s; negative: none).
	SSEKeepAlive time.Duration
	// Capabilities tells what the runs of each profile and provider can
	// do (adapter/profile's Config.Capabilities): a session's
	// active_controls offer only what the driver of its latest run (or,
	// before any run, a start's default) can do. Nil: every control.
	Capabilities adapter.Capabilities
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Metrics counts deliveries, frames, replays, slow consumers and
	// controls (nil: not counted). Stats feeds its gauges.
	Metrics *metrics.Metrics
}

func (c *Config) defaults() {
	if c.HubID == "" {
		c.HubID = adapter.NewID("h_")
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 1 << 20
	}
	if c.MaxWatch == 0 {
		c.MaxWatch = 1000
	}
	if c.QueueEvents == 0 {
		c.QueueEvents = 1024
	}
	if c.QueueMessages == 0 {
		c.QueueMessages = 256
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 256 << 10
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.HelloTimeout == 0 {
		c.HelloTimeout = 10 * time.Second
	}
	if c.ReplayPage == 0 {
		c.ReplayPage = 256
	}
	if c.GoawayReconnect == 0 {
		c.GoawayReconnect = time.Second
	}
	if c.SSEKeepAlive == 0 {
		c.SSEKeepAlive = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MessagesPerSecond == 0 {
		c.MessagesPerSecond = 50
	}
	if c.MessageBurst <= 0 {
		c.MessageBurst = 100
	}
	if c.MaxSocketsPerSubject == 0 && c.Authenticator != nil {
		c.MaxSocketsPerSubject = 64
	}
	if c.MaxRunsPerSubject == 0 && c.Authenticator != nil {
		c.MaxRunsPerSubject = 32
	}
}

// Hub serves tabs. Create it with New, serve ServeWS and Routes, stop it
// with Shutdown.
type Hub struct {
	cfg     Config
	store   journal.Store
	runtime adapter.RuntimeAdapter
	log     *slog.Logger

	tracker  *tracker
	router   *router
	presence *presence
	senders  []*sender     // write for the sockets, one per core (sender.go)
	nextSnd  atomic.Uint32 // the sender the next socket gets, modulo len(senders)
	env      socketEnv     // what its sockets use of it

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the hub owns, sockets included

	mu       sync.Mutex
	conns    map[*conn]struct{}
	sockets  map[string]int // welcomed sockets by subject
	draining bool
	stopOnce sync.Once

	starts keyedMutex // serializes run-limit checks per subject

	aguiRuns *boundedMap[aguiTurn] // AG-UI run ids of resumed turns (aguirun.go)
}

// New starts a hub over a journal and a runtime.
func New(cfg Config, store journal.Store, runtime adapter.RuntimeAdapter) *Hub {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{cfg: cfg, store: store, runtime: runtime, log: cfg.Logger,
		ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{}, sockets: map[string]int{},
		aguiRuns: newBoundedMap[aguiTurn](maxAGUIRuns)}
	h.router = newRouter(h)
	h.tracker = newTracker(h)
	h.presence = newPresence(h)
	h.senders = newSenders()
	h.env = socketEnv{cfg: &h.cfg, log: h.log, metrics: h.cfg.Metrics, store: store,
		router: h.router, tracker: h.tracker, presence: h.presence, hub: h}
	h.tracker.start()
	h.router.start()
	h.presence.start()
	for _, s := range h.senders {
		s.start()
	}
	return h
}

// ID returns the hub's replica id.
func (h *Hub) ID() string { return h.cfg.HubID }

// Draining reports whether Shutdown has begun.
func (h *Hub) Draining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}

// ServeWS upgrades GET /v1/ws to a tab socket.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request) {
	if h.Draining() {
		writeJSONError(w, http.StatusServiceUnavailable, protocol.Errorf(protocol.CodeUnavailable, "the hub is shutting down"))
		return
	}
	if err := originAllowed(r, h.cfg.OriginPatterns); err != nil {
		h.log.Info("websocket upgrade refused: cross-origin", "origin", r.Header.Get("Origin"), "host", r.Host)
		writeJSONError(w, http.StatusForbidden, errOrigin)
		return
	}
	// A non-browser client may authenticate the upgrade itself; a browser
	// sends its token in hello.
	var pre *Principal
	if token, ok := bearer(r); ok && h.cfg.Authenticator != nil {
		p, err := h.authenticate(token)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runhub", error="invalid_token"`)
			writeJSONError(w, http.StatusUnauthorized, err.(*protocol.Error))
			return
		}
		pre = &p
	}
	hj := &socketHijacker{ResponseWriter: w}
	ws, err := websocket.Accept(hj, r, &websocket.AcceptOptions{
		Subprotocols:   []string{protocol.SubprotocolV1},
		OriginPatterns: h.cfg.OriginPatterns,
	})
	if err != nil {
		return // Accept has written the HTTP error
	}
	if ws.Subprotocol() != protocol.SubprotocolV1 {
		ws.Close(websocket.StatusPolicyViolation, "subprotocol runhub.v1 required")
		return
	}
	ws.SetReadLimit(h.cfg.MaxFrameBytes)
	c := newConn(h, ws, pre)
	c.wire = hj.wire
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		ws.Close(websocket.StatusServiceRestart, "shutting down")
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	// The socket lives on its own goroutine: net/http lets go of a hijacked
	// connection when the handler returns, so returning frees the request
	// and this goroutine's stack (grown by routing and the upgrade) for as
	// long as the tab stays connected.
	go func() {
		defer h.wg.Done()
		c.serve()
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.leave()
	}()
}

// Conns returns the number of open sockets.
func (h *Hub) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Shutdown sends goaway to every socket, closes them with 1012 and stops the
// hub's goroutines. Runs are not touched: the runtime decides their fate.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.goaway("server shutting down", h.cfg.GoawayReconnect)
	}
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, c := range conns {
			c.abort()
		}
	}
	h.stopOnce.Do(func() {
		h.presence.stop()
		h.tracker.stop()
		h.router.stop()
		for _, s := range h.senders {
			s.stop()
		}
		h.cancel()
	})
	h.wg.Wait()
	return err
}

// Stats reports queue depths; it takes every socket's lock briefly.
func (h *Hub) Stats() metrics.HubStats {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	s := metrics.HubStats{Sockets: len(conns)}
	for _, c := range conns {
		c.out.addStats(&s)
	}
	h.tracker.mu.Lock()
	s.Watched = len(h.tracker.sessions)
	h.tracker.mu.Unlock()
	h.router.mu.RLock()
	for _, f := range h.router.feeds {
		if f.runID != "" {
			s.FocusedRuns++
		}
	}
	h.router.mu.RUnlock()
	return s
}
