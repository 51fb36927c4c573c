package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// Kind is the driver kind of AG-UI profiles.
const Kind = "agui"

// Registration declares the driver to a profile.Registry. An AG-UI agent
// streams text, reasoning, tool calls and usage; its interrupts are
// runhub's approvals (a yes or no) and clarifications (any other input);
// a cancel aborts the request (AG-UI has no other way to stop a run);
// runhub's queue starts the session's next runs; a start's attachments
// are content parts of its user message. It takes no guidance while it
// runs (AG-UI has no input into a running run: no steer), judges no goal
// (a profile naming a goal_judge has goal) and has no workspace.
func Registration() profile.Registration {
	return profile.NewRegistration(Kind, []string{
		protocol.CapCancel, protocol.CapApproval, protocol.CapClarify, protocol.CapQueue,
		protocol.CapAttachments, protocol.CapReasoning, protocol.CapUsage, protocol.CapTools,
	}, func(p profile.Profile, s *Settings, env profile.Env) (driver.Driver, error) {
		return New(Config{URL: s.URL, Headers: s.Headers, APIKey: s.APIKey(env.Getenv), APIKeyEnv: s.APIKeyEnv,
			ForwardedProps: s.ForwardedProps, Tools: s.Tools, Context: s.Context, State: s.State, OwnsHistory: s.OwnsHistory,
			IdleTimeout: s.IdleTimeout.Or(DefaultIdleTimeout), Timeout: s.Timeout.D(), ClarifyTimeout: env.ClarifyTimeout,
			Logger: env.Logger})
	})
}

// Settings are an agui profile's own settings (docs/profiles.md).
type Settings struct {
	URL     string            `json:"url"` // required
	Headers map[string]string `json:"headers,omitempty"`
	profile.Key
	ForwardedProps json.RawMessage  `json:"forwarded_props,omitempty"`
	Tools          json.RawMessage  `json:"tools,omitempty"`
	Context        json.RawMessage  `json:"context,omitempty"`
	State          json.RawMessage  `json:"state,omitempty"`
	OwnsHistory    bool             `json:"owns_history,omitempty"`
	Timeout        profile.Duration `json:"timeout,omitempty"`
	IdleTimeout    profile.Duration `json:"idle_timeout,omitempty"`
}

var reHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Validate implements profile.Settings.
func (s *Settings) Validate(p profile.Profile) error {
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		return errors.New("url is required for driver agui")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("url must be an http:// or https:// URL with a host")
	case u.User != nil:
		return errors.New("url must not carry credentials; name the key's variable in api_key_env")
	}
	for k, v := range s.Headers {
		if !reHeaderName.MatchString(k) {
			return fmt.Errorf("headers: %q is not a header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("headers: the value of %s has a line break", k)
		}
		switch strings.ToLower(k) {
		case "content-type", "accept", "content-length":
			return fmt.Errorf("headers: %s is the driver's", k)
		case "authorization":
			if s.APIKeyEnv != "" {
				return errors.New("headers: authorization and api_key_env both set the credentials; keep one")
			}
		}
	}
	return errors.Join(s.Key.Validate(), jsonKind("forwarded_props", s.ForwardedProps, '{'), jsonKind("tools", s.Tools, '['),
		jsonKind("context", s.Context, '['), s.Timeout.Check("timeout"), s.IdleTimeout.Check("idle_timeout"))
}

// jsonKind checks that a setting, when given, is a JSON object ('{') or
// array ('[').
func jsonKind(name string, raw json.RawMessage, open byte) error {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return nil
	}
	if t[0] != open {
		if open == '{' {
			return fmt.Errorf("%s must be an object", name)
		}
		return fmt.Errorf("%s must be an array", name)
	}
	return nil
}
