package hub

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Routes registers the WebSocket endpoint and the HTTP API of protocol.md
// §3 on e.
func (h *Hub) Routes(e *echo.Echo) {
	e.GET("/v1/ws", echo.WrapHandler(http.HandlerFunc(h.ServeWS)))
	g := e.Group("/v1", h.checkOrigin, h.requireAuth)
	g.POST("/sessions", h.createSession)
	g.GET("/sessions", h.listSessions)
	g.GET("/sessions/:sid", h.getSession)
	g.PATCH("/sessions/:sid", h.renameSession)
	g.DELETE("/sessions/:sid", h.deleteSession)
	g.GET("/sessions/:sid/runs", h.listRuns)
	g.POST("/sessions/:sid/runs", h.startRun)
	g.POST("/sessions/:sid/queue", h.queue)
	h.routeQueueEdits(g) // queueedit.go
	g.POST("/sessions/:sid/goal", h.goal)
	g.GET("/runs/:rid", h.getRun)
	g.GET("/runs/:rid/events", h.events)
	g.GET("/runs/:rid/agui", h.aguiRun)
	g.GET("/sessions/:sid/agui", h.aguiSession)
	g.POST("/runs/:rid/cancel", h.cancelRun)
	g.POST("/runs/:rid/approvals/:aid", h.approve)
	g.POST("/runs/:rid/clarifications/:cid", h.clarify)
	h.interopRoutes(e, g)
}

// RouteProfiles registers GET /v1/profiles (answered by ProfilesHandler)
// behind the same origin check and authentication as the rest of the API.
func (h *Hub) RouteProfiles(e *echo.Echo, list []profile.Info) {
	e.GET("/v1/profiles", ProfilesHandler(list), h.checkOrigin, h.requireAuth)
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

// HTTPStatus maps a protocol error code to its HTTP status.
func HTTPStatus(code protocol.Code) int {
	switch code {
	case protocol.CodeBadRequest, protocol.CodeInvalidPayload, protocol.CodeBadCursor, protocol.CodeProtocol:
		return http.StatusBadRequest
	case protocol.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case protocol.CodeNotFound:
		return http.StatusNotFound
	case protocol.CodeConflict, protocol.CodeNotActive, protocol.CodeTerminal:
		return http.StatusConflict
	case protocol.CodeUnauthorized:
		return http.StatusUnauthorized
	case protocol.CodeForbidden:
		return http.StatusForbidden
	case protocol.CodeRateLimited, protocol.CodeLimitExceeded:
		return http.StatusTooManyRequests
	case protocol.CodeUnsupported:
		return http.StatusNotImplemented
	case protocol.CodeUnavailable:
		return http.StatusServiceUnavailable
	case protocol.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

// ErrorHandler renders every error as a JSON body {error:{code,message}}.
func ErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var pe *protocol.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &he):
		if (he.Code == http.StatusNotFound || he.Code == http.StatusMethodNotAllowed) && methodNotAllowed(c) {
			return
		}
		code := protocol.CodeInternal
		switch he.Code {
		case http.StatusNotFound:
			code = protocol.CodeNotFound
		case http.StatusMethodNotAllowed:
			code = protocol.CodeMethodNotAllowed
		case http.StatusBadRequest:
			code = protocol.CodeBadRequest
		case http.StatusRequestEntityTooLarge:
			code = protocol.CodeTooLarge
		case http.StatusUnauthorized:
			code = protocol.CodeUnauthorized
		case http.StatusForbidden:
			code = protocol.CodeForbidden
		case http.StatusServiceUnavailable:
			code = protocol.CodeUnavailable
			c.Response().Header().Set("Retry-After", retryAfter)
		}
		pe = &protocol.Error{Code: code, Message: fmt.Sprint(he.Message)}
		c.JSON(he.Code, protocol.ErrorBody{Error: pe})
		return
	default:
		pe = protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	if pe.Code == protocol.CodeUnavailable {
		c.Response().Header().Set("Retry-After", retryAfter)
	}
	c.JSON(HTTPStatus(pe.Code), protocol.ErrorBody{Error: pe})
}

func (h *Hub) createSession(c echo.Context) error {
	var req protocol.CreateSessionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if len(req.Title) > 512 {
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "title", Message: "title: is over 512 bytes"}
	}
	meta := journal.SessionMeta{ID: adapter.NewID("s_"), Owner: h.subject(c), Title: req.Title,
		CreatedAt: protocol.Timestamp(h.now())}
	if err := h.store.CreateSession(c.Request().Context(), meta); err != nil {
		return h.publicError(err)
	}
	h.tracker.sessionCreated(meta)
	return c.JSON(http.StatusCreated, protocol.CreateSessionResult{SessionID: meta.ID})
}

func (h *Hub) listSessions(c echo.Context) error {
	ctx := c.Request().Context()
	metas, err := h.store.Sessions(ctx, h.subject(c))
	if err != nil {
		return h.publicError(err)
	}
	out := protocol.SessionList{Sessions: make([]protocol.SessionStatus, 0, len(metas))}
	for _, m := range metas {
		st, err := h.sessionStatus(c, m.ID)
		if err != nil {
			return err
		}
		out.Sessions = append(out.Sessions, st)
	}
	h.presence.stamp(ctx, out.Sessions, metas)
	return c.JSON(http.StatusOK, out)
}

