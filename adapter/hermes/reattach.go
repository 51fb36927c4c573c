package hermes

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Reattachable implements driver.Reattacher: a run whose start journaled
// its Hermes run id can be followed again after a hub restart.
func (d *Driver) Reattachable(ctx context.Context, o driver.Orphan) (bool, error) {
	id, err := journaledID(ctx, o)
	return id != "", err
}

// restoreBudget bounds the read of the run's journal when it is
// re-attached, even when the run is being cancelled.
const restoreBudget = 30 * time.Second

// Reattach implements driver.Reattacher: the Hermes run a previous hub
// process started, which Hermes kept running, is followed again. Its
// status (GET /v1/runs/{id}) decides: a run that ended meanwhile ends the
// same way here (completed → done with the output the journal lacks);
// one Hermes no longer knows (404) ends with error interrupted; one that
// waits on an approval the journal never saw, or on a clarify question
// whose answer can no longer reach it, ends with error interrupted and is
// stopped; any other is followed as after a cut stream — resubscribed,
// its status polled alongside, and by its status alone when Hermes
// dropped its event stream. An approval journaled before the restart and
// not resolved is asked again (without a second approval.requested).
//
// The text Hermes streams after the restart is not journaled: the stream
// has no ids nor replay, and what it sent while the hub was down is
// partly lost. The run's final output is, when it completes: the part of
// it the journal lacks continues the message it holds, or is a message of
// its own when the journal's last message is an earlier one — never text
// journaled twice. The run's timeout (Config.Timeout) counts again from
// the re-attach.
func (d *Driver) Reattach(ctx context.Context, x *driver.Execution, o driver.Orphan) (*protocol.Usage, error) {
	return d.timed(ctx, func(ctx context.Context) (*protocol.Usage, error) { return d.reattach(ctx, x, o) })
}

func (d *Driver) reattach(ctx context.Context, x *driver.Execution, o driver.Orphan) (*protocol.Usage, error) {
	r := d.newRun(ctx, x)
	defer r.end()
	r.reattached = true
	r.model = cmp.Or(x.Request.Model, d.cfg.Model)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreBudget)
	rs, err := r.restore(rctx, o)
	cancel()
	if err != nil {
		r.log.Error("read the run's journal to re-attach it", "err", journal.RedactString(err.Error()))
		return nil, &driver.Error{Code: protocol.ErrorInternal, Message: "could not read the run's journal to follow its Hermes run again"}
	}
	if r.id == "" {
		return nil, &driver.Error{Code: protocol.ErrorInterrupted, Message: "the hub restarted while the run was active"}
	}
	r.log = r.log.With("hermes_run_id", r.id)
	if d.cfg.APIKeyEnv != "" && d.cfg.APIKey.Empty() {
		return nil, &driver.Error{Code: CodeAuth,
			Message: "the API key variable " + d.cfg.APIKeyEnv + " is not set where this run executes; its Hermes run cannot be followed after the hub restarted"}
	}
	usage, err := r.reattach(ctx, rs)
	return r.ended(ctx, usage, err)
}

// restored is what the journal holds of the prompts of a run re-attached.
type restored struct {
	approval *protocol.ApprovalRequestedPayload // journaled and not resolved
	clarify  string                             // the id of a clarify journaled and not resolved
}

