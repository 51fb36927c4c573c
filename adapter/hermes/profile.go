package hermes

import (
	"errors"
	"fmt"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// Kind is the driver kind of Hermes Agent profiles.
const Kind = "hermes"

// Registration declares the driver to a profile.Registry with the most a
// Hermes server can do through /v1/runs: stop a run (POST /stop), ask
// approvals (approval.request, POST /approval), take guidance while it
// runs (POST /steer), stream reasoning and tool activity and report
// usage; runhub's queue starts its runs. What a profile's server can do
// is what it answers to GET /v1/capabilities (capabilities.go): the
// driver is a driver.CapabilityReporter, and the profile's capabilities
// narrow to that answer. It has no clarify (the runs API has no clarify
// endpoint, and Hermes' clarify tool answers the model that it is not
// available there) and judges no goal (a profile naming a goal_judge has
// goal). It takes no attachments: POST /v1/runs reads its input as text
// (a string, or of a message list the last message's content, not
// checked as content parts) and coerces conversation_history content to
// strings; Hermes takes images only on /v1/chat/completions and
// /v1/responses. A start with attachments on a hermes profile is
// therefore answered unsupported.
func Registration() profile.Registration {
	return profile.NewRegistration(Kind, []string{
		protocol.CapCancel, protocol.CapApproval, protocol.CapSteer, protocol.CapQueue,
		protocol.CapReasoning, protocol.CapUsage, protocol.CapTools,
	}, build)
}

// Settings are a hermes profile's own settings: base_url, api_key_env,
// instructions, timeout, idle_timeout (Hermes sending only keepalives;
// default 30m), cancel_grace (the POST /stop of a cancelled run; default
// 5s) and options (Options).
type Settings struct {
	BaseURL string `json:"base_url"` // required
	profile.Key
	Instructions string           `json:"instructions,omitempty"`
	Timeout      profile.Duration `json:"timeout,omitempty"`
	IdleTimeout  profile.Duration `json:"idle_timeout,omitempty"`
	CancelGrace  profile.Duration `json:"cancel_grace,omitempty"`
	Options      Options          `json:"options"`
}

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
	// CapabilitiesRefresh: how often GET /v1/capabilities is asked again
	// (Config.CapabilitiesRefresh).
	CapabilitiesRefresh profile.Duration `json:"capabilities_refresh,omitempty"`
}

// UnmarshalJSON decodes the options object strictly: an option Hermes'
// driver does not have is an error naming it.
func (o *Options) UnmarshalJSON(b []byte) error {
	type plain Options
	if err := profile.DecodeObject(b, (*plain)(o)); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

// Validate implements profile.Settings.
func (s *Settings) Validate(profile.Profile) error {
	if err := profile.CheckBaseURL(s.BaseURL, Kind); err != nil {
		return err
	}
	o := s.Options
	return errors.Join(s.Key.Validate(), s.Timeout.Check("timeout"), s.IdleTimeout.Check("idle_timeout"),
		s.CancelGrace.Check("cancel_grace"), o.RequestTimeout.Check("options: request_timeout"),
		o.StreamIdleTimeout.Check("options: stream_idle_timeout"), o.PollInterval.Check("options: poll_interval"),
		o.CapabilitiesRefresh.Check("options: capabilities_refresh"))
}

func build(p profile.Profile, s *Settings, env profile.Env) (driver.Driver, error) {
	o := s.Options
	return New(Config{BaseURL: s.BaseURL, Model: p.Model, APIKey: s.APIKey(env.Getenv), APIKeyEnv: s.APIKeyEnv,
		Instructions: s.Instructions, Timeout: s.Timeout.D(), EventIdleTimeout: s.IdleTimeout.D(),
		StopTimeout: s.CancelGrace.D(), Logger: env.Logger,
		RequestTimeout: o.RequestTimeout.D(), StreamIdleTimeout: o.StreamIdleTimeout.D(),
		MaxReconnects: o.MaxReconnects, PollInterval: o.PollInterval.D(), MaxHistoryTurns: o.MaxHistoryTurns,
		IdempotentStart: o.IdempotentStart, CapabilitiesRefresh: o.CapabilitiesRefresh.D()})
}
