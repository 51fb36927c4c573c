// Package openai is the driver for any OpenAI-compatible streaming chat
// completions endpoint (vLLM, llama.cpp server, Ollama, LM Studio, OpenAI):
// it sends the session's transcript as messages to
// POST {base_url}/v1/chat/completions with stream: true and maps the SSE
// chunks to events — delta.content → token.delta, delta.reasoning_content
// (or delta.reasoning) → reasoning.delta, usage → usage.final. The executor
// then writes done. A user message with attachments is sent as content
// parts: its text, then an image_url part per image and a text part per
// other file (parts.go).
//
// Failures end the run with one terminal error of a stable code: upstream
// 401/403 → auth, 404 → model_not_found, 429 → rate_limited, 5xx, an error
// inside the stream, a dropped connection → provider_error, no data for
// idle_timeout (keepalives do not count) or a run over timeout → timeout.
// Messages are safe: the key is scrubbed, secret-looking text redacted,
// length bounded. A cancel aborts the request.
package openai

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

// Error codes of this driver besides protocol's provider_error and timeout.
const (
	CodeAuth          = "auth"
	CodeModelNotFound = "model_not_found"
	CodeRateLimited   = "rate_limited"
)

// Defaults and bounds.
const (
	DefaultIdleTimeout = 120 * time.Second
	maxLineBytes       = 1 << 20  // one SSE line
	maxErrorBody       = 64 << 10 // an error answer's body
	maxJSONBody        = 8 << 20  // a non-streamed answer
	maxMessage         = 300      // an error message, in bytes
)

// Config is one profile's driver settings.
type Config struct {
	BaseURL      string         // e.g. http://127.0.0.1:8081 (a trailing /v1 is accepted)
	Model        string         // the model unless a start names one
	APIKey       profile.Secret // sent as Authorization: Bearer; empty: no header
	APIKeyEnv    string         // the key's variable name (for the message when it is unset)
	Instructions string         // a leading system message, when set
	IdleTimeout  time.Duration  // longest silence on the stream (default 120s)
	Timeout      time.Duration  // bound on a whole run (0: none)
	Client       *http.Client   // default: a client of its own, no overall timeout
	Logger       *slog.Logger   // default slog.Default()
}

// Driver streams one chat completion per run.
type Driver struct {
	cfg Config
	url string
}

// New returns a driver for cfg.
func New(cfg Config) (*Driver, error) {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		return nil, errors.New("openai: base_url is required")
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
	base = strings.TrimSuffix(base, "/v1")
	return &Driver{cfg: cfg, url: base + "/v1/chat/completions"}, nil
}

// Kind is the driver kind of OpenAI-compatible profiles.
const Kind = "openai"

// Registration declares the driver to a profile.Registry. A chat
// completion streams text, reasoning and usage and ends with a cancel; it
// asks nothing (no approval, clarify), takes no guidance while it streams
// (no steer) and maps no tool calls. Its model judges goals (JudgeGoal):
// its own profile's, and those of any profile naming it as goal_judge.
// Queued messages become the session's next runs; a start's attachments
// become content parts of its user message (userMessage).
func Registration() profile.Registration {
	r := profile.NewRegistration(Kind, []string{
		protocol.CapCancel, protocol.CapQueue, protocol.CapGoal, protocol.CapAttachments, protocol.CapReasoning, protocol.CapUsage,
	}, func(p profile.Profile, s *Settings, env profile.Env) (driver.Driver, error) {
		return New(Config{BaseURL: s.BaseURL, Model: p.Model, APIKey: s.APIKey(env.Getenv), APIKeyEnv: s.APIKeyEnv,
			Instructions: s.Instructions, IdleTimeout: s.IdleTimeout.Or(DefaultIdleTimeout), Timeout: s.Timeout.D(),
			Logger: env.Logger})
	})
	r.GoalJudge = true
	return r
}

