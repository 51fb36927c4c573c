package hermes

import (
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
)

// Options are the hermes settings of a profile's "options" object; each
// one overrides the Config default of the same name.
type Options struct {
	RequestTimeout    profile.Duration `json:"request_timeout,omitempty"`
	StreamIdleTimeout profile.Duration `json:"stream_idle_timeout,omitempty"`
	MaxReconnects     int              `json:"max_reconnects,omitempty"`
	PollInterval      profile.Duration `json:"poll_interval,omitempty"`
	MaxHistoryTurns   int              `json:"max_history_turns,omitempty"`
	// IdempotentStart: the server honours Idempotency-Key on POST /v1/runs
	// (Config.IdempotentStart; Hermes Agent up to 0.18.x does not).
	IdempotentStart bool `json:"idempotent_start,omitempty"`
}

// FromProfile is the profile.Builder of driver kind hermes: base_url,
// model, api_key_env, instructions, timeout, idle_timeout (Hermes sending
// only keepalives; default 30m), cancel_grace (the POST /stop of a
// cancelled run; default 5s) and options (Options).
func FromProfile(p profile.Profile, env profile.Env) (driver.Driver, error) {
	var o Options
	if err := p.DecodeOptions(&o); err != nil {
		return nil, err
	}
	return New(Config{BaseURL: p.BaseURL, Model: p.Model, APIKey: p.APIKey(env.Getenv), APIKeyEnv: p.APIKeyEnv,
		Instructions: p.Instructions, Timeout: p.Timeout.D(), EventIdleTimeout: p.IdleTimeout.D(),
		StopTimeout: p.CancelGrace.D(), ClarifyTimeout: env.ClarifyTimeout, Logger: env.Logger,
		RequestTimeout: o.RequestTimeout.D(), StreamIdleTimeout: o.StreamIdleTimeout.D(),
		MaxReconnects: o.MaxReconnects, PollInterval: o.PollInterval.D(), MaxHistoryTurns: o.MaxHistoryTurns,
		IdempotentStart: o.IdempotentStart})
}