// restore rebuilds the mapping state from the run's journaled events: the
// upstream run id, the numbering of messages, reasoning blocks, tool calls
// and prompts, the open reasoning block and tool calls, the text of the
// last message, and the prompts not resolved.
func (r *run) restore(ctx context.Context, o driver.Orphan) (restored, error) {
	type tool struct{ id, name string }
	var open []tool
	var lastMsg string
	approvals := map[string]protocol.ApprovalRequestedPayload{}
	clarifies := map[string]bool{}
	err := o.Events(ctx, func(e protocol.Envelope) error {
		switch e.Type {
		case protocol.EventProgress:
			if p, err := protocol.DecodePayload[protocol.ProgressPayload](&e); err == nil && r.id == "" {
				r.id = upstreamID(p.Text)
			}
		case protocol.EventTokenDelta:
			p, err := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			if err != nil {
				return nil
			}
			r.msgN = max(r.msgN, idNum(p.MessageID, "m"))
			if p.MessageID != lastMsg {
				lastMsg = p.MessageID
				r.msgText.Reset()
				r.msgFull = false
			}
			r.keepMessage(p.Text)
			r.keepAnswer(p.Text)
			r.newMessage = false
		case protocol.EventReasoningDelta:
			if p, err := protocol.DecodePayload[protocol.ReasoningPayload](&e); err == nil {
				r.blockN = max(r.blockN, idNum(p.BlockID, "b"))
				r.blockOpen = true
			}
		case protocol.EventReasoningDone:
			r.blockOpen = false
		case protocol.EventToolStarted:
			if p, err := protocol.DecodePayload[protocol.ToolStartedPayload](&e); err == nil {
				r.toolN = max(r.toolN, idNum(p.ToolCallID, "t"))
				open = append(open, tool{p.ToolCallID, p.Name})
				r.newMessage = true
			}
		case protocol.EventToolDone:
			if p, err := protocol.DecodePayload[protocol.ToolDonePayload](&e); err == nil {
				for i, t := range open {
					if t.id == p.ToolCallID {
						open = append(open[:i], open[i+1:]...)
						break
					}
				}
			}
		case protocol.EventApprovalReq:
			if p, err := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&e); err == nil {
				r.promptN = max(r.promptN, idNum(p.ApprovalID, "a"))
				approvals[p.ApprovalID] = p
				r.newMessage = true
			}
		case protocol.EventApprovalRes:
			if p, err := protocol.DecodePayload[protocol.ApprovalResolvedPayload](&e); err == nil {
				delete(approvals, p.ApprovalID)
			}
		case protocol.EventClarifyReq:
			if p, err := protocol.DecodePayload[protocol.ClarifyRequestedPayload](&e); err == nil {
				r.promptN = max(r.promptN, idNum(p.ClarifyID, "c"))
				clarifies[p.ClarifyID] = true
				r.newMessage = true
			}
		case protocol.EventClarifyRes:
			if p, err := protocol.DecodePayload[protocol.ClarifyResolvedPayload](&e); err == nil {
				delete(clarifies, p.ClarifyID)
			}
		}
		return nil
	})
	if err != nil {
		return restored{}, err
	}
	for _, t := range open {
		r.tools[t.name] = append(r.tools[t.name], openTool{id: t.id, start: time.Now()})
	}
	var rs restored
	for id, p := range approvals { // one prompt is asked at a time: the latest
		if rs.approval == nil || idNum(id, "a") > idNum(rs.approval.ApprovalID, "a") {
			rs.approval = &p
		}
	}
	for id := range clarifies {
		if rs.clarify == "" || idNum(id, "c") > idNum(rs.clarify, "c") {
			rs.clarify = id
		}
	}
	return rs, nil
}

// idNum is the number of an id the driver made (prefix and a number), or 0.
func idNum(id, prefix string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, prefix))
	if err != nil || !strings.HasPrefix(id, prefix) {
		return 0
	}
	return n
}

// reattach checks the upstream run and follows it.
func (r *run) reattach(ctx context.Context, rs restored) (*protocol.Usage, error) {
	st, err := r.pollReattach(ctx)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case statusOf(err) == http.StatusNotFound:
		return nil, r.goneError(err)
	case err != nil:
		return nil, &driver.Error{Code: protocol.ErrorProviderError,
			Message: "cannot reach Hermes to follow run " + r.id + " again after the hub restarted: " + err.Error()}
	}
	r.log.Info("re-attaching the Hermes run after a hub restart", "status", st.Status)
	if err := r.progress(ctx, "following Hermes run "+r.id+" again after a hub restart"); err != nil {
		return nil, err
	}
	if o, ok := r.settle(ctx, st); ok {
		return o.usage, o.err
	}
	switch {
	case rs.clarify != "":
		return nil, r.giveUp(ctx, &driver.Error{Code: protocol.ErrorInterrupted,
			Message: "Hermes run " + r.id + " asked a question before the hub restarted, and the answer can no longer reach it; the Hermes run was stopped"})
	case rs.approval != nil:
		r.reopen(*rs.approval)
	case st.Status == statusWaitingApproval:
		return nil, r.giveUp(ctx, r.unseenApproval())
	}
	return r.follow(ctx)
}

// statusWaitingApproval is the status of a Hermes run waiting on an
// approval.
const statusWaitingApproval = "waiting_for_approval"

