package agui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Error codes of this driver besides protocol's provider_error and
// timeout (the openai driver's).
const (
	CodeAuth        = "auth"
	CodeRateLimited = "rate_limited"
)

// Defaults and bounds.
const (
	DefaultIdleTimeout = 120 * time.Second
	maxErrorBody       = 64 << 10
	// maxTurns bounds the AG-UI runs of one runhub run (an agent that
	// interrupts without end).
	maxTurns = 64
)

// Config is one profile's driver settings.
type Config struct {
	URL            string            // the agent's endpoint (POST)
	Headers        map[string]string // sent with every request
	APIKey         profile.Secret    // sent as Authorization: Bearer; empty: none
	APIKeyEnv      string
	ForwardedProps json.RawMessage // RunAgentInput.forwardedProps (default {})
	Tools          json.RawMessage // RunAgentInput.tools (default [])
	Context        json.RawMessage // RunAgentInput.context (default [])
	State          json.RawMessage // RunAgentInput.state of a run's first AG-UI run (default {})
	OwnsHistory    bool            // the agent keeps the thread's history: send only the new message
	IdleTimeout    time.Duration   // longest silence of a stream (default 120s)
	Timeout        time.Duration   // bound on a whole run, its prompts included (0: none)
	ClarifyTimeout time.Duration   // a clarify prompt's expiry (0: none)
	Client         *http.Client
	Logger         *slog.Logger
}

// Driver runs an AG-UI agent: one POST of a RunAgentInput per AG-UI run,
// its SSE answer mapped onto the runhub run's events.
type Driver struct{ cfg Config }

// New returns a driver for cfg.
func New(cfg Config) (*Driver, error) {
	if cfg.URL == "" {
		return nil, errors.New("agui: url is required")
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.ForwardedProps = orJSON(cfg.ForwardedProps, `{}`)
	cfg.Tools = orJSON(cfg.Tools, `[]`)
	cfg.Context = orJSON(cfg.Context, `[]`)
	cfg.State = orJSON(cfg.State, `{}`)
	return &Driver{cfg: cfg}, nil
}

// orJSON is raw, or def when raw is empty or null.
func orJSON(raw json.RawMessage, def string) json.RawMessage {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" {
		return json.RawMessage(def)
	}
	return raw
}

// Causes of an aborted request.
var (
	errIdle       = errors.New("idle timeout")
	errRunTimeout = errors.New("run timeout")
)

// Execute implements driver.Driver: the run's first AG-UI run, then, for
// each interrupt outcome, the prompts it asks and the continuing AG-UI run
// their answers start (resume), until a run ends otherwise.
func (d *Driver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	if d.cfg.Timeout <= 0 {
		return d.execute(ctx, x)
	}
	// timeout bounds the whole run: its AG-UI runs and the prompts between.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := time.AfterFunc(d.cfg.Timeout, func() { cancel(errRunTimeout) })
	defer t.Stop()
	u, err := d.execute(rctx, x)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errRunTimeout) {
		return nil, &driver.Error{Code: protocol.ErrorTimeout, Message: fmt.Sprintf("the run exceeded its %s timeout", d.cfg.Timeout)}
	}
	return u, err
}

func (d *Driver) execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	begin := time.Now()
	if d.cfg.APIKeyEnv != "" && d.cfg.APIKey.Empty() {
		return nil, &driver.Error{Code: CodeAuth,
			Message: "the API key variable " + d.cfg.APIKeyEnv + " is not set where this run executes"}
	}
	first, err := d.messages(ctx, x)
	if err != nil {
		return nil, err
	}
	m := newMapper(x)
	in := runInput{ThreadID: x.SessionID, RunID: x.RunID, ProtocolVersion: ProtocolVersion, State: d.cfg.State,
		Messages: first, Tools: d.cfg.Tools, Context: d.cfg.Context, ForwardedProps: d.cfg.ForwardedProps}
	log := d.cfg.Logger.With("run_id", x.RunID, "session_id", x.SessionID)
	for turn := 0; ; turn++ {
		m.begin()
		if err := d.stream(ctx, in, m, log); err != nil {
			return nil, err
		}
		if e := m.runErr; e != nil {
			msg := "the agent failed: " + *e.Message
			if e.Code != nil && *e.Code != "" {
				msg += " (" + *e.Code + ")"
			}
			return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: d.safe(msg)}
		}
		o := m.outcome
		switch o.Type {
		case "cancelled":
			return nil, &driver.Cancelled{Reason: "the agent cancelled its run"}
		case "interrupt":
			if turn+1 >= maxTurns {
				return nil, &driver.Error{Code: protocol.ErrorProviderError,
					Message: fmt.Sprintf("the agent interrupted %d runs in a row", maxTurns)}
			}
			resume, err := d.answer(ctx, x, m, o.Interrupts)
			if err != nil {
				return nil, err
			}
			in.RunID = x.RunID + "." + strconv.Itoa(turn+1)
			in.Resume = resume
			if m.state != nil {
				in.State = m.state
			}
			in.Messages = m.conv
			if !m.convSnap {
				in.Messages = append(append([]message{}, first...), m.conv...)
			}
			continue
		}
		if len(o.PendingToolCallIDs) > 0 {
			if err := d.pending(ctx, m, o.PendingToolCallIDs); err != nil {
				return nil, err
			}
		}
		u := &protocol.Usage{Model: cmp.Or(m.usage.Model, x.Request.Model), Provider: cmp.Or(m.usage.Provider, Kind),
			InputTokens: m.usage.InputTokens, OutputTokens: m.usage.OutputTokens, DurationMS: time.Since(begin).Milliseconds()}
		if _, err := x.Emit(ctx, protocol.EventUsageFinal, u); err != nil {
			return nil, err
		}
		return u, nil
	}
}