// Settings are an openai profile's own settings (docs/profiles.md).
type Settings struct {
	BaseURL string `json:"base_url"` // required
	profile.Key
	Instructions string           `json:"instructions,omitempty"`
	Timeout      profile.Duration `json:"timeout,omitempty"`
	IdleTimeout  profile.Duration `json:"idle_timeout,omitempty"`
}

// Validate implements profile.Settings: base_url and model are required.
func (s *Settings) Validate(p profile.Profile) error {
	if err := profile.CheckBaseURL(s.BaseURL, Kind); err != nil {
		return err
	}
	if p.Model == "" {
		return errors.New("model is required for driver openai")
	}
	return errors.Join(s.Key.Validate(), s.Timeout.Check("timeout"), s.IdleTimeout.Check("idle_timeout"))
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"` // only with stream: OpenAI refuses it otherwise
	Temperature   *float64       `json:"temperature,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type delta struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// chunk is one streamed chunk (and, with Message, a non-streamed answer).
type chunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		Message      *delta  `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Causes of an aborted request.
var (
	errIdle       = errors.New("idle timeout")
	errRunTimeout = errors.New("run timeout")
)

// Execute implements driver.Driver.
func (d *Driver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	begin := time.Now()
	if d.cfg.APIKeyEnv != "" && d.cfg.APIKey.Empty() {
		return nil, &driver.Error{Code: CodeAuth,
			Message: "the API key variable " + d.cfg.APIKeyEnv + " is not set where this run executes"}
	}
	model := cmp.Or(x.Request.Model, d.cfg.Model)
	msgs, err := d.messages(ctx, x)
	if err != nil {
		return nil, err
	}
	body := chatRequest{Model: model, Messages: msgs, Stream: true, StreamOptions: &streamOptions{IncludeUsage: true}}
	s, err := d.complete(ctx, body, x, d.cfg.Timeout, "run", d.cfg.Logger.With("run_id", x.RunID, "session_id", x.SessionID))
	if err != nil {
		return nil, err
	}
	if err := s.closeReasoning(ctx); err != nil {
		return nil, err
	}
	u := &protocol.Usage{OutputTokens: s.contentChunks, Model: cmp.Or(s.upstreamModel, model), Provider: Kind,
		DurationMS: time.Since(begin).Milliseconds()}
	if s.usage != nil {
		u.InputTokens, u.OutputTokens = s.usage.PromptTokens, s.usage.CompletionTokens
	}
	if _, err := x.Emit(ctx, protocol.EventUsageFinal, u); err != nil {
		return nil, err
	}
	return u, nil
}

// complete sends one chat completion request and maps its answer into em,
// streamed (SSE) or whole (JSON), whichever the upstream sends. timeout
// bounds the whole exchange (0: none), the idle timeout its silences; what
// names the exchange (the run, the goal judge) in a timeout's message.
func (d *Driver) complete(ctx context.Context, body chatRequest, em emitter, timeout time.Duration, what string, log *slog.Logger) (*stream, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { cancel(errRunTimeout) })
		defer t.Stop()
	}
	idle := time.AfterFunc(d.cfg.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()

	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.url, bytes.NewReader(raw))
	if err != nil {
		return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: "invalid upstream request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if body.Stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if !d.cfg.APIKey.Empty() {
		req.Header.Set("Authorization", "Bearer "+d.cfg.APIKey.Reveal())
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return nil, d.aborted(ctx, rctx, err, timeout, what, "could not reach the upstream")
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, d.statusError(ctx, rctx, resp, body.Model)
	}
	s := &stream{d: d, x: em, model: body.Model, idle: idle, log: log}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		err = s.whole(ctx, resp.Body)
	} else {
		err = s.read(ctx, resp.Body)
	}
	if s.malformed > 0 {
		s.log.Warn("openai: skipped malformed stream lines", "lines", s.malformed)
	}
	if err != nil {
		var re readError
		if errors.As(err, &re) {
			return nil, d.aborted(ctx, rctx, re.err, timeout, what, "the connection to the upstream broke mid-stream")
		}
		return nil, err
	}
	return s, nil
}

