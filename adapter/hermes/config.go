package hermes

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/profile"
)

// Config is one Hermes Agent API server and how to talk to it. The caller
// supplies the API key itself (read from the environment variable a profile
// names), so the driver never touches process-global state.
type Config struct {
	// BaseURL of the Hermes API server, without /v1 (for example
	// http://127.0.0.1:8642). Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" (the server's
	// API_SERVER_KEY). It is never logged or journaled; empty sends no
	// Authorization header.
	APIKey profile.Secret
	// APIKeyEnv names the variable the key came from; when it is set and
	// the key is empty (the variable is unset where the run executes), runs
	// end with error auth instead of reaching Hermes without a key.
	APIKeyEnv string
	// IdempotentStart declares that the server honours Idempotency-Key on
	// POST /v1/runs (a retried key replays the run it started instead of
	// launching another). Only then is the key sent and a start whose
	// answer was lost retried. Hermes Agent up to 0.18.x ignores the key,
	// so the default (false) retries a start only when it provably never
	// reached Hermes (the connection could not be opened).
	IdempotentStart bool
	// Model, when set, is sent as the run's model unless the start request
	// names one.
	Model string
	// Instructions, when set, are sent as the run's instructions (an
	// ephemeral system prompt).
	Instructions string
	// HTTPClient makes every request (default: a client without an overall
	// timeout, since the event stream is long-lived; each request below has
	// its own deadline).
	HTTPClient *http.Client
	// RequestTimeout bounds the start, every control and every status poll
	// (default 30s).
	RequestTimeout time.Duration
	// StopTimeout bounds the POST /stop sent when a run is cancelled or
	// abandoned (default 5s).
	StopTimeout time.Duration
	// StreamIdleTimeout is how long the event stream may stay silent (not
	// even a keepalive comment; Hermes sends one every 30s) before the
	// connection is taken as broken (default 75s).
	StreamIdleTimeout time.Duration
	// EventIdleTimeout is how long a run may send nothing but keepalives
	// while no prompt waits on the user before it ends with a timeout error
	// (default 30m; a long tool call is silent too).
	EventIdleTimeout time.Duration
	// Timeout bounds a whole run (0: none); over it the Hermes run is
	// stopped and the run ends with error timeout.
	Timeout time.Duration
	// MaxReconnects bounds how often a broken event stream is resubscribed
	// in one run (default 5).
	MaxReconnects int
	// PollInterval is the pause between status polls after the stream broke,
	// and between the polls that run alongside a resubscribed stream (a
	// terminal status there ends the run even if the stream never brings
	// the terminal event; default 1s).
	PollInterval time.Duration
	// MaxHistoryTurns bounds the conversation history sent on a start to the
	// session's latest turns (default 200).
	MaxHistoryTurns int
	// CapabilitiesRefresh is how old the server's answer to GET
	// /v1/capabilities may get before the next use of the profile asks
	// again (default 1m).
	CapabilitiesRefresh time.Duration
	// CapabilitiesTimeout bounds how long the first use of the profile
	// waits for that answer (default 3s); past it the use goes on with
	// the profile's declared capabilities while the answer comes.
	CapabilitiesTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// DefaultBaseURL is where a Hermes API server listens by default.
const DefaultBaseURL = "http://127.0.0.1:8642"

// DefaultEventIdleTimeout is the default EventIdleTimeout: long, because a
// Hermes tool call (a build, a test suite) streams nothing but keepalives.
const DefaultEventIdleTimeout = 30 * time.Minute

func (c Config) withDefaults() Config {
	def := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	c.BaseURL = strings.TrimSuffix(c.BaseURL, "/v1")
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	def(&c.RequestTimeout, 30*time.Second)
	def(&c.StopTimeout, 5*time.Second)
	def(&c.StreamIdleTimeout, 75*time.Second)
	def(&c.EventIdleTimeout, DefaultEventIdleTimeout)
	def(&c.PollInterval, time.Second)
	def(&c.CapabilitiesRefresh, time.Minute)
	def(&c.CapabilitiesTimeout, 3*time.Second)
	if c.MaxReconnects <= 0 {
		c.MaxReconnects = 5
	}
	if c.MaxHistoryTurns <= 0 {
		c.MaxHistoryTurns = 200
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return errors.New("hermes: base URL is required")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("hermes: base URL must be an http(s) URL with a host")
	}
	if u.User != nil {
		return errors.New("hermes: base URL must not hold credentials; set the API key instead")
	}
	if strings.ContainsAny(c.APIKey.Reveal(), "\r\n") {
		return errors.New("hermes: API key must be one line")
	}
	return nil
}
