// Package durable is the hub's Durable Streams edge: the open protocol of
// append-only, offset-addressed streams over HTTP (PUT create, POST append
// and close, GET catch-up, long-poll and SSE reads, HEAD, DELETE,
// idempotent producers, forks, TTLs) at /v1/stream/*, with every stream
// kept in the one journal (journal.Streams), and every agent run served as
// a read-only JSON stream at /v1/stream/runs/{run_id}.
//
// It is an edge over the core: it imports hub, never the reverse, and it
// needs of the core only what Core declares.
package durable

import (
	"context"
	"iter"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable/subscription"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Core is what the edge needs of the hub's core: the part of hub.API it
// uses (*hub.Hub, hubtest's hub).
type Core interface {
	// CheckOrigin refuses a cross-origin browser request.
	CheckOrigin(next echo.HandlerFunc) echo.HandlerFunc
	// RequireAuth authenticates the request and puts its Principal in the
	// context.
	RequireAuth(next echo.HandlerFunc) echo.HandlerFunc
	// Caller is the request's Principal.
	Caller(c echo.Context) hub.Principal
	// ReadRun is a run's meta, not_found when it is missing or p may not
	// read it.
	ReadRun(ctx context.Context, p hub.Principal, runID string) (journal.RunMeta, error)
	// Observe yields the run's events after seq after, then the live ones
	// until its terminal event.
	Observe(ctx context.Context, runID string, after uint64) iter.Seq2[protocol.Envelope, error]
	// Context ends when the hub shuts down.
	Context() context.Context
	// PublicError turns an internal error into a safe *protocol.Error.
	PublicError(err error) error
}

// Options configure the edge. Zero values take the defaults.
type Options struct {
	// Streams is where the streams live (the journal's).
	Streams journal.Streams
	// LongPollTimeout is how long a long-poll read waits for data
	// (default 20 s).
	LongPollTimeout time.Duration
	// SSEMaxDuration is how long an SSE response lasts before the server
	// ends it for the client to reconnect (default 60 s).
	SSEMaxDuration time.Duration
	// SSEKeepAlive is how often a quiet SSE answer sends a comment
	// (default 15 s).
	SSEKeepAlive time.Duration
	// MaxAppendBytes bounds one request body (default 8 MiB); a larger
	// append is refused with 413.
	MaxAppendBytes int64
	// MaxReadBytes bounds the data of one read response (default 1 MiB);
	// a read returns at least one record.
	MaxReadBytes int
	// MaxTTL bounds Stream-TTL in seconds (default 10 years).
	MaxTTL int64
	// ReapInterval is how often expired streams are deleted (default 1 s).
	ReapInterval time.Duration
	// CORSOrigins lists the origins a browser may call from ("*": any);
	// other cross-origin requests go through the core's CheckOrigin.
	CORSOrigins []string
	// Now is the clock (default time.Now).
	Now func() time.Time

	// Docs is where the subscriptions live (the journal's documents); nil
	// leaves them off (their reserved APIs answer 404).
	Docs journal.Docs
	// MaxSubscriptionsPerOwner bounds one subject's subscriptions
	// (default 100).
	MaxSubscriptionsPerOwner int
	// MaxStreamsPerSubscription bounds the streams one subscription links
	// (default 1000).
	MaxStreamsPerSubscription int
	// SubscriptionSweep is how often every subscription is checked for a
	// lapsed lease or a due delivery (default 1 s).
	SubscriptionSweep time.Duration
	// WebhookTimeout bounds one webhook delivery (default 10 s).
	WebhookTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.LongPollTimeout <= 0 {
		o.LongPollTimeout = 20 * time.Second
	}
	if o.SSEMaxDuration <= 0 {
		o.SSEMaxDuration = 60 * time.Second
	}
	if o.SSEKeepAlive <= 0 {
		o.SSEKeepAlive = 15 * time.Second
	}
	if o.MaxAppendBytes <= 0 {
		o.MaxAppendBytes = 8 << 20
	}
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = 1 << 20
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = 10 * 365 * 24 * 3600
	}
	if o.ReapInterval <= 0 {
		o.ReapInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Edge serves the protocol; it is a hub.Edge. Mount starts its reaper,
// which ends with the core's context; Close ends it sooner and waits for
// it.
type Edge struct {
	opts   Options
	core   Core
	bodies bodyPool              // large request bodies' buffers (body.go)
	subs   *subscription.Manager // nil without Options.Docs

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns an edge; Mount serves it.
func New(o Options) *Edge {
	o.setDefaults()
	d := &Edge{opts: o}
	if o.Docs != nil {
		d.subs = subscription.New(subscription.Options{Docs: o.Docs, Streams: o.Streams, MaxPerOwner: o.MaxSubscriptionsPerOwner,
			MaxStreams: o.MaxStreamsPerSubscription, SweepInterval: o.SubscriptionSweep, WebhookTimeout: o.WebhookTimeout, Now: o.Now})
	}
	return d
}

// Prefix is where the streams are served.
const Prefix = "/v1/stream/"

// runsPrefix names, under Prefix, the read-only streams of runs.
const runsPrefix = "runs/"

var _ hub.Edge = (*Edge)(nil)

// Mount serves the edge on e over the core (hub.Edge) and starts the
// reaper of expired streams.
func (d *Edge) Mount(e *echo.Echo, api hub.API) { d.MountCore(e, api) }

// MountCore is Mount over what the edge needs of the core.
func (d *Edge) MountCore(e *echo.Echo, core Core) {
	d.core = core
	e.OPTIONS(Prefix+"*", d.preflight, d.security)
	h := d.security(d.cors(core.RequireAuth(d.serve)))
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete}
	e.Match(methods, Prefix+"*", h)
	// The protocol's reserved control APIs, routed before the streams.
	ctl := d.security(d.cors(d.control))
	e.Match(methods, Prefix+controlPrefix+"*", ctl)
	e.Match(methods, Prefix+strings.TrimSuffix(controlPrefix, "/"), ctl)
	e.OPTIONS(Prefix+strings.TrimSuffix(controlPrefix, "/"), d.preflight, d.security)
	d.startReaper(core.Context())
	if d.subs != nil {
		d.subs.Start(core.Context())
	}
}

// Close stops the reaper and waits for it.
func (d *Edge) Close() {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if d.subs != nil {
		d.subs.Close()
	}
}

func (d *Edge) startReaper(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	d.mu.Lock()
	d.cancel, d.done = cancel, done
	d.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(d.opts.ReapInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = d.opts.Streams.ReapStreams(ctx, d.opts.Now())
			}
		}
	}()
}

