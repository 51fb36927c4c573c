package agui

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

// The AG-UI run endpoint (docs/md, "Run endpoint"): POST /v1/agui and
// POST /v1/agui/{profile} take an AG-UI RunAgentInput and answer the AG-UI
// run as SSE. threadId is a runhub session, the last user message starts a
// runhub run; an approval or a clarification ends the AG-UI run with the
// interrupt outcome, and the next POST's resume[] answers it through the
// ordinary approval or clarify control, continuing the same runhub run (an
// AG-UI run is one turn of a runhub run: Turns).

// aguiInput is the part of a RunAgentInput runhub reads.
type aguiInput struct {
	ThreadID       *string           `json:"threadId"`
	RunID          *string           `json:"runId"`
	Messages       []json.RawMessage `json:"messages"`
	ForwardedProps json.RawMessage   `json:"forwardedProps"`
	Resume         []aguiResume      `json:"resume"`
}

// aguiResume is a ResumeEntry.
type aguiResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// aguiMessage is the part of an AG-UI message runhub reads.
type aguiMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// maxAGUIRuns bounds the AG-UI run ids a hub remembers for resumed turns
// (a run's first turn is found from the journal).
const maxAGUIRuns = 4096

// aguiMetaKey is the start metadata key under which an AG-UI run's id is
// kept with the runhub run ({"agui":{"run_id":…}}), so that a retried
// POST finds the run its first attempt started.
const aguiMetaKey = "agui"

func (h *edge) aguiPost(c echo.Context) error {
	started := false // a run of this request started
	ctx := c.Request().Context()
	p := h.core.Caller(c)
	var in aguiInput
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	switch {
	case in.ThreadID == nil || *in.ThreadID == "":
		return httpx.FieldErr(protocol.CodeBadRequest, "threadId", "is required")
	case in.RunID == nil || *in.RunID == "":
		return httpx.FieldErr(protocol.CodeBadRequest, "runId", "is required")
	case len(*in.RunID) > protocol.MaxShortBytes:
		return httpx.FieldErr(protocol.CodeTooLarge, "runId", "is over %d bytes", protocol.MaxShortBytes)
	case in.Messages == nil:
		return httpx.FieldErr(protocol.CodeBadRequest, "messages", "is required")
	}
	msgs := make([]aguiMessage, len(in.Messages))
	for i, raw := range in.Messages {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil || msgs[i].Role == "" {
			return httpx.FieldErr(protocol.CodeBadRequest, fmt.Sprintf("messages[%d]", i), "must be a message object with a role")
		}
	}
	for i, r := range in.Resume {
		f := fmt.Sprintf("resume[%d].", i)
		if r.InterruptID == "" {
			return httpx.FieldErr(protocol.CodeBadRequest, f+"interruptId", "is required")
		}
		if r.Status != "resolved" && r.Status != "cancelled" {
			return httpx.FieldErr(protocol.CodeBadRequest, f+"status", `must be "resolved" or "cancelled"`)
		}
	}
	opts, err := interop.ParseStartOptions(in.ForwardedProps, "forwardedProps")
	if err != nil {
		return err
	}
	if prof := c.Param("profile"); prof != "" {
		opts.Profile = prof
	}
	thread, runID := *in.ThreadID, *in.RunID
	var pos Position
	if last := httpx.LastEventID(c); last != "" {
		if pos, err = ParseEventID(last); err != nil {
			return err
		}
	}
	sess, created, err := interop.ChatSession(ctx, h.core, p.Subject, "threadId", thread)
	if err != nil {
		return err
	}
	if created {
		// A new thread is kept only by the run it was made for.
		defer func() {
			if !started {
				h.core.DiscardSession(ctx, thread)
			}
		}()
	}
	key := p.Subject + "\x00" + thread + "\x00" + runID
	// A runId already used answers that AG-UI run again (a retry).
	if t, ok := h.runs.Get(key); ok {
		return h.aguiStream(c, p, thread, runID, t, pos)
	}
	if t, ok := h.aguiFirstTurn(ctx, sess.Runs, runID); ok {
		return h.aguiStream(c, p, thread, runID, t, pos)
	}
	if pos.RunID != "" {
		return protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID: runId %s has no stream to resume", protocol.Truncate(runID, 80))
	}
	if len(in.Resume) > 0 {
		t, err := h.aguiAnswer(ctx, p.Subject, sess.ActiveRun, sess.LatestRun(), in.Resume)
		if err != nil {
			if res, ok := err.(controlAnswer); ok {
				return httpx.ControlResult(c, res.ControlResult, nil, http.StatusOK)
			}
			return err
		}
		h.runs.Put(key, t)
		return h.aguiStream(c, p, thread, runID, t, pos)
	}
	var text string
	if n := len(msgs); n > 0 && msgs[n-1].Role == "user" {
		text = aguiText(msgs[n-1].Content)
	}
	if strings.TrimSpace(text) == "" {
		return httpx.FieldErr(protocol.CodeBadRequest, "messages", "the last message must be a user message with text (or send resume[])")
	}
	res, err := interop.StartChatRun(ctx, h.core, p.Subject, thread, text, opts, map[string]any{aguiMetaKey: map[string]any{"run_id": runID}})
	if err != nil {
		return err
	}
	if res.Status != protocol.ResultAccepted {
		// A concurrent POST of the same runId may have started it.
		if meta, err := h.core.Journal().Session(ctx, thread); err == nil {
			if t, ok := h.aguiFirstTurn(ctx, meta.Runs, runID); ok {
				return h.aguiStream(c, p, thread, runID, t, pos)
			}
		}
		return httpx.ControlResult(c, res, nil, http.StatusOK)
	}
	started = true
	t := aguiTurn{Run: res.RunID}
	h.runs.Put(key, t)
	return h.aguiStream(c, p, thread, runID, t, pos)
}