// messages builds the conversation: instructions, the session's earlier
// turns, the run's message. A user turn with attachments (this run's, or
// an earlier run's, sent again as the model saw them) is content parts
// (userMessage); an earlier run's tool calls and results are assistant
// tool_calls and tool messages (turnMessages).
func (d *Driver) messages(ctx context.Context, x *driver.Execution) ([]Message, error) {
	turns, err := x.AttachedTranscript(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("openai: transcript: %w", err)
	}
	msgs := make([]Message, 0, len(turns)+2)
	if d.cfg.Instructions != "" {
		msgs = append(msgs, Message{Role: "system", Content: d.cfg.Instructions})
	}
	ids := uniqueIDs()
	for _, t := range turns {
		msgs = append(msgs, turnMessages(t, ids)...)
	}
	return append(msgs, userMessage(x.Request.Message, x.Request.Attachments)), nil
}

// aborted turns a failed request or read into the run's end: ctx's error
// for a cancel (the executor writes cancelled), timeout for the idle or run
// timer, else provider_error.
func (d *Driver) aborted(ctx, rctx context.Context, err error, timeout time.Duration, exchange, what string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch cause := context.Cause(rctx); {
	case errors.Is(cause, errIdle):
		return &driver.Error{Code: protocol.ErrorTimeout,
			Message: fmt.Sprintf("the upstream sent no data for %s", d.cfg.IdleTimeout)}
	case errors.Is(cause, errRunTimeout):
		return &driver.Error{Code: protocol.ErrorTimeout,
			Message: fmt.Sprintf("the %s exceeded its %s timeout", exchange, timeout)}
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: d.safe(what + ": " + err.Error())}
}

// statusError maps a non-2xx answer to its error code with the upstream's
// message.
func (d *Driver) statusError(ctx, rctx context.Context, resp *http.Response, model string) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	msg := upstreamMessage(body)
	code := protocol.ErrorProviderError
	var text string
	switch st := resp.StatusCode; {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		code, text = CodeAuth, fmt.Sprintf("the upstream refused the credentials (%d)", st)
	case st == http.StatusNotFound:
		code, text = CodeModelNotFound, fmt.Sprintf("the upstream has no model %q (404; check model and base_url)", model)
	case st == http.StatusTooManyRequests:
		code, text = CodeRateLimited, "the upstream is rate limiting (429)"
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if n, err := strconv.Atoi(ra); err == nil {
				text += fmt.Sprintf("; retry after %ds", n)
			}
		}
	default:
		text = fmt.Sprintf("the upstream answered %d", st)
	}
	if msg != "" {
		text += ": " + msg
	}
	return &driver.Error{Code: code, Message: d.safe(text)}
}

// upstreamMessage reads the message of an error body: {error: {message}},
// {error: "…"}, {message: "…"}, or short plain text.
func upstreamMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		if m := errorText(v.Error); m != "" {
			return m
		}
		if v.Message != "" {
			return v.Message
		}
		return ""
	}
	s := strings.TrimSpace(string(body))
	if strings.HasPrefix(s, "<") { // an HTML error page says nothing useful
		return ""
	}
	return s
}

// errorText reads an error value: {message, type, code} or a string.
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var e struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(raw, &e) == nil {
		switch {
		case e.Message != "":
			return e.Message
		case e.Type != "":
			return e.Type
		case e.Code != nil:
			return fmt.Sprint(e.Code)
		}
	}
	return "unknown error"
}

// safe makes an upstream text fit for an event: the key scrubbed, secrets
// redacted, valid UTF-8, bounded.
func (d *Driver) safe(s string) string {
	s = journal.RedactString(d.cfg.APIKey.Scrub(s))
	return protocol.Truncate(strings.ToValidUTF8(s, "?"), maxMessage)
}