// pending journals a success that left frontend tool calls for the
// application to answer: AG-UI's client runs them and starts the next run
// with their results; runhub has no frontend to run them, so the run ends
// done with the calls shown as they are: started, with no result.
func (d *Driver) pending(ctx context.Context, m *mapper, ids []string) error {
	local := make([]string, 0, len(ids))
	for _, id := range ids {
		local = append(local, m.localID("t", id))
	}
	b, _ := json.Marshal(map[string]any{"type": RunFinished, "outcome": map[string]any{"type": "success", "pendingToolCallIds": ids}})
	return m.progress(ctx, "the agent left tool calls for the application to run: "+strings.Join(local, ", "), RunFinished, b)
}

// stream POSTs in and maps the answer into m until its RUN_FINISHED or
// RUN_ERROR. The idle timeout bounds each silence.
func (d *Driver) stream(ctx context.Context, in runInput, m *mapper, log *slog.Logger) error {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(d.cfg.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()

	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return &driver.Error{Code: protocol.ErrorProviderError, Message: "invalid agent request: " + err.Error()}
	}
	for k, v := range d.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if !d.cfg.APIKey.Empty() {
		req.Header.Set("Authorization", "Bearer "+d.cfg.APIKey.Reveal())
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return d.aborted(ctx, rctx, err, "could not reach the agent")
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return d.statusError(ctx, resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return &driver.Error{Code: protocol.ErrorProviderError,
			Message: d.safe(fmt.Sprintf("the agent answered %q, not an AG-UI event stream (text/event-stream)", protocol.Truncate(mt, 80)))}
	}
	fr := newFrameReader(resp.Body)
	for {
		data, cut, err := fr.next()
		if err != nil {
			if errors.Is(err, errFrameTooLong) {
				return &driver.Error{Code: protocol.ErrorProviderError, Message: "the agent sent an event over 10 MiB"}
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended")
			}
			return d.cut(ctx, rctx, m, err)
		}
		idle.Reset(d.cfg.IdleTimeout)
		if cut && !json.Valid(data) {
			return d.cut(ctx, rctx, m, errors.New("the stream ended in the middle of an event"))
		}
		if err := m.apply(ctx, data); err != nil {
			var me *MalformedError
			if errors.As(err, &me) {
				log.Warn("agui: malformed event", "n", me.N, "type", protocol.Truncate(me.Type, 40), "reason", me.Reason)
				return &driver.Error{Code: protocol.ErrorProviderError, Message: d.safe(me.Error())}
			}
			return err
		}
		if m.outcome != nil || m.runErr != nil {
			return nil
		}
	}
}

// cut ends a run whose stream ended before its RUN_FINISHED or RUN_ERROR:
// AG-UI cannot resume a run, so the run fails with the reason (a cancel,
// or a timeout, says so instead).
func (d *Driver) cut(ctx, rctx context.Context, m *mapper, err error) error {
	what := "the agent's stream ended before the run finished (AG-UI runs cannot be resumed)"
	if m.n == 0 {
		what = "the agent's stream ended before any event"
	}
	if m.upstreamRunID != "" {
		what = "agent run " + m.upstreamRunID + ": " + what
	}
	return d.aborted(ctx, rctx, err, what)
}

// aborted turns a failed request or read into the run's end: ctx's error
// for a cancel (the executor writes cancelled), timeout for the idle or
// run timer, else provider_error.
func (d *Driver) aborted(ctx, rctx context.Context, err error, what string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch cause := context.Cause(rctx); {
	case errors.Is(cause, errIdle):
		return &driver.Error{Code: protocol.ErrorTimeout, Message: fmt.Sprintf("the agent sent no event for %s", d.cfg.IdleTimeout)}
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: d.safe(what + ": " + err.Error())}
}

// statusError maps a non-2xx answer to its error code with the agent's
// message.
func (d *Driver) statusError(ctx context.Context, resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	code := protocol.ErrorProviderError
	var text string
	switch st := resp.StatusCode; {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		code, text = CodeAuth, fmt.Sprintf("the agent refused the credentials (%d)", st)
	case st == http.StatusTooManyRequests:
		code, text = CodeRateLimited, "the agent is rate limiting (429)"
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if n, err := strconv.Atoi(ra); err == nil {
				text += fmt.Sprintf("; retry after %ds", n)
			}
		}
	default:
		text = fmt.Sprintf("the agent answered %d", st)
	}
	if msg := bodyMessage(body); msg != "" {
		text += ": " + msg
	}
	return &driver.Error{Code: code, Message: d.safe(text)}
}

// bodyMessage reads an error body: {error: {message}}, {error: "…"},
// {message: "…"}, or short plain text (an HTML page says nothing).
func bodyMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var s string
		var o struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case json.Unmarshal(v.Error, &o) == nil && o.Message != "":
			return o.Message
		}
		return v.Message
	}
	s := strings.TrimSpace(string(body))
	if strings.HasPrefix(s, "<") {
		return ""
	}
	return s
}

// safe makes an agent's text fit for an event: the key scrubbed, secrets
// redacted, valid UTF-8, bounded.
func (d *Driver) safe(s string) string {
	s = journal.RedactString(d.cfg.APIKey.Scrub(s))
	return protocol.Truncate(strings.ToValidUTF8(s, "?"), maxMessage)
}