// controlAnswer is a control's answer that is not "accepted", carried as an
// error to be answered as the control's own HTTP endpoint would.
type controlAnswer struct{ protocol.ControlResult }

func (a controlAnswer) Error() string { return a.Message }

// aguiFirstTurn finds, among the session's runs (newest first, the last
// 64), the one an AG-UI run runID started.
func (h *edge) aguiFirstTurn(ctx context.Context, runs []string, runID string) (aguiTurn, bool) {
	for i, n := len(runs)-1, 0; i >= 0 && n < 64; i, n = i-1, n+1 {
		meta, err := h.core.Journal().Run(ctx, runs[i])
		if err != nil {
			continue
		}
		var req struct {
			Metadata struct {
				AGUI struct {
					RunID string `json:"run_id"`
				} `json:"agui"`
			} `json:"metadata"`
		}
		if json.Unmarshal(meta.Request, &req) == nil && req.Metadata.AGUI.RunID == runID {
			return aguiTurn{Run: meta.ID}, true
		}
	}
	return aguiTurn{}, false
}

// aguiAnswer answers resume entries through the approval and clarify
// controls. Each interruptId must be a prompt of the session's active run
// (or its latest one); the AG-UI run that follows is the turn after the
// last prompt answered.
func (h *edge) aguiAnswer(ctx context.Context, subject, active, latest string, entries []aguiResume) (aguiTurn, error) {
	rid := active
	if rid == "" {
		rid = latest
	}
	type prompt struct {
		kind protocol.EventType
		turn int
	}
	prompts := map[string]prompt{}
	if rid != "" {
		n := 0
		err := interop.ScanRun(ctx, h.core, rid, func(e *protocol.Envelope) bool {
			if !IsPrompt(e.Type) {
				return true
			}
			n++
			var p struct {
				ApprovalID string `json:"approval_id"`
				ClarifyID  string `json:"clarify_id"`
			}
			if json.Unmarshal(e.Payload, &p) == nil {
				prompts[p.ApprovalID+p.ClarifyID] = prompt{kind: e.Type, turn: n}
			}
			return len(prompts) < 4096
		})
		if err != nil {
			return aguiTurn{}, err
		}
	}
	t := aguiTurn{Run: rid}
	for i, r := range entries {
		f := fmt.Sprintf("resume[%d].", i)
		pr, ok := prompts[r.InterruptID]
		if !ok {
			return t, httpx.FieldErr(protocol.CodeNotFound, f+"interruptId", "no such interrupt in the thread's current run")
		}
		m := protocol.Control{Type: protocol.MsgControl, ID: "agui", RunID: rid}
		answer := payloadString(r.Payload, "choice")
		if pr.kind == protocol.EventApprovalReq {
			m.Op, m.ApprovalID, m.Choice = protocol.OpApprove, r.InterruptID, answer
			if r.Status == "cancelled" {
				m.Choice = "deny"
			}
			if m.Choice == "" {
				return t, httpx.FieldErr(protocol.CodeBadRequest, f+"payload", `must be {"choice": …} or a choice string`)
			}
		} else {
			m.Op, m.ClarifyID, m.Response = protocol.OpClarify, r.InterruptID, payloadString(r.Payload, "response")
			if r.Status == "cancelled" {
				return t, httpx.FieldErr(protocol.CodeBadRequest, f+"status", "a clarification cannot be cancelled; answer it")
			}
			if m.Response == "" {
				return t, httpx.FieldErr(protocol.CodeBadRequest, f+"payload", `must be {"response": …} or a response string`)
			}
		}
		if err := protocol.ValidateControl(&m); err != nil {
			return t, err
		}
		res, err := h.core.Control(ctx, subject, &m, "")
		if err != nil {
			return t, err
		}
		if res.Status != protocol.ResultAccepted {
			return t, controlAnswer{res}
		}
		t.Turn = max(t.Turn, pr.turn)
	}
	return t, nil
}