// pollReattach reads the run's status, trying again for StreamIdleTimeout
// while Hermes cannot be reached (it may be restarting too).
func (r *run) pollReattach(ctx context.Context) (runStatus, error) {
	deadline := time.Now().Add(r.cfg.StreamIdleTimeout)
	for {
		st, err := r.poll(ctx)
		if s := statusOf(err); err == nil || ctx.Err() != nil || (s != 0 && s < 500) || time.Now().After(deadline) {
			return st, err
		}
		r.log.Warn("cannot reach Hermes to re-attach the run; trying again", "err", err)
		if ctxsleep.Sleep(ctx, r.cfg.PollInterval) != nil {
			return st, ctx.Err()
		}
	}
}

// goneError ends a re-attached run Hermes no longer knows.
func (r *run) goneError(err error) error {
	return &driver.Error{Code: protocol.ErrorInterrupted,
		Message: "Hermes no longer knows run " + r.id + " (" + err.Error() + "): its status expired or the Hermes server restarted while the hub was down, so how it ended is lost"}
}

// unseenApproval ends a re-attached run Hermes asked an approval the
// journal never saw.
func (r *run) unseenApproval() error {
	return &driver.Error{Code: protocol.ErrorInterrupted,
		Message: "Hermes run " + r.id + " waits on an approval it asked while the hub was restarting, which the hub never saw and nobody can answer; the Hermes run was stopped"}
}

// reopen asks the user again, without journaling it again, an approval
// journaled before the restart.
func (r *run) reopen(req protocol.ApprovalRequestedPayload) {
	p := &prompt{kind: kindApproval, id: req.ApprovalID, approval: req}
	a := r.x.ReopenApproval(req)
	r.log.Info("the approval journaled before the restart waits on the user again", "approval_id", req.ApprovalID)
	r.work(p, func() error { return r.awaitApproval(p, a) })
}

// watch follows a re-attached run by its status alone, every PollInterval,
// once Hermes dropped its event stream: it ends as the status says, with
// a clear error when Hermes no longer knows it, and stops it when it waits
// on an approval nobody here saw (two polls in a row, no prompt asked).
// Steering and the answers to an approval asked again go on meanwhile.
func (r *run) watch(ctx context.Context) (*protocol.Usage, error) {
	r.log.Info("Hermes has no event stream for the run any more; following it by its status")
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	waiting := 0
	var failing time.Time
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case res := <-r.results:
			if o := r.promptDone(ctx, res); o.final {
				return o.usage, o.err
			}
			continue
		case text := <-r.x.Steering():
			r.steer(text)
			continue
		case <-t.C:
		}
		var st runStatus
		err := r.c.call(ctx, http.MethodGet, r.runPath(""), nil, &st, nil)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case statusOf(err) == http.StatusNotFound:
			return nil, r.goneError(err)
		case err != nil:
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) > r.cfg.StreamIdleTimeout {
				return nil, r.giveUp(ctx, &driver.Error{Code: protocol.ErrorProviderError,
					Message: "cannot reach Hermes to follow run " + r.id + ": " + err.Error()})
			}
			continue
		}
		failing = time.Time{}
		if o, ok := r.settle(ctx, st); ok {
			return o.usage, o.err
		}
		if st.Status == statusWaitingApproval && r.active == nil {
			waiting++
		} else {
			waiting = 0
		}
		if waiting >= 2 {
			return nil, r.giveUp(ctx, r.unseenApproval())
		}
	}
}

// completeReattached journals the part of a re-attached run's final
// output the journal lacks: what follows the text of the message it holds
// (redacted as the journal holds it), or all of it, as a message of its
// own, when that message is not the output's beginning (an earlier
// message, before tool calls the hub did not see).
func (r *run) completeReattached(ctx context.Context, output string) error {
	if output == "" || r.msgFull {
		return nil
	}
	held := ""
	if !r.newMessage {
		held = strings.TrimLeftFunc(r.msgText.String(), unicode.IsSpace)
	}
	for _, out := range []string{output, journal.RedactString(output)} {
		if rest, ok := strings.CutPrefix(out, held); ok {
			return r.emitText(ctx, rest)
		}
		if strings.HasPrefix(held, strings.TrimRightFunc(out, unicode.IsSpace)) {
			return nil // the journal holds all of it
		}
	}
	r.log.Info("the final output is not the message journaled before the restart; journaling it as a message of its own")
	r.newMessage = true
	return r.emitText(ctx, output)
}
