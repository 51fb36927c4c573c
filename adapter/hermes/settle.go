package hermes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/protocol"
)

// follow holds the run's one subscriber. When the stream breaks it polls
// the run: a run still going is resubscribed, one that settled ends the
// same way here, one that is gone ends with a clear error.
//
// A resubscribed stream is not trusted to bring the terminal event: Hermes
// Agent (0.18.x) keeps one event queue per run, which a resubscriber shares
// with the handler of the broken connection until that handler notices the
// dead socket and drops the queue; every later event is then lost and the
// new stream carries only keepalives. So after any reconnect the run's
// status is polled alongside the stream (settleWatch), and a terminal
// status there ends the run.
func (r *run) follow(ctx context.Context) (*protocol.Usage, error) {
	breaks := 0
	for {
		o := r.stream(ctx, breaks > 0 || r.reattached)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if o.final {
			return o.usage, o.err
		}
		if o.gone && r.reattached {
			// Hermes dropped the queue of a run whose subscriber went away
			// with the hub: its status is all there is to follow.
			return r.watch(ctx)
		}
		if o.gone && breaks > 0 {
			// Hermes dropped the run's queue: the run may have ended
			// meanwhile; otherwise it cannot be followed any more.
			if st, err := r.poll(ctx); err == nil {
				if s, ok := r.settle(ctx, st); ok {
					return s.usage, s.err
				}
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, r.giveUp(ctx, &driver.Error{Code: protocol.ErrorInterrupted,
				Message: "lost the Hermes event stream (" + o.broken + ") and Hermes cannot resume it; the Hermes run was stopped"})
		}
		breaks++
		r.log.Warn("the Hermes event stream broke; polling the run", "reason", o.broken, "breaks", breaks)
		st, err := r.poll(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if statusOf(err) == http.StatusNotFound {
			return nil, &driver.Error{Code: protocol.ErrorInterrupted,
				Message: "the Hermes run is gone (" + err.Error() + ") after its event stream broke (" + o.broken + ")"}
		}
		if err != nil {
			return nil, r.giveUp(ctx, &driver.Error{Code: protocol.ErrorProviderError,
				Message: "lost the Hermes event stream (" + o.broken + ") and cannot reach Hermes to check the run: " + err.Error()})
		}
		if s, ok := r.settle(ctx, st); ok {
			return s.usage, s.err
		}
		if breaks > r.cfg.MaxReconnects {
			return nil, r.giveUp(ctx, &driver.Error{Code: protocol.ErrorInterrupted,
				Message: fmt.Sprintf("the Hermes event stream broke %d times (last: %s); the Hermes run was stopped", breaks, o.broken)})
		}
		r.log.Info("the Hermes run is still going; resubscribing", "status", st.Status)
		if _, err := r.x.Emit(ctx, protocol.EventProgress, protocol.ProgressPayload{Text: "reconnecting to Hermes"}); err != nil {
			return nil, err
		}
	}
}

// runStatus is the answer of GET /v1/runs/{id}.
type runStatus struct {
	Status string          `json:"status"`
	Output string          `json:"output"`
	Error  json.RawMessage `json:"error"`
	Usage  json.RawMessage `json:"usage"`
}

// terminal reports whether the status is one a run ends in.
func (st runStatus) terminal() bool {
	switch st.Status {
	case "completed", "failed", "cancelled", "interrupted":
		return true
	}
	return false
}

// settle ends the run the way Hermes says it ended, when st is terminal:
// completed → the output not streamed yet and usage.final (done), failed →
// provider_error, cancelled → cancelled, interrupted (the Hermes server
// restarted) → interrupted.
func (r *run) settle(ctx context.Context, st runStatus) (outcome, bool) {
	switch st.Status {
	case "completed":
		if err := r.flushThought(ctx, st.Output); err != nil {
			return finalErr(err), true
		}
		if err := r.closeReasoning(ctx); err != nil {
			return finalErr(err), true
		}
		u, err := r.completed(ctx, st.Output, st.Usage)
		return outcome{final: true, usage: u, err: err}, true
	case "failed":
		return finalErr(r.failed(st.Error)), true
	case "cancelled":
		return finalErr(&driver.Cancelled{Reason: "the run was stopped in Hermes"}), true
	case "interrupted":
		return finalErr(&driver.Error{Code: protocol.ErrorInterrupted,
			Message: "the Hermes server restarted before the run settled"}), true
	}
	return outcome{}, false
}

// poll reads the upstream run's status, retrying transient failures.
func (r *run) poll(ctx context.Context) (runStatus, error) {
	var st runStatus
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			if err := ctxsleep.Sleep(ctx, r.cfg.PollInterval); err != nil {
				return st, err
			}
		}
		st = runStatus{}
		if err = r.c.call(ctx, http.MethodGet, r.runPath(""), nil, &st, nil); err == nil {
			return st, nil
		}
		if s := statusOf(err); s != 0 && s < 500 {
			return st, err
		}
	}
	return st, err
}

// settleWatch polls the run's status every PollInterval while a
// resubscribed stream is followed, and reports the first terminal status
// on the returned channel. For a re-attached run it also reports a run
// that waits on an approval on two polls in a row (the stream may have
// lost the request: see unseenApproval). It stops when ctx ends; stop
// waits for it.
func (r *run) settleWatch(ctx context.Context) (terminal <-chan runStatus, stop func()) {
	ch := make(chan runStatus, 1)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		waiting := 0
		for ctxsleep.Sleep(ctx, r.cfg.PollInterval) == nil {
			var st runStatus
			err := r.c.call(ctx, http.MethodGet, r.runPath(""), nil, &st, nil)
			if err != nil {
				// The stream is still the main channel: a failed poll is
				// tried again, and a broken stream is handled by follow.
				if ctx.Err() == nil {
					r.log.Debug("poll the Hermes run alongside its stream", "err", err)
				}
				continue
			}
			if st.terminal() {
				select {
				case <-ch: // a waiting report not taken: the end matters more
				default:
				}
				ch <- st
				return
			}
			if r.reattached && st.Status == statusWaitingApproval {
				waiting++
			} else {
				waiting = 0
			}
			if waiting >= 2 {
				select {
				case ch <- st:
				default:
				}
			}
		}
	}()
	return ch, func() { cancel(); wg.Wait() }
}

// settleGrace is how long a stream may still bring its own terminal event
// once the status poll found the run ended: the stream's events are the
// richer account (tool activity, pending steer), the poll the fallback.
func (r *run) settleGrace() time.Duration { return r.cfg.PollInterval }
