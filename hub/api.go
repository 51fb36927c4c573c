package hub

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// API is what an edge uses of the core: every wire dialect beside the tab
// socket is an Edge over it, in a package of its own that imports hub,
// never the reverse.
// *Hub implements it; hub/hubtest builds one over an in-memory journal for
// an edge's tests.
type API interface {
	// Who the caller is.

	// Authenticate verifies a bearer token (open mode: every caller is
	// OpenSubject).
	Authenticate(token string) (Principal, error)
	// CheckOrigin is middleware refusing a browser request from another
	// site (Config.OriginPatterns), 403 forbidden.
	CheckOrigin(next echo.HandlerFunc) echo.HandlerFunc
	// OriginAllowed is CheckOrigin's rule for one request.
	OriginAllowed(r *http.Request) error
	// RequireAuth is middleware authenticating the Authorization header
	// and making it the caller (SetCaller); 401 without a valid token.
	RequireAuth(next echo.HandlerFunc) echo.HandlerFunc
	// Caller is the caller of a request behind RequireAuth (or SetCaller).
	Caller(c echo.Context) Principal

	// The sessions and runs a subject may see. A session or run that does
	// not exist or that p may not read is ErrUnknown: never which.

	ReadSession(ctx context.Context, p Principal, sid string) (journal.SessionMeta, error)
	ReadRun(ctx context.Context, p Principal, rid string) (journal.RunMeta, error)
	// Sessions lists the statuses of p's own sessions, oldest first, with
	// their presence.
	Sessions(ctx context.Context, p Principal) ([]protocol.SessionStatus, error)
	// SessionsPage is a page of Sessions: at most limit, after the session
	// after, and whether more follow.
	SessionsPage(ctx context.Context, p Principal, after string, limit int) ([]protocol.SessionStatus, bool, error)
	// SessionStatus is the status of a session read with ReadSession, with
	// its presence.
	SessionStatus(ctx context.Context, meta journal.SessionMeta) (protocol.SessionStatus, error)
	// StatusOf is a folded session's status as a tab sees it (its
	// active_controls offer only what its runtime can do).
	StatusOf(s *session.Session) protocol.SessionStatus
	// CreateSession registers a new session (journal.ErrExists when the id
	// is taken) and tells the tabs that watch its owner.
	CreateSession(ctx context.Context, meta journal.SessionMeta) error
	// OpenSession returns session sid, creating it for subject when it does
	// not exist (created). It does not check the owner: a session of
	// another subject is returned as it is, for the edge to refuse as its
	// dialect says. An edge that created a session for a start that is then
	// refused discards it (DiscardSession): a refused request leaves
	// nothing behind.
	OpenSession(ctx context.Context, subject, sid string) (meta journal.SessionMeta, created bool, err error)
	// DiscardSession deletes a session OpenSession created for a start
	// that was refused, unless it has a run by then; failures are logged.
	DiscardSession(ctx context.Context, sid string)

	// Controls.

	// Control executes one control (a start, cancel, approval,
	// clarification, queue or goal) for subject and answers its
	// ControlResult; errors are safe *protocol.Error values.
	Control(ctx context.Context, subject string, m *protocol.Control, key string) (protocol.ControlResult, error)
	// StartRun starts a run as POST /v1/sessions/{sid}/runs does, answered
	// with the run's start result.
	StartRun(ctx context.Context, subject string, req protocol.StartRunRequest) (protocol.RunStartResult, error)
	// GetRun is the run's status from its runtime.
	GetRun(ctx context.Context, rid string) (protocol.RunStatus, error)

	// Events.

	// Observe yields run rid's events after seq after, then live ones,
	// until the terminal event or ctx's end.
	Observe(ctx context.Context, rid string, after uint64) iter.Seq2[protocol.Envelope, error]
	// Journal is the journal as edges read and change it; an edge checks
	// access (ReadSession, ReadRun) before it touches what a caller names.
	Journal() Journal

	// The hub's life and settings.

	// Context ends when the hub shuts down.
	Context() context.Context
	// Draining reports whether Shutdown has begun.
	Draining() bool
	// Config is the hub's configuration, defaults applied.
	Config() Config
	// PublicError maps an internal error to a safe *protocol.Error.
	PublicError(err error) error
}

