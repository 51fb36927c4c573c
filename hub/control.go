package hub

import (
	"context"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/protocol"
)

// ControlTimeout bounds one control's trip through the runtime.
const ControlTimeout = 15 * time.Second

// control handles a control message and answers control_result.
func (c *conn) control(m *protocol.Control) {
	ctx, cancel := context.WithTimeout(c.ctx, ControlTimeout)
	defer cancel()
	res, err := c.hub.Control(ctx, c.subject, m, m.ID)
	if err != nil {
		if code := protocol.CodeOf(err); code == protocol.CodeInternal || code == protocol.CodeUnavailable {
			c.log.Warn("control failed", "conn_id", c.id, "op", m.Op, "session_id", m.SessionID, "run_id", m.RunID, "code", code)
		}
		c.answerFailed(m.ID, protocol.CodeOf(err), httpx.SafeMessage(err))
		return
	}
	c.send(protocol.ControlResultMessage{Type: protocol.MsgControlResult, ID: m.ID, ControlResult: res})
}

// answerFailed answers control id that failed before any ControlResult
// existed: an error naming it, then control_result not-active with the
// same message (docs/protocol.md §5.7).
func (c *conn) answerFailed(id string, code protocol.Code, msg string) {
	c.sendError(code, msg, id)
	c.send(protocol.ControlResultMessage{Type: protocol.MsgControlResult, ID: id,
		ControlResult: protocol.ControlResult{Status: protocol.ResultNotActive, Message: msg}})
}

// Control executes one control for subject through the runtime. Errors are
// *protocol.Error values safe to show; a ControlResult carries every bounded
// outcome (accepted, not-active, expired, conflict, unsupported). The hub
// applies its limit of runs to a control that may start one; the runtime
// checks the caller owns the run or session, on the one meta it reads.
func (h *Hub) Control(ctx context.Context, subject string, m *protocol.Control, key string) (res protocol.ControlResult, err error) {
	defer func() { h.cfg.Metrics.Control(m.Op, res.Status, err) }()
	c := adapter.NewControl(m, subject, key)
	if c.MayStartRun() {
		release, err := h.runGate(ctx, subject, m.SessionID)
		if err != nil {
			return protocol.ControlResult{}, err
		}
		defer release()
	}
	// A queue or goal changes the session: the journal announces it on
	// every hub's feed (journal.SessionChanged), so its status follows.
	res, err = h.runtime.Control(ctx, c)
	if err == nil && res.Accepted && res.RunID != "" && m.Op == protocol.OpStart {
		if w, msg := h.waiting(ctx); w != "" {
			res.Message = msg // the run is queued for a runner none is taking
		}
	}
	return res, h.PublicError(err)
}
