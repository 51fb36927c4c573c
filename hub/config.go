package hub

import (
	"context"
	"log/slog"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/metrics"
)

// What a Hub is configured with: Config and the interfaces it takes
// (Authenticator, SocketCounter, PresenceStore), with Principal, the
// identity an Authenticator returns. Every other file may use it; it uses
// none of them.

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
	// FrameTimeout bounds a client frame from its first byte to its last,
	// a message in fragments from its first byte to its last fragment; a
	// socket past it is closed with 1008 (default 10 s; negative: none).
	FrameTimeout time.Duration
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
	// SSEKeepAlive is how often every SSE stream an edge serves (through
	// httpx.StartSSE) sends a keep-alive comment, so that proxies do not close a quiet stream
	// (default 15 s; negative: none).
	SSEKeepAlive time.Duration
	// Capabilities tells what the runs of each profile and provider can
	// do (adapter/profile's Config.Capabilities): a session's
	// active_controls offer only what the driver of its latest run (or,
	// before any run, a start's default) can do. Nil: every control.
	Capabilities adapter.Capabilities
	// NoRunner, when set, reports whether a run queued now waits for a
	// runner process while none has been alive lately (runtime=runners
	// with no `hub runner`), and what to do about it. A queued run's start
	// answer, its status and its session's status then carry waiting:
	// "runner" (and the start the message). It is called for queued runs
	// only; it must be quick (cached) and safe for concurrent use.
	NoRunner func(ctx context.Context) (none bool, message string)
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
	if c.FrameTimeout == 0 {
		c.FrameTimeout = 10 * time.Second
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

// Principal is an authenticated caller. Subject owns the sessions it
// creates and reaches only those; an Admin may also read (watch, focus,
// status, events) any session, but controls only its own.
type Principal struct {
	Subject string
	Admin   bool
	// Expires is when the credentials stop being valid (zero: never). A
	// socket is closed with 4401 then unless a fresh hello renewed them.
	Expires time.Time
}

// Authenticator verifies a bearer token: hello.token on the socket, or the
// Authorization header of an HTTP request or of the WebSocket upgrade. An
// error should be a *protocol.Error with CodeUnauthorized and a message
// safe to show (hub/auth's Verifier is one); any other error is answered
// "invalid token". Implementations must be safe for concurrent use.
type Authenticator interface {
	Authenticate(token string) (Principal, error)
}

// SocketCounter counts the open sockets of each subject over every hub
// sharing it; see Config.SocketCounter.
type SocketCounter interface {
	// Claim counts socket id of subject unless the subject already has
	// limit open sockets (limit ≤ 0: no bound); it reports whether it did.
	Claim(ctx context.Context, subject, id string, limit int) (bool, error)
	// Release uncounts a claimed socket.
	Release(subject, id string)
}

// PresenceStore shares presence entries among hubs (hub/redispresence);
// Config.PresenceStore nil counts this hub's own tabs only. An entry is
// opaque to the store.
type PresenceStore interface {
	// Put replaces this hub's entry of each target (an empty one removes
	// it), keeps them alive until replaced, and announces the targets to
	// the other hubs. Entries of a hub that stops renewing lapse.
	Put(ctx context.Context, entries map[string][]byte) error
	// Get returns the live entries of every hub, this one's included, of
	// each target.
	Get(ctx context.Context, targets []string) (map[string][][]byte, error)
	// Subscribe calls fn with every target another hub announces, until
	// cancel; fn must not block.
	Subscribe(fn func(target string)) (cancel func())
}