// Journal is the part of the journal an edge uses: the runs' logs, the
// session records and the bus.
type Journal interface {
	journal.Log
	journal.SessionUpdater
	journal.Bus
	Session(ctx context.Context, id string) (journal.SessionMeta, error)
	DeleteSession(ctx context.Context, id string) error
}

// Edge is one wire dialect over the core: Mount registers its routes on e
// and serves them through api. A new edge is its package plus one line in
// cmd/hub (docs/architecture.md, "Adding an edge").
type Edge interface {
	Mount(e *echo.Echo, api API)
}

var _ API = (*Hub)(nil)

// Routes registers the tab socket (GET /v1/ws) on e, then every edge's
// routes, and answers the CORS preflights of their paths (CheckOrigin adds
// CORS headers to the answers).
func (h *Hub) Routes(e *echo.Echo, edges ...Edge) {
	e.Pre(h.preflight)
	e.GET("/v1/ws", echo.WrapHandler(http.HandlerFunc(h.ServeWS)))
	for _, edge := range edges {
		edge.Mount(e, h)
	}
}

// Sessions lists p's own sessions with their statuses and presence.
func (h *Hub) Sessions(ctx context.Context, p Principal) ([]protocol.SessionStatus, error) {
	metas, err := h.store.Sessions(ctx, p.Subject)
	if err != nil {
		return nil, h.PublicError(err)
	}
	return h.listedStatuses(ctx, metas)
}

// SessionsPage is a page of Sessions: at most limit sessions, oldest
// first, those after the session after (from the first without it), and
// whether more follow. after must be one of p's sessions (bad_request
// otherwise, field after). Only the page's sessions are read and folded
// (journal.Registry.SessionsPage).
func (h *Hub) SessionsPage(ctx context.Context, p Principal, after string, limit int) ([]protocol.SessionStatus, bool, error) {
	page, more, err := h.store.SessionsPage(ctx, p.Subject, after, limit)
	if errors.Is(err, journal.ErrNotFound) && after != "" {
		return nil, false, &protocol.Error{Code: protocol.CodeBadRequest, Field: "after", Message: "after: is not one of your sessions (deleted since? list from the start)"}
	}
	if err != nil {
		return nil, false, h.PublicError(err)
	}
	out, err := h.listedStatuses(ctx, page)
	return out, more, err
}

