package hermes

import (
	"context"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/protocol"
)

// startBody is the body of POST /v1/runs.
type startBody struct {
	Input               string        `json:"input"`
	SessionID           string        `json:"session_id,omitempty"`
	Instructions        string        `json:"instructions,omitempty"`
	ConversationHistory []driver.Turn `json:"conversation_history,omitempty"`
	Model               string        `json:"model,omitempty"`
}

// startedPrefix begins the progress event that journals the upstream run
// id right after the start (see upstreamID): start-up recovery reads it
// back to stop a Hermes run a killed hub left going.
const startedPrefix = "started Hermes run "

// start admits the upstream run and journals its id.
//
// Hermes Agent (0.18.x) ignores Idempotency-Key on POST /v1/runs: every
// request that reaches it launches a run. So a start is sent again only
// when it provably never reached Hermes (the connection could not be
// opened), or when Config.IdempotentStart says the server replays a
// retried key. Any other failure without an answer (a connection cut after
// the request was sent, a timeout, a gateway's 502/503/504) ends the run
// with a provider error naming the uncertainty, instead of risking a
// second Hermes run that calls the model again.
func (r *run) start(ctx context.Context, history []driver.Turn) error {
	r.model = r.x.Request.Model
	if r.model == "" {
		r.model = r.cfg.Model
	}
	body := startBody{Input: r.x.Request.Message, SessionID: r.x.SessionID, Instructions: r.cfg.Instructions,
		ConversationHistory: history, Model: r.model}
	// The key goes out only when the server honours it: Go's HTTP client
	// itself replays a request carrying Idempotency-Key when a reused
	// connection breaks, which would launch a second run on a server that
	// ignores the key.
	var hdr http.Header
	if r.cfg.IdempotentStart {
		hdr = http.Header{"Idempotency-Key": {r.x.RunID}}
	}
	var ans struct {
		RunID    string `json:"run_id"`
		Status   string `json:"status"`
		Replayed bool   `json:"replayed"`
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			r.log.Warn("retrying the Hermes start", "attempt", attempt+1, "err", err)
			if err := ctxsleep.Sleep(ctx, time.Duration(250<<attempt)*time.Millisecond); err != nil {
				return err
			}
		}
		err = r.c.call(ctx, http.MethodPost, "/v1/runs", body, &ans, hdr)
		if err == nil || ctx.Err() != nil || !r.mayRetryStart(err) {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		de := r.startError(err)
		r.log.Warn("the Hermes start failed", "code", de.Code, "err", de.Message)
		return de
	}
	if ans.RunID == "" {
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "Hermes accepted the run without a run_id"}
	}
	r.id = ans.RunID
	r.log = r.log.With("hermes_run_id", r.id)
	r.log.Info("Hermes run started", "status", ans.Status, "replayed", ans.Replayed, "history_turns", len(history))
	if validRunID(r.id) {
		if err := r.progress(ctx, startedPrefix+r.id); err != nil {
			return r.giveUp(ctx, err)
		}
	}
	return nil
}

// mayRetryStart reports whether a failed start may be sent again without
// risking a second Hermes run.
func (r *run) mayRetryStart(err error) bool {
	return notSent(err) || (r.cfg.IdempotentStart && retryable(err))
}

// notSent reports whether a request failed before any of it could reach
// the server: the connection was never opened (refused, no route, a name
// that does not resolve, a dial timeout).
func notSent(err error) bool {
	var op *net.OpError
	return statusOf(err) == 0 && errors.As(err, &op) && op.Op == "dial"
}

// retryable reports whether a request may be sent again to a server that
// deduplicates it: no answer came (transport failure) or a gateway in front
// of Hermes failed.
func retryable(err error) bool {
	switch statusOf(err) {
	case 0:
		return true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// errStartUncertain ends the message of a start that may have reached
// Hermes.
const errStartUncertain = "the start request may have reached Hermes; it was not retried, to avoid a duplicate Hermes run"

func (r *run) startError(err error) *driver.Error {
	status := statusOf(err)
	uncertain := !notSent(err) && retryable(err)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &driver.Error{Code: CodeAuth, Message: "Hermes refused the API key (" + err.Error() + ")"}
	case status == http.StatusTooManyRequests:
		return &driver.Error{Code: CodeRateLimited, Message: "Hermes is rate limiting runs (" + err.Error() + ")"}
	case status == http.StatusNotFound:
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "no Hermes /v1/runs API at the configured base URL (" + err.Error() + ")"}
	case status >= 400 && status < 500:
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "Hermes refused the run (" + err.Error() + ")"}
	case uncertain && r.cfg.IdempotentStart:
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "no answer from Hermes to the start after 3 attempts (" + r.c.scrub(err.Error()) + ")"}
	case uncertain && status != 0:
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "a gateway in front of Hermes failed the start (" + err.Error() + "); " + errStartUncertain}
	case uncertain:
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "lost the answer to the start (" + r.c.scrub(err.Error()) + "); " + errStartUncertain}
	case status >= 500:
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "Hermes failed to start the run (" + err.Error() + ")"}
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: "cannot reach Hermes: " + r.c.scrub(err.Error())}
}

// reRunID is what an upstream run id journaled for recovery may look like
// (Hermes' are run_ and 32 hex digits).
var reRunID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

func validRunID(id string) bool { return reRunID.MatchString(id) }

// upstreamID reads the upstream run id from a progress text start
// journaled, or "".
func upstreamID(text string) string {
	id, ok := strings.CutPrefix(text, startedPrefix)
	if !ok || !validRunID(id) {
		return ""
	}
	return id
}