// security sets the browser security headers on every answer, errors too.
func (d *Edge) security(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cross-Origin-Resource-Policy", "cross-origin")
		return next(c)
	}
}

// exposed are the response headers a cross-origin reader may see.
const exposed = "Stream-Next-Offset, Stream-Up-To-Date, Stream-Cursor, Stream-Closed, Stream-TTL, Stream-Expires-At, " +
	"Stream-SSE-Data-Encoding, Producer-Epoch, Producer-Seq, Producer-Expected-Seq, Producer-Received-Seq, ETag, Location, Content-Type"

// allowedHeaders are the request headers a cross-origin writer may send.
const allowedHeaders = "Authorization, Content-Type, If-None-Match, Stream-TTL, Stream-Expires-At, Stream-Seq, Stream-Closed, " +
	"Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset, Producer-Id, Producer-Epoch, Producer-Seq"

func (d *Edge) originAllowed(origin string) bool {
	for _, o := range d.opts.CORSOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// cors lets a listed origin through (with its CORS headers); any other
// request goes through the core's origin check.
func (d *Edge) cors(next echo.HandlerFunc) echo.HandlerFunc {
	checked := d.core.CheckOrigin(next)
	return func(c echo.Context) error {
		origin := c.Request().Header.Get("Origin")
		if origin != "" && d.originAllowed(origin) {
			h := c.Response().Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", exposed)
			return next(c)
		}
		return checked(c)
	}
}

// preflight answers a CORS preflight: what may be sent, and the origin
// when it is listed.
func (d *Edge) preflight(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", allowedHeaders)
	h.Set("Access-Control-Max-Age", "600")
	if origin := c.Request().Header.Get("Origin"); origin != "" && d.originAllowed(origin) {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	return c.NoContent(http.StatusNoContent)
}

// serve routes a request to its method's handler.
func (d *Edge) serve(c echo.Context) error {
	name, err := streamName(c.Request().URL.Path)
	if err != nil {
		return d.fail(c, err)
	}
	if strings.HasPrefix(name, runsPrefix) {
		return d.serveRun(c, strings.TrimPrefix(name, runsPrefix))
	}
	switch c.Request().Method {
	case http.MethodPut:
		return d.create(c, name)
	case http.MethodPost:
		return d.append(c, name)
	case http.MethodDelete:
		return d.delete(c, name)
	case http.MethodHead:
		return d.head(c, name)
	default:
		return d.read(c, name)
	}
}

// maxNameLen bounds a stream's name.
const maxNameLen = 1024

// streamName is the stream a path names, checked.
func streamName(path string) (string, error) {
	name := strings.TrimPrefix(path, Prefix)
	switch {
	case name == "" || len(name) > maxNameLen:
		return "", badRequest("the stream name must be 1 to %d bytes", maxNameLen)
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return "", badRequest("the stream name has an empty path segment")
	case strings.ContainsAny(name, "{}\\"):
		return "", badRequest("the stream name may not contain braces or backslashes")
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "." || seg == ".." {
			return "", badRequest("the stream name may not contain . or .. segments")
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "", badRequest("the stream name may not contain control characters")
		}
	}
	return name, nil
}