// listedStatuses are the statuses of sessions a list has just read, with
// their presence (one presence read for them all).
func (h *Hub) listedStatuses(ctx context.Context, metas []journal.SessionMeta) ([]protocol.SessionStatus, error) {
	out := make([]protocol.SessionStatus, 0, len(metas))
	for i := range metas {
		st, err := h.listedStatus(ctx, &metas[i])
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	h.presence.stamp(ctx, out, metas)
	return out, nil
}

// SessionStatus is meta's session's status with its presence.
func (h *Hub) SessionStatus(ctx context.Context, meta journal.SessionMeta) (protocol.SessionStatus, error) {
	st, err := h.sessionStatus(ctx, meta.ID)
	if err != nil {
		return st, err
	}
	one := []protocol.SessionStatus{st}
	h.presence.stamp(ctx, one, []journal.SessionMeta{meta})
	return one[0], nil
}

// listedStatus is sessionStatus for a session whose meta the list has
// just read: the fold does not read it again.
func (h *Hub) listedStatus(ctx context.Context, meta *journal.SessionMeta) (protocol.SessionStatus, error) {
	if st, ok := h.tracker.status(meta.ID); ok {
		return st, nil
	}
	st, err := journal.FoldSessionMeta(ctx, h.store, *meta)
	if err != nil {
		return protocol.SessionStatus{}, h.PublicError(err)
	}
	return h.StatusOf(&st), nil
}

// sessionStatus is the tracked status of sid, else its fold.
func (h *Hub) sessionStatus(ctx context.Context, sid string) (protocol.SessionStatus, error) {
	if st, ok := h.tracker.status(sid); ok {
		return st, nil
	}
	st, _, err := journal.FoldSession(ctx, h.store, sid)
	if err != nil {
		return protocol.SessionStatus{}, h.PublicError(err)
	}
	return h.StatusOf(&st), nil
}

// CreateSession registers meta's session and tells its owner's tabs.
func (h *Hub) CreateSession(ctx context.Context, meta journal.SessionMeta) error {
	if err := h.store.CreateSession(ctx, meta); err != nil {
		return err
	}
	h.tracker.sessionCreated(meta)
	return nil
}

// OpenSession returns session sid, creating it for subject when new.
func (h *Hub) OpenSession(ctx context.Context, subject, sid string) (journal.SessionMeta, bool, error) {
	for range 2 {
		meta, err := h.store.Session(ctx, sid)
		switch {
		case err == nil:
			return meta, false, nil
		case !errors.Is(err, journal.ErrNotFound):
			return meta, false, h.PublicError(err)
		}
		meta = journal.SessionMeta{ID: sid, Owner: subject, CreatedAt: protocol.Timestamp(time.Now())}
		err = h.CreateSession(ctx, meta)
		if err == nil {
			return meta, true, nil
		}
		if !errors.Is(err, journal.ErrExists) {
			return meta, false, h.PublicError(err)
		}
		// Created meanwhile (by this caller's retry, or another caller): look again.
	}
	return journal.SessionMeta{}, false, protocol.Errorf(protocol.CodeConflict, "the session is being created; retry")
}

// DiscardSession deletes session sid, created for a start that was
// refused, unless it has a run or a queued message meanwhile (a
// concurrent request of the same client used it; the journal refuses to
// delete a session with an active run, atomically with BeginRun); it goes
// on when the request's context has ended.
func (h *Hub) DiscardSession(ctx context.Context, sid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ControlTimeout)
	defer cancel()
	meta, err := h.store.Session(ctx, sid)
	if err != nil || len(meta.Runs) > 0 || len(meta.Queue) > 0 {
		return
	}
	if err := h.store.DeleteSession(ctx, sid); err != nil && !errors.Is(err, journal.ErrNotFound) && !errors.Is(err, journal.ErrConflict) {
		h.log.Warn("discard a refused start's session", "session_id", sid, "err", err)
	}
}

// StartRun starts a run for subject under the hub's limit of runs. Errors
// are safe, but for adapter.ErrConflict (the session has an active run)
// and an unsupported *protocol.Error (the profile's driver cannot do what
// the start asks), which HTTP answers as ControlResults.
func (h *Hub) StartRun(ctx context.Context, subject string, req protocol.StartRunRequest) (res protocol.RunStartResult, err error) {
	status, counted := protocol.ResultAccepted, error(nil)
	defer func() { h.cfg.Metrics.Control(protocol.OpStart, status, counted) }()
	release, err := h.runGate(ctx, subject, req.SessionID)
	if err != nil {
		counted = err
		return res, err
	}
	defer release()
	res, err = h.runtime.StartRun(ctx, subject, req)
	var pe *protocol.Error
	switch {
	case err == nil:
		if res.Status == protocol.StatusQueued {
			res.Waiting, res.Message = h.waiting(ctx)
		}
	case errors.Is(err, adapter.ErrConflict):
		status = protocol.ResultConflict
	case errors.As(err, &pe) && pe.Code == protocol.CodeUnsupported:
		status = protocol.ResultUnsupported
	default:
		err = h.PublicError(err)
		counted = err
	}
	return res, err
}

// GetRun is the run's status from its runtime.
func (h *Hub) GetRun(ctx context.Context, rid string) (protocol.RunStatus, error) {
	st, err := h.runtime.GetRun(ctx, rid)
	if err == nil && st.Status == protocol.StatusQueued && !st.Terminal {
		st.Waiting, _ = h.waiting(ctx)
	}
	return st, err
}

// Observe yields the run's events after seq after, then live ones.
func (h *Hub) Observe(ctx context.Context, rid string, after uint64) iter.Seq2[protocol.Envelope, error] {
	return h.runtime.ObserveRun(ctx, rid, after)
}

// Journal is the hub's journal.
func (h *Hub) Journal() Journal { return h.store }

// Context ends when the hub shuts down.
func (h *Hub) Context() context.Context { return h.ctx }

// Config is the hub's configuration, defaults applied.
func (h *Hub) Config() Config { return h.cfg }
