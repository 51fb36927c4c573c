package hub

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/hermeswebui"
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
	res, err := w.h.Control(c.Request().Context(), w.h.subject(c), m, "")
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
	if err := bind(c, &req); err != nil {
		return err
	}
	return w.control(c, &protocol.Control{Op: protocol.OpApprove, RunID: c.Param("rid"), ApprovalID: req.ApprovalID, Choice: req.Choice})
}

func (w *webui) clarify(c echo.Context) error {
	var req struct {
		Response string `json:"response"`
	}
	if err := bind(c, &req); err != nil {
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
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.Mode == "" {
		req.Mode = protocol.ModeQueue
	}
	meta, err := w.h.ownRun(c.Request().Context(), w.h.subject(c), c.Param("rid"))
	if err != nil {
		return w.h.publicError(err)
	}
	return w.control(c, &protocol.Control{Op: protocol.OpQueue, SessionID: meta.SessionID, Message: req.Message, Mode: req.Mode})
}

// goal answers POST /v1/sessions/{sid}/goal {action, text}.
func (w *webui) goal(c echo.Context) error {
	var req struct {
		Action string `json:"action"`
		Text   string `json:"text"`
	}
	if err := bind(c, &req); err != nil {
		return err
	}
	return w.control(c, &protocol.Control{Op: protocol.OpGoal, SessionID: c.Param("sid"), Action: req.Action, Text: req.Text})
}

// maxTranscriptRuns bounds the runs done's session transcript carries (the
// newest ones).
const maxTranscriptRuns = 200

// transcript is done's payload.session: the session's conversation as
// WebUI's browser renders it on done ({session_id, title, messages,
// tool_calls, message_count}), a user and an assistant message per run.
func (w *webui) transcript(ctx context.Context, sid string) any {
	out := map[string]any{"session_id": sid}
	meta, err := w.h.store.Session(ctx, sid)
	if err != nil {
		return out
	}
	out["title"] = meta.Title
	runs := meta.Runs
	if len(runs) > maxTranscriptRuns {
		runs = runs[len(runs)-maxTranscriptRuns:]
	}
	msgs := []map[string]any{}
	for _, rid := range runs {
		t, err := hermeswebui.ReadTurn(ctx, w.h.store, rid)
		if err != nil {
			continue
		}
		msgs = append(msgs, t.Messages()...)
	}
	out["messages"], out["tool_calls"], out["message_count"] = msgs, []any{}, len(msgs)
	return out
}
