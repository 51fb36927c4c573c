package driver

import (
	"context"
	"encoding/json"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Resume is the executor's, for a run re-attached after a restart (see
// Reattacher): it reads the run's journaled events so that x goes on from
// them — its last seq, whether output was streamed, and the text of the
// last assistant message, which text the driver emits under that
// message's id continues (done's result is the whole message). It
// reports whether the run was cancelling (a user's cancel journaled, the
// run not ended): the executor then cancels it again. Build x with a
// KeyScope of its own.
func (x *Execution) Resume(ctx context.Context) (cancelling bool, err error) {
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	var last uint64
	err = journal.ReadAll(ctx, x.log, x.RunID, 0, func(e protocol.Envelope) error {
		last = max(last, e.Seq)
		switch e.Type {
		case protocol.EventTokenDelta:
			var p protocol.TokenDeltaPayload
			if json.Unmarshal(e.Payload, &p) == nil {
				x.answer.add(p.MessageID, p.Text)
			}
			x.streamed.Store(true)
		case protocol.EventReasoningDelta, protocol.EventToolStarted, protocol.EventToolUpdated, protocol.EventToolDone:
			x.streamed.Store(true)
		case protocol.EventStatus:
			var p protocol.StatusPayload
			if json.Unmarshal(e.Payload, &p) == nil && p.Status == protocol.StatusCancelling {
				cancelling = true
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	x.mu.Lock()
	x.lastSeq = max(x.lastSeq, last)
	x.cancelling = x.cancelling || cancelling
	x.mu.Unlock()
	return cancelling, nil
}

// ReopenApproval makes an approval the run journaled before a restart,
// and that was never resolved, pending again without journaling its
// request a second time (a Reattacher's run): a user's answer reaches
// Wait, which journals the one approval.resolved.
func (x *Execution) ReopenApproval(req protocol.ApprovalRequestedPayload) *PendingApproval {
	p := &prompt{id: req.ApprovalID, answer: make(chan string, 1), choices: req.Choices}
	x.mu.Lock()
	x.approval = p
	x.mu.Unlock()
	return &PendingApproval{x: x, p: p, req: req}
}
