// Package httpapi is the edge that serves the HTTP and SSE API of
// protocol.md §8 over the hub's core: sessions (create, list, read,
// rename, delete), their runs, run starts and controls, a run's events as
// a JSON page or an SSE stream, the queue edits (§9.4) and the profiles a
// start may name. Every handler reads and changes through hub.API; none
// holds state of its own.
package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Edge serves the HTTP API.
type Edge struct {
	profiles []profile.Info
}

// New is the HTTP API's edge; profiles are those GET /v1/profiles lists
// (nil: the route is not served).
func New(profiles []profile.Info) *Edge {
	if profiles != nil {
		profiles = append([]profile.Info{}, profiles...)
	}
	return &Edge{profiles: profiles}
}

// api is the edge mounted over one core.
type api struct {
	core hub.API
}

// Mount registers the routes of protocol.md §8 under /v1, behind the
// core's origin check and authentication.
func (ed *Edge) Mount(e *echo.Echo, core hub.API) {
	h := &api{core: core}
	g := e.Group("/v1", core.CheckOrigin, core.RequireAuth)
	g.POST("/sessions", h.createSession)
	g.GET("/sessions", h.listSessions)
	g.GET("/sessions/:sid", h.getSession)
	g.PATCH("/sessions/:sid", h.renameSession)
	g.DELETE("/sessions/:sid", h.deleteSession)
	g.GET("/sessions/:sid/runs", h.listRuns)
	g.POST("/sessions/:sid/runs", h.startRun)
	g.POST("/sessions/:sid/queue", h.queue)
	h.routeQueueEdits(g) // queue.go
	g.POST("/sessions/:sid/goal", h.goal)
	g.GET("/runs/:rid", h.getRun)
	g.GET("/runs/:rid/events", h.events)
	g.POST("/runs/:rid/cancel", h.cancelRun)
	g.POST("/runs/:rid/approvals/:aid", h.approve)
	g.POST("/runs/:rid/clarifications/:cid", h.clarify)
	if ed.profiles != nil {
		e.GET("/v1/profiles", ProfilesHandler(ed.profiles), core.CheckOrigin, core.RequireAuth)
	}
}

// ProfilesHandler answers GET /v1/profiles: {"profiles": [profile.Info]},
// the profiles a start may name (their names and driver kinds, never their
// settings or secrets).
func ProfilesHandler(list []profile.Info) echo.HandlerFunc {
	body := struct {
		Profiles []profile.Info `json:"profiles"`
	}{Profiles: append([]profile.Info{}, list...)}
	return func(c echo.Context) error { return c.JSON(http.StatusOK, body) }
}

// subject is the caller's identity.
func (h *api) subject(c echo.Context) string { return h.core.Caller(c).Subject }

// own is the caller as the owner of what it changes: an admin changes only
// its own sessions.
func (h *api) own(c echo.Context) hub.Principal { return hub.Principal{Subject: h.subject(c)} }

func (h *api) createSession(c echo.Context) error {
	var req protocol.CreateSessionRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	if len(req.Title) > 512 {
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "title", Message: "title: is over 512 bytes"}
	}
	meta := journal.SessionMeta{ID: adapter.NewID("s_"), Owner: h.subject(c), Title: req.Title,
		CreatedAt: protocol.Timestamp(time.Now())}
	if err := h.core.CreateSession(c.Request().Context(), meta); err != nil {
		return h.core.PublicError(err)
	}
	return c.JSON(http.StatusCreated, protocol.CreateSessionResult{SessionID: meta.ID})
}

func (h *api) listSessions(c echo.Context) error {
	_, paged := c.QueryParams()["limit"]
	if after := c.QueryParam("after"); paged || after != "" {
		limit, err := httpx.ParseUint(c, "limit", defaultSessionPage)
		if err != nil {
			return err
		}
		if limit < 1 || limit > maxSessionPage {
			return &protocol.Error{Code: protocol.CodeBadRequest, Field: "limit", Message: "limit: must be 1 to 1000"}
		}
		list, more, err := h.core.SessionsPage(c.Request().Context(), h.core.Caller(c), after, int(limit))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, protocol.SessionList{Sessions: list, More: &more})
	}
	list, err := h.core.Sessions(c.Request().Context(), h.core.Caller(c))
	if err != nil {
		return err
	}
	return writeSessionList(c, list)
}

