package webhook

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
)

// The notification types (the body's "type"; an endpoint's "events").
const (
	TypeNeedsApproval = "run.needs_approval" // approval.requested
	TypeNeedsInput    = "run.needs_input"    // clarify.requested
	TypeFinished      = "run.finished"       // the run's terminal event
	TypeGoal          = "session.goal"       // goal.updated (opt-in)
)

// Types lists every notification type.
var Types = []string{TypeNeedsApproval, TypeNeedsInput, TypeFinished, TypeGoal}

// DefaultTypes are the types of an endpoint that names none.
var DefaultTypes = []string{TypeNeedsApproval, TypeNeedsInput, TypeFinished}

// SecretPrefix starts a secret in the Standard Webhooks form.
const SecretPrefix = "whsec_"

// Secret length bounds (decoded bytes; Standard Webhooks asks for 24 to 64).
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// MaxEndpoints bounds the configured endpoints.
const MaxEndpoints = 32

// Endpoint is one receiver of notifications.
type Endpoint struct {
	// Name identifies the endpoint in logs, metrics and the deliveries view
	// (never the URL, which may carry a token). Default "default" for the
	// environment's endpoint, "webhook-<n>" in a file.
	Name string `json:"name"`
	// URL is where notifications are POSTed: http or https.
	URL string `json:"url"`
	// Secret signs the notifications: "whsec_" and the base64 of 24 to 64
	// random bytes.
	Secret string `json:"secret,omitempty"`
	// SecretEnv names an environment variable that holds the secret
	// instead (so the file need not hold it).
	SecretEnv string `json:"secret_env,omitempty"`
	// Events are the notification types the endpoint wants (default
	// DefaultTypes).
	Events []string `json:"events,omitempty"`

	key []byte // the decoded secret
}

// Wants reports whether the endpoint takes notifications of type typ.
func (e *Endpoint) Wants(typ string) bool { return slices.Contains(e.Events, typ) }

// File is the webhooks configuration file (JSON).
type File struct {
	Webhooks []Endpoint `json:"webhooks"`
}

// ParseSecret decodes a "whsec_<base64>" secret. The error never contains
// the secret.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New("want whsec_ followed by base64")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New("the part after whsec_ is not valid base64")
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("decodes to %d bytes, want %d to %d", len(key), MinSecretBytes, MaxSecretBytes)
	}
	return key, nil
}

// checkURL accepts an absolute http or https URL with a host.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q refused: want http or https", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("no host")
	}
	return nil
}

// names are what errors call an endpoint's settings: the variables of the
// environment's endpoint, or the file and the entry.
type names struct{ url, secret, events string }

// check validates e and fills its defaults; the errors name the setting at
// fault (n) and never contain the secret.
func (e *Endpoint) check(n names, getenv func(string) string) error {
	if e.URL == "" {
		return fmt.Errorf("%s is empty", n.url)
	}
	if err := checkURL(e.URL); err != nil {
		return fmt.Errorf("%s: %v", n.url, err)
	}
	secret, from := e.Secret, n.secret
	if e.SecretEnv != "" {
		if e.Secret != "" {
			return fmt.Errorf("%s: set secret or secret_env, not both", n.secret)
		}
		secret, from = getenv(e.SecretEnv), e.SecretEnv
	}
	if secret == "" {
		return fmt.Errorf("%s is empty: every endpoint needs a secret", from)
	}
	key, err := ParseSecret(secret)
	if err != nil {
		return fmt.Errorf("%s: %v", from, err)
	}
	e.key = key
	if len(e.Events) == 0 {
		e.Events = slices.Clone(DefaultTypes)
	}
	for _, t := range e.Events {
		if !slices.Contains(Types, t) {
			return fmt.Errorf("%s: event %q: want one of %s", n.events, t, strings.Join(Types, ", "))
		}
	}
	return nil
}

// Config gathers the endpoints of the environment and of a file. urlVar
// and secretVar name the environment's variables in errors.
type Config struct {
	URL, Secret, Events string // the environment's endpoint (Events comma-separated)
	File                string // path of a File, or ""
	URLVar, SecretVar   string // e.g. RUNHUB_WEBHOOK_URL, RUNHUB_WEBHOOK_SECRET
	EventsVar, FileVar  string
	Getenv              func(string) string // for secret_env (default os.Getenv)
}

// Endpoints validates the configuration and returns its endpoints (none
// when nothing is configured). Every error names the variable or file
// entry at fault and never contains a secret.
func (c Config) Endpoints() ([]Endpoint, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var out []Endpoint
	if c.URL != "" || c.Secret != "" {
		if c.URL == "" {
			return nil, fmt.Errorf("%s is set but %s is empty", c.SecretVar, c.URLVar)
		}
		e := Endpoint{Name: "default", URL: c.URL, Secret: c.Secret}
		if c.Events != "" {
			for _, t := range strings.Split(c.Events, ",") {
				e.Events = append(e.Events, strings.TrimSpace(t))
			}
		}
		if err := e.check(names{c.URLVar, c.SecretVar, c.EventsVar}, getenv); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if c.File != "" {
		raw, err := os.ReadFile(c.File)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.FileVar, err)
		}
		var f File
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s %s: %v", c.FileVar, c.File, err)
		}
		for i := range f.Webhooks {
			e := f.Webhooks[i]
			if e.Name == "" {
				e.Name = fmt.Sprintf("webhook-%d", i+1)
			}
			where := fmt.Sprintf("%s %s: webhooks[%d] (%s)", c.FileVar, c.File, i, e.Name)
			if err := e.check(names{where + ": url", where + ": secret", where + ": events"}, getenv); err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	if len(out) > MaxEndpoints {
		return nil, fmt.Errorf("%d webhook endpoints: at most %d", len(out), MaxEndpoints)
	}
	seen := map[string]bool{}
	for _, e := range out {
		if seen[e.Name] {
			return nil, fmt.Errorf("webhook endpoint name %q is used twice", e.Name)
		}
		seen[e.Name] = true
	}
	return out, nil
}