func (h *Hub) sessionStatus(c echo.Context, sid string) (protocol.SessionStatus, error) {
	if st, ok := h.tracker.status(sid); ok {
		return st, nil
	}
	st, _, err := journal.FoldSession(c.Request().Context(), h.store, sid)
	if err != nil {
		return protocol.SessionStatus{}, h.publicError(err)
	}
	return h.statusOf(&st), nil
}

func (h *Hub) getSession(c echo.Context) error {
	sid := c.Param("sid")
	meta, err := h.readSession(c.Request().Context(), h.principal(c), sid)
	if err != nil {
		return h.publicError(err)
	}
	st, err := h.sessionStatus(c, sid)
	if err != nil {
		return err
	}
	one := []protocol.SessionStatus{st}
	h.presence.stamp(c.Request().Context(), one, []journal.SessionMeta{meta})
	return c.JSON(http.StatusOK, one[0])
}

func (h *Hub) startRun(c echo.Context) (err error) {
	var req protocol.StartRunRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{Type: protocol.MsgControl, ID: "http", Op: protocol.OpStart, SessionID: c.Param("sid"),
		Message: req.Message, Attachments: req.Attachments, Workspace: req.Workspace, Profile: req.Profile,
		Provider: req.Provider, Model: req.Model, Toolsets: req.Toolsets, Metadata: req.Metadata}
	if err := protocol.ValidateControl(&m); err != nil {
		return err
	}
	ctx := c.Request().Context()
	status := protocol.ResultAccepted
	defer func() { h.cfg.Metrics.Control(protocol.OpStart, status, err) }()
	sreq := m.StartRequest()
	if req.Source != "" {
		sreq.Source = req.Source
	}
	release, err := h.runGate(ctx, h.subject(c), m.SessionID)
	if err != nil {
		return err
	}
	defer release()
	r, err := h.runtime.StartRun(ctx, h.subject(c), sreq)
	var pe *protocol.Error
	switch {
	case errors.Is(err, adapter.ErrConflict):
		status = protocol.ResultConflict
		return c.JSON(http.StatusConflict, adapter.Result(protocol.ResultConflict, "the session already has an active run", "", m.SessionID, ""))
	case errors.As(err, &pe) && pe.Code == protocol.CodeUnsupported:
		// The profile's driver cannot do what the start asks (its
		// attachments): a ControlResult, as a start's conflict is.
		status = protocol.ResultUnsupported
		return c.JSON(http.StatusNotImplemented, adapter.Result(protocol.ResultUnsupported, pe.Message, "", m.SessionID, ""))
	}
	if err != nil {
		return h.publicError(err)
	}
	return c.JSON(http.StatusAccepted, r)
}

func (h *Hub) getRun(c echo.Context) error {
	ctx := c.Request().Context()
	rid := c.Param("rid")
	if _, err := h.readRun(ctx, h.principal(c), rid); err != nil {
		return h.publicError(err)
	}
	st, err := h.runtime.GetRun(ctx, rid)
	if err != nil {
		return h.publicError(err)
	}
	return c.JSON(http.StatusOK, st)
}

func (h *Hub) cancelRun(c echo.Context) error {
	m := protocol.Control{ID: "http", Op: protocol.OpCancel, RunID: c.Param("rid")}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *Hub) approve(c echo.Context) error {
	var req protocol.ApprovalRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpApprove, RunID: c.Param("rid"), ApprovalID: c.Param("aid"), Choice: req.Choice}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *Hub) clarify(c echo.Context) error {
	var req protocol.ClarifyRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpClarify, RunID: c.Param("rid"), ClarifyID: c.Param("cid"), Response: req.Response}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *Hub) queue(c echo.Context) error {
	var req protocol.QueueRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpQueue, SessionID: c.Param("sid"), Message: req.Message, Mode: req.Mode}
	return h.httpControl(c, &m, http.StatusOK)
}

func (h *Hub) goal(c echo.Context) error {
	var req protocol.GoalRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	m := protocol.Control{ID: "http", Op: protocol.OpGoal, SessionID: c.Param("sid"), Action: req.Action, Text: req.Text}
	return h.httpControl(c, &m, http.StatusOK)
}

// httpControl validates and executes a control from an HTTP request. The
// Idempotency-Key header is the control's key.
func (h *Hub) httpControl(c echo.Context, m *protocol.Control, okStatus int) error {
	m.Type = protocol.MsgControl
	if err := protocol.ValidateControl(m); err != nil {
		return err
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if len(key) > protocol.MaxShortBytes {
		return &protocol.Error{Code: protocol.CodeTooLarge, Field: "Idempotency-Key", Message: "Idempotency-Key: is too long"}
	}
	res, err := h.Control(c.Request().Context(), h.subject(c), m, key)
	return controlResult(c, res, err, okStatus)
}

// interopRoutes registers the AG-UI run endpoint and the AI SDK chat
// transports.
func (h *Hub) interopRoutes(e *echo.Echo, g *echo.Group) {
	g.POST("/agui", h.aguiPost)
	g.POST("/agui/:profile", h.aguiPost)
	g.POST("/aisdk/chat", h.aisdkChat)
	g.GET("/aisdk/chat/:id/stream", h.aisdkResume)
	e.GET("/v1/aisdk/ws", h.aisdkWS)
}
