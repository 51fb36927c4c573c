package hermeswebui

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/protocol"
)

// control runs m through Hub.Control and answers as WebUI's
// _active_control_result reads it: ok (accepted), status, message. A
// bounded refusal (not-active, expired, conflict, unsupported) is a 200
// with ok false, so WebUI reports it rather than a transport failure.
func (w *webui) control(c echo.Context, m *protocol.Control) error {
	m.Type, m.ID = protocol.MsgControl, "hermes-webui"
	if err := protocol.ValidateControl(m); err != nil {
		return err
	}
	res, err := w.core.Control(c.Request().Context(), w.core.Caller(c).Subject, m, "")
	if err != nil {
		return err
	}
	body := map[string]any{"ok": res.Accepted, "status": res.Status, "message": res.Message}
	if res.RunID != "" {
		body["run_id"] = res.RunID
	}
	if res.SessionID != "" {
		body["session_id"] = res.SessionID
	}
	if res.EventID != "" {
		body["event_id"] = res.EventID
	}
	return c.JSON(http.StatusOK, body)
}

func (w *webui) cancel(c echo.Context) error {
	return w.control(c, &protocol.Control{Op: protocol.OpCancel, RunID: c.Param("rid")})
}

func (w *webui) approval(c echo.Context) error {
	var req struct {
		Choice     string `json:"choice"`
		ApprovalID string `json:"approval_id"`
	}
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	return w.control(c, &protocol.Control{Op: protocol.OpApprove, RunID: c.Param("rid"), ApprovalID: req.ApprovalID, Choice: req.Choice})
}

func (w *webui) clarify(c echo.Context) error {
	var req struct {
		Response string `json:"response"`
	}
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	return w.control(c, &protocol.Control{Op: protocol.OpClarify, RunID: c.Param("rid"), ClarifyID: c.Param("cid"), Response: req.Response})
}

// messages answers POST /v1/runs/{id}/messages {message, mode}: a queued
// (or, mode steer, a steering) message for the run's session.
func (w *webui) messages(c echo.Context) error {
	var req struct {
		Message string `json:"message"`
		Mode    string `json:"mode"`
	}
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	if req.Mode == "" {
		req.Mode = protocol.ModeQueue
	}
	meta, err := w.core.ReadRun(c.Request().Context(), hub.Principal{Subject: w.core.Caller(c).Subject}, c.Param("rid"))
	if err != nil {
		return w.core.PublicError(err)
	}
	return w.control(c, &protocol.Control{Op: protocol.OpQueue, SessionID: meta.SessionID, Message: req.Message, Mode: req.Mode})
}

// goal answers POST /v1/sessions/{sid}/goal {action, text}.
func (w *webui) goal(c echo.Context) error {
	var req struct {
		Action string `json:"action"`
		Text   string `json:"text"`
	}
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	return w.control(c, &protocol.Control{Op: protocol.OpGoal, SessionID: c.Param("sid"), Action: req.Action, Text: req.Text})
}

// RunnerEdge is hermes-webui's runner API over the hub's core.
type RunnerEdge struct{ o RunnerOptions }

// Runner is the runner API's edge, mounted under o.Base.
func Runner(o RunnerOptions) *RunnerEdge { return &RunnerEdge{o: o} }

// Mount registers the runner API under the edge's base on e, behind its
// error rendering, the core's origin check and its runner keys (else the
// core's authentication).
func (ed *RunnerEdge) Mount(e *echo.Echo, core hub.API) {
	o := ed.o
	cfg := core.Config()
	w := &webui{core: core, log: cfg.Logger, caps: cfg.Capabilities, profiles: map[string]bool{}, hold: o.PollHold}
	if w.hold <= 0 {
		w.hold = 20 * time.Second
	}
	for k, s := range o.Keys {
		w.keys = append(w.keys, webuiKey{sum: sha256.Sum256([]byte(k)), subject: s})
	}
	for _, p := range o.Profiles {
		w.profiles[p.Name] = true
	}
	g := e.Group(strings.TrimRight(o.Base, "/")+"/v1", w.errors, core.CheckOrigin, w.auth)
	g.POST("/runs", w.start)
	g.GET("/runs/:rid/events", w.events)
	g.GET("/runs/:rid", w.run)
	g.POST("/runs/:rid/cancel", w.cancel)
	g.POST("/runs/:rid/approval", w.approval)
	g.POST("/runs/:rid/clarifications/:cid/respond", w.clarify)
	g.POST("/runs/:rid/messages", w.messages)
	g.POST("/sessions/:sid/goal", w.goal)
}
