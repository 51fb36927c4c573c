package aisdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/hub/interop"
	"github.com/runhub/runhub/protocol"
)

// The AI SDK chat transport over HTTP (docs/integrations.md):
// POST /v1/aisdk/chat takes the body DefaultChatTransport sends and answers
// the started run as a UI message stream; GET /v1/aisdk/chat/{id}/stream,
// the path DefaultChatTransport resumes at, replays the chat's active run
// from its start and follows it (204 without one). The chat id is a runhub
// session. An aborted request never cancels the run: stop is
// POST /v1/runs/{rid}/cancel.

// uiMessageStreamHeader marks a UI message stream (the AI SDK's
// UI_MESSAGE_STREAM_HEADERS).
const uiMessageStreamHeader = "x-vercel-ai-ui-message-stream"

// chatRequest is the body of a chat request (and the part of a WebSocket
// send frame) runhub reads.
type chatRequest struct {
	ID        *string           `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   *string           `json:"trigger"`
	MessageID *string           `json:"messageId"`
	Runhub    json.RawMessage   `json:"runhub"`
}

// uiMessage is the part of a UI message runhub reads.
type uiMessage struct {
	ID    *string `json:"id"`
	Role  string  `json:"role"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

// checkChat validates a chat request as the AI SDK validates one
// (safeValidateWebSocketChatTransportRequest, safeValidateUIMessages) and
// returns the text of its last message, a user message; prefix is put
// before field names.
func checkChat(r *chatRequest, prefix string) (string, error) {
	switch {
	case r.ID == nil || *r.ID == "":
		return "", httpx.FieldErr(protocol.CodeBadRequest, prefix+"id", "is required")
	case r.Trigger == nil:
		return "", httpx.FieldErr(protocol.CodeBadRequest, prefix+"trigger", "is required")
	case *r.Trigger != "submit-message" && *r.Trigger != "regenerate-message":
		return "", httpx.FieldErr(protocol.CodeBadRequest, prefix+"trigger", `must be "submit-message" or "regenerate-message"`)
	case len(r.Messages) == 0:
		return "", httpx.FieldErr(protocol.CodeBadRequest, prefix+"messages", "must be a non-empty array of UI messages")
	}
	var last uiMessage
	for i, raw := range r.Messages {
		var m uiMessage
		f := fmt.Sprintf("%smessages[%d]", prefix, i)
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", httpx.FieldErr(protocol.CodeBadRequest, f, "must be a UI message {id, role, parts}")
		}
		switch {
		case m.ID == nil:
			return "", httpx.FieldErr(protocol.CodeBadRequest, f+".id", "is required")
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant":
			return "", httpx.FieldErr(protocol.CodeBadRequest, f+".role", `must be "system", "user" or "assistant"`)
		case m.Parts == nil:
			return "", httpx.FieldErr(protocol.CodeBadRequest, f+".parts", "is required")
		}
		last = m
	}
	var b strings.Builder
	for _, p := range last.Parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	if last.Role != "user" || strings.TrimSpace(b.String()) == "" {
		return "", httpx.FieldErr(protocol.CodeBadRequest, prefix+"messages", "the last message must be a user message with a text part")
	}
	return b.String(), nil
}

// aisdkChat answers POST /v1/aisdk/chat.
func (h *edge) aisdkChat(c echo.Context) error {
	ctx := c.Request().Context()
	p := h.core.Caller(c)
	var req chatRequest
	if err := httpx.Bind(c, &req); err != nil {
		return err
	}
	text, err := checkChat(&req, "")
	if err != nil {
		return err
	}
	opts, err := interop.DecodeStartOptions(req.Runhub, "runhub")
	if err != nil {
		return err
	}
	if _, err := interop.ChatSession(ctx, h.core, p.Subject, "id", *req.ID); err != nil {
		return err
	}
	res, err := interop.StartChatRun(ctx, h.core, p.Subject, *req.ID, text, opts, nil)
	if err != nil {
		return err
	}
	if res.Status != protocol.ResultAccepted {
		return httpx.ControlResult(c, res, nil, http.StatusOK)
	}
	return h.aisdkStream(c, p, res.RunID)
}

// aisdkResume answers GET /v1/aisdk/chat/{id}/stream.
func (h *edge) aisdkResume(c echo.Context) error {
	ctx := c.Request().Context()
	p := h.core.Caller(c)
	id := c.Param("id")
	if err := protocol.ValidID(id); err != nil {
		return httpx.FieldErr(protocol.CodeOf(err), "id", "%s", err.(*protocol.Error).Message)
	}
	meta, err := h.core.ReadSession(ctx, p, id)
	if err == hub.ErrUnknown || (err == nil && meta.ActiveRun == "") {
		return c.NoContent(http.StatusNoContent) // no stream to resume (an unknown or foreign chat has none either)
	}
	if err != nil {
		return h.core.PublicError(err)
	}
	return h.aisdkStream(c, p, meta.ActiveRun)
}

// aisdkStream answers run rid as a UI message stream from its start.
func (h *edge) aisdkStream(c echo.Context, p hub.Principal, rid string) error {
	ctx, cancel := httpx.StreamContext(c.Request().Context(), h.core.Context(), p.Expires)
	defer cancel()
	w := httpx.StartSSE(ctx, c, h.core.Config().SSEKeepAlive, map[string]string{uiMessageStreamHeader: "v1"})
	defer w.Close()
	ended := h.aisdkPump(ctx, rid, -1, func(_ int64, ch Chunk) error {
		data, err := json.Marshal(ch)
		if err != nil {
			return err
		}
		return w.Write(httpx.AppendSSE(nil, "", "", data))
	})
	switch {
	case ended:
		w.Write([]byte("data: [DONE]\n\n"))
	case ctx.Err() == nil:
		// The journal failed us mid-stream: say so, as the SDK expects.
		w.Write([]byte(`data: {"type":"error","errorText":"the run's events could not be read; resume the stream"}` + "\n\n"))
	}
	return nil
}

// aisdkPump calls emit with every chunk of run rid after sequence after
// (-1: all), numbered from 0 in the run's fold, live until the run's last
// event. It reports whether the run's end was reached.
func (h *edge) aisdkPump(ctx context.Context, rid string, after int64, emit func(int64, Chunk) error) bool {
	var m Mapper
	var seq int64
	for e, err := range h.core.Observe(ctx, rid, 0) {
		if err != nil {
			return false
		}
		for _, ch := range m.Map(&e) {
			if seq > after {
				if emit(seq, ch) != nil {
					return false
				}
			}
			seq++
		}
		if e.Terminal {
			return true
		}
	}
	return false
}