func (h *api) getSession(c echo.Context) error {
	ctx := c.Request().Context()
	meta, err := h.core.ReadSession(ctx, h.core.Caller(c), c.Param("sid"))
	if err != nil {
		return h.core.PublicError(err)
	}
	st, err := h.core.SessionStatus(ctx, meta)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (h *api) startRun(c echo.Context) error {
	var req protocol.StartRunRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{Type: protocol.MsgControl, ID: "http", Op: protocol.OpStart, SessionID: c.Param("sid"),
		Message: req.Message, Attachments: req.Attachments, Workspace: req.Workspace, Profile: req.Profile,
		Provider: req.Provider, Model: req.Model, Toolsets: req.Toolsets, Metadata: req.Metadata}
	if err := protocol.ValidateControl(&m); err != nil {
		return err
	}
	sreq := m.StartRequest()
	if req.Source != "" {
		sreq.Source = req.Source
	}
	r, err := h.core.StartRun(c.Request().Context(), h.subject(c), sreq)
	var pe *protocol.Error
	switch {
	case errors.Is(err, adapter.ErrConflict):
		return c.JSON(http.StatusConflict, adapter.Result(protocol.ResultConflict, "the session already has an active run", "", m.SessionID, ""))
	case errors.As(err, &pe) && pe.Code == protocol.CodeUnsupported:
		// The profile's driver cannot do what the start asks (its
		// attachments): a ControlResult, as a start's conflict is.
		return c.JSON(http.StatusNotImplemented, adapter.Result(protocol.ResultUnsupported, pe.Message, "", m.SessionID, ""))
	case err != nil:
		return err
	}
	return c.JSON(http.StatusAccepted, r)
}

func (h *api) getRun(c echo.Context) error {
	ctx := c.Request().Context()
	rid := c.Param("rid")
	if _, err := h.core.ReadRun(ctx, h.core.Caller(c), rid); err != nil {
		return h.core.PublicError(err)
	}
	st, err := h.core.GetRun(ctx, rid)
	if err != nil {
		return h.core.PublicError(err)
	}
	return c.JSON(http.StatusOK, st)
}

func (h *api) cancelRun(c echo.Context) error {
	m := protocol.Control{ID: "http", Op: protocol.OpCancel, RunID: c.Param("rid")}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *api) approve(c echo.Context) error {
	var req protocol.ApprovalRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpApprove, RunID: c.Param("rid"), ApprovalID: c.Param("aid"), Choice: req.Choice}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *api) clarify(c echo.Context) error {
	var req protocol.ClarifyRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpClarify, RunID: c.Param("rid"), ClarifyID: c.Param("cid"), Response: req.Response}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *api) queue(c echo.Context) error {
	var req protocol.QueueRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpQueue, SessionID: c.Param("sid"), Message: req.Message, Mode: req.Mode}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *api) goal(c echo.Context) error {
	var req protocol.GoalRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpGoal, SessionID: c.Param("sid"), Action: req.Action, Text: req.Text}
	return h.httpControl(c, &m, http.StatusOK)
}

// httpControl validates and executes a control from an HTTP request. The
// Idempotency-Key header is the control's key.
func (h *api) httpControl(c echo.Context, m *protocol.Control, okStatus int) error {
	m.Type = protocol.MsgControl
	if err := protocol.ValidateControl(m); err != nil {
		return err
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if len(key) > protocol.MaxShortBytes {
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "Idempotency-Key", Message: "Idempotency-Key: is too long"}
	}
	res, err := h.core.Control(c.Request().Context(), h.subject(c), m, key)
	return httpx.ControlResult(c, res, err, okStatus)
}