// payloadString reads a resume payload: a JSON string, or an object's
// string member key.
func payloadString(raw json.RawMessage, key string) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		if json.Unmarshal(obj[key], &s) == nil {
			return s
		}
	}
	return ""
}

// aguiText is the text of an AG-UI user message's content: a string, or
// the text parts of a content array joined.
func aguiText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// aguiStream answers an AG-UI run: turn t of its runhub run as SSE, after
// pos when a Last-Event-ID named one.
func (h *edge) aguiStream(c echo.Context, p hub.Principal, thread, runID string, t aguiTurn, pos Position) error {
	ctx := c.Request().Context()
	if pos.RunID != "" {
		meta, err := h.core.Journal().Run(ctx, t.Run)
		if err != nil {
			return h.core.PublicError(err)
		}
		if pos.RunID != t.Run || pos.Seq > meta.LastSeq {
			return protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID is not a position of this AG-UI run")
		}
	}
	ctx, cancel := httpx.StreamContext(ctx, h.core.Context(), p.Expires)
	defer cancel()
	w := httpx.StartSSE(ctx, c, h.core.Config().SSEKeepAlive, nil)
	defer w.Close()
	var m Turns
	buf := make([]byte, 0, 1024)
	for e, err := range h.core.Observe(ctx, t.Run, 0) {
		if err != nil {
			return nil
		}
		out := m.Map(&e)
		buf = buf[:0]
		end := false
		for k, te := range out {
			if te.Turn != t.Turn || end {
				continue
			}
			ev := te.Event
			switch ev.Type() {
			case RunStarted:
				ev["runId"], ev["threadId"] = runID, thread
				delete(ev, "input")
				md, _ := ev["metadata"].(map[string]any)
				if md == nil {
					md = map[string]any{}
					ev["metadata"] = md
				}
				rh, _ := md["runhub"].(map[string]any)
				if rh == nil {
					rh = map[string]any{}
					md["runhub"] = rh
				}
				rh["run_id"] = t.Run
			case RunFinished:
				ev["runId"], ev["threadId"] = runID, thread
				end = true
			case RunError:
				end = true
			}
			if pos.RunID != "" && pos.Skip(e.Seq, k) {
				continue
			}
			data, err := json.Marshal(ev)
			if err != nil {
				return nil
			}
			buf = httpx.AppendSSE(buf, EventID(t.Run, e.Seq, k), "", data)
		}
		if len(buf) > 0 {
			if err := w.Write(buf); err != nil {
				return nil
			}
		}
		if end || e.Terminal {
			return nil
		}
	}
	return nil
}
