// Package profile loads runhub's runtime profiles: a JSON file that maps
// profile names to a driver kind (sim, openai, exec, hermes) and its
// settings. Each profile becomes one driver.Driver with its own settings; a
// run's `profile` picks one (docs/profiles.md).
//
// Secrets never live in the file: a profile names the environment variable
// that holds its API key (api_key_env), and the key is read when the
// profile's driver is built, held as a Secret (which formats as [REDACTED]
// everywhere), and handed only to that profile's driver.
//
// The file:
//
//	{
//	  "default": "local",
//	  "profiles": {
//	    "local": {"driver": "openai", "base_url": "http://127.0.0.1:11434", "model": "llama3.2"},
//	    "gpt":   {"driver": "openai", "base_url": "https://api.openai.com", "model": "gpt-4o-mini",
//	              "api_key_env": "OPENAI_API_KEY", "idle_timeout": "60s"},
//	    "agent": {"driver": "exec", "command": "python3", "args": ["agent.py"], "cancel_grace": "3s"},
//	    "hermes": {"driver": "hermes", "base_url": "http://127.0.0.1:8642", "api_key_env": "HERMES_API_KEY"}
//	  }
//	}
package profile

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/driver"
)

// Driver kinds.
const (
	KindSim    = "sim"
	KindOpenAI = "openai"
	KindExec   = "exec"
	KindHermes = "hermes"
)

// Kinds lists the driver kinds a profile may name.
var Kinds = []string{KindSim, KindOpenAI, KindExec, KindHermes}

// BuiltinSim is the profile every configuration has unless the file
// defines one of that name: the simulator, and the default when the file
// names none.
const BuiltinSim = "sim"

// MaxFileBytes bounds a profile file.
const MaxFileBytes = 1 << 20

// Profile is one named runtime configuration. Which fields a driver reads is
// documented per kind in docs/profiles.md; fields another kind does not use
// are refused by Validate, so a typo never passes silently.
type Profile struct {
	// Name is the profile's key in the file (set by Parse).
	Name string `json:"-"`
	// Driver is the kind: sim, openai, exec or hermes.
	Driver string `json:"driver"`
	// Description is a short human note (not sent anywhere).
	Description string `json:"description,omitempty"`

	// BaseURL is the upstream's address (openai, hermes), e.g.
	// http://127.0.0.1:11434; a trailing /v1 is accepted.
	BaseURL string `json:"base_url,omitempty"`
	// Model is the upstream model (openai: required; hermes, exec:
	// optional). A start's `model` overrides it for that run.
	Model string `json:"model,omitempty"`
	// APIKeyEnv is the NAME of the environment variable that holds the
	// API key (openai, hermes: sent as Authorization: Bearer; exec: passed
	// to the command under that name). Empty: no key.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Instructions are the system instructions (openai: a system message;
	// hermes: instructions).
	Instructions string `json:"instructions,omitempty"`

	// Command and Args are the program an exec profile runs per run (no
	// shell); Dir is its working directory (default: the hub's).
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	// Env adds variables to an exec command's environment. InheritEnv
	// names variables passed through from the hub's environment besides
	// the defaults (PATH, HOME, LANG, LC_ALL, TMPDIR, TZ, USER); nothing
	// else of the hub's environment reaches the command.
	Env        map[string]string `json:"env,omitempty"`
	InheritEnv []string          `json:"inherit_env,omitempty"`

	// Timeout bounds a whole run (0: no bound); a run over it ends with
	// error code timeout.
	Timeout Duration `json:"timeout,omitempty"`
	// IdleTimeout bounds the silence of an upstream stream: no data (a
	// keepalive is no data) for this long ends the run with error code
	// timeout (openai, hermes; default 120s).
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// CancelGrace is how long a cancelled run's upstream gets to stop on
	// its own (exec: after the cancel line, before SIGTERM; default 5s).
	CancelGrace Duration `json:"cancel_grace,omitempty"`
	// KillGrace is how long an exec command gets after SIGTERM before
	// SIGKILL (default 5s).
	KillGrace Duration `json:"kill_grace,omitempty"`

	// GoalJudge names the profile (of driver openai) whose model judges,
	// after each turn, whether a session's goal is reached (default: the
	// profile itself when its driver judges goals: openai with its own
	// model, sim with its turns=N rule). A profile with neither answers a
	// goal set with unsupported.
	GoalJudge string `json:"goal_judge,omitempty"`
	// GoalMaxTurns bounds the runs a goal starts on this profile (default
	// DefaultGoalMaxTurns); past it the goal pauses.
	GoalMaxTurns int `json:"goal_max_turns,omitempty"`

	// Options holds driver-specific settings the driver decodes itself
	// (DecodeOptions); Validate only checks it is a JSON object.
	Options json.RawMessage `json:"options,omitempty"`
}

// DecodeOptions decodes the profile's options into v strictly (unknown
// fields are errors). No options leaves v unchanged.
func (p Profile) DecodeOptions(v any) error {
	if len(p.Options) == 0 || string(p.Options) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(p.Options))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("profile %q: options: %v", p.Name, err)
	}
	return nil
}

// Duration is a time.Duration written as a Go duration string ("30s",
// "2m", "1m30s") in the file.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want a duration string like "30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`%q is not a duration (want e.g. "30s", "2m")`, s)
	}
	*d = Duration(v)
	return nil
}

// Config is a loaded profile file.
type Config struct {
	// Default names the profile of a start that names neither a profile
	// nor a provider. Empty: the built-in simulator (BuiltinSim).
	Default string `json:"default,omitempty"`
	// Profiles by name.
	Profiles map[string]Profile `json:"profiles"`
}

// Builtin returns the configuration without a file: the sim profile only.
func Builtin() *Config {
	c := &Config{Profiles: map[string]Profile{}}
	c.addBuiltins()
	return c
}

func (c *Config) addBuiltins() {
	if c.Profiles == nil {
		c.Profiles = map[string]Profile{}
	}
	if _, ok := c.Profiles[BuiltinSim]; !ok {
		c.Profiles[BuiltinSim] = Profile{Name: BuiltinSim, Driver: KindSim, Description: "the built-in simulated agent"}
	}
}

// Load reads and validates a profile file. An empty path is Builtin().
func Load(path string) (*Config, error) {
	if path == "" {
		return Builtin(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	defer f.Close()
	data, err := readBounded(f)
	if err != nil {
		return nil, fmt.Errorf("profiles %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("profiles %s: %w", path, err)
	}
	return c, nil
}

func readBounded(f *os.File) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file is over %d bytes", MaxFileBytes)
	}
	return data, nil
}

// Parse decodes and validates a profile file's bytes. Unknown fields are
// errors (a misspelt setting never passes silently); the built-in sim
// profile is added unless the file defines "sim".
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	if c.Profiles == nil {
		return nil, errors.New(`no "profiles" object`)
	}
	for name, p := range c.Profiles {
		p.Name = name
		c.Profiles[name] = p
	}
	c.addBuiltins()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeError explains a JSON error without echoing file content beyond a
// field name (a key pasted into the wrong field is never printed).
func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("invalid JSON: the file ends before the object does")
	case errors.As(err, &te):
		return fmt.Errorf("field %s: want %s", te.Field, te.Type)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		if k := strings.ToLower(field); k == "api_key" || k == "apikey" || k == "key" || k == "token" {
			return fmt.Errorf("unknown field %q: keys never go in the profile file; put the key in an environment variable and name it in api_key_env", field)
		}
		return fmt.Errorf("unknown field %q", field)
	}
	if strings.Contains(msg, "want a duration") || strings.Contains(msg, "is not a duration") {
		return errors.New(strings.TrimPrefix(msg, "json: "))
	}
	return errors.New("invalid profile file: " + strings.TrimPrefix(msg, "json: "))
}

var (
	reName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	reEnvVar = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Validate checks every profile and the default.
func (c *Config) Validate() error {
	if len(c.Profiles) == 0 {
		return errors.New("no profiles")
	}
	var errs []error
	for _, name := range c.Names() {
		if err := c.Profiles[name].Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Default != "" {
		if _, ok := c.Profiles[c.Default]; !ok {
			errs = append(errs, fmt.Errorf("default: no profile named %q", c.Default))
		}
	}
	errs = append(errs, c.validateGoalJudges()...)
	return errors.Join(errs...)
}

// Validate checks one profile: a valid name, a known driver kind, the
// settings that kind needs, and no settings it does not use.
func (p Profile) Validate() error {
	if !reName.MatchString(p.Name) {
		return fmt.Errorf("profile %q: names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", p.Name)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("profile %q: "+format, append([]any{p.Name}, args...)...)
	}
	if !slices.Contains(Kinds, p.Driver) {
		if p.Driver == "" {
			return bad("driver is required (one of %s)", strings.Join(Kinds, ", "))
		}
		return bad("unknown driver %q (want one of %s)", p.Driver, strings.Join(Kinds, ", "))
	}
	if p.APIKeyEnv != "" && !reEnvVar.MatchString(p.APIKeyEnv) {
		// Never echo the value: it may be the key itself, pasted by mistake.
		return bad("api_key_env must be the NAME of an environment variable (letters, digits and '_'), not the key itself")
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"timeout", p.Timeout}, {"idle_timeout", p.IdleTimeout}, {"cancel_grace", p.CancelGrace}, {"kill_grace", p.KillGrace}} {
		if d.v < 0 {
			return bad("%s must not be negative", d.name)
		}
	}
	if err := p.validateGoalBudget(); err != nil {
		return err
	}
	if len(p.Options) > 0 && string(p.Options) != "null" {
		var m map[string]json.RawMessage
		if json.Unmarshal(p.Options, &m) != nil {
			return bad("options must be a JSON object")
		}
	}
	exec := p.Driver == KindExec
	http := p.Driver == KindOpenAI || p.Driver == KindHermes
	unused := func(set bool, field string) error {
		if set {
			return bad("%s is not used by driver %s", field, p.Driver)
		}
		return nil
	}
	if err := errors.Join(
		unused(!exec && p.Command != "", "command"),
		unused(!exec && len(p.Args) > 0, "args"),
		unused(!exec && p.Dir != "", "dir"),
		unused(!exec && len(p.Env) > 0, "env"),
		unused(!exec && len(p.InheritEnv) > 0, "inherit_env"),
		unused(!exec && p.KillGrace != 0, "kill_grace"),
		unused(!http && p.BaseURL != "", "base_url"),
		unused(!http && p.IdleTimeout != 0, "idle_timeout"),
		unused(p.Driver == KindSim && p.APIKeyEnv != "", "api_key_env"),
		unused(p.Driver == KindSim && p.Instructions != "", "instructions"),
		unused(p.Driver == KindSim && p.Timeout != 0, "timeout"),
		unused(p.Driver == KindSim && p.CancelGrace != 0, "cancel_grace"),
	); err != nil {
		return err
	}
	if http {
		if p.BaseURL == "" {
			return bad("base_url is required for driver %s", p.Driver)
		}
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("base_url must be an http:// or https:// URL with a host")
		}
		if u.User != nil {
			return bad("base_url must not carry credentials; name the key's variable in api_key_env")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return bad("base_url must not have a query or fragment")
		}
	}
	if p.Driver == KindOpenAI && p.Model == "" {
		return bad("model is required for driver openai")
	}
	if exec {
		if strings.TrimSpace(p.Command) == "" {
			return bad("command is required for driver exec")
		}
		for k := range p.Env {
			if !reEnvVar.MatchString(k) {
				return bad("env: %q is not a valid variable name", k)
			}
		}
		for _, k := range p.InheritEnv {
			if !reEnvVar.MatchString(k) {
				return bad("inherit_env: %q is not a valid variable name", k)
			}
		}
	}
	return nil
}

// Names returns the profile names, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultName is the profile a start without profile or provider runs
// with: Default, else BuiltinSim.
func (c *Config) DefaultName() string {
	if c.Default != "" {
		return c.Default
	}
	return BuiltinSim
}

// Info is what a browser may know of a profile: its name and driver kind,
// never its settings.
type Info struct {
	Name    string `json:"name"`
	Driver  string `json:"driver"`
	Default bool   `json:"default,omitempty"`
}

// Public lists every profile as Info, sorted by name.
func (c *Config) Public() []Info {
	out := make([]Info, 0, len(c.Profiles))
	def := c.DefaultName()
	for _, n := range c.Names() {
		out = append(out, Info{Name: n, Driver: c.Profiles[n].Driver, Default: n == def})
	}
	return out
}

// Env is what building a driver may use besides its profile.
type Env struct {
	// Getenv reads the process environment (default os.Getenv). It is the
	// only way a builder reads a key: the profile's own api_key_env.
	Getenv func(string) string
	// ClarifyTimeout is the hub's clarify prompt expiry.
	ClarifyTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

func (e Env) withDefaults() Env {
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	return e
}

// Builder builds the driver of one profile of its kind. It reads the key
// with p.APIKey(env.Getenv) and nothing else of the environment's secrets.
type Builder func(p Profile, env Env) (driver.Driver, error)

// Build builds one driver per profile with the builder of its kind. A kind
// without a builder is an error naming the profile. A profile whose
// api_key_env names an unset variable builds (the key may only be set where
// runs execute, e.g. in runners) and is logged as a warning by name.
func (c *Config) Build(builders map[string]Builder, env Env) (map[string]driver.Profile, error) {
	env = env.withDefaults()
	out := make(map[string]driver.Profile, len(c.Profiles))
	for _, name := range c.Names() {
		p := c.Profiles[name]
		b, ok := builders[p.Driver]
		if !ok {
			return nil, fmt.Errorf("profile %q: driver %s is not available in this build", name, p.Driver)
		}
		if p.APIKeyEnv != "" && env.Getenv(p.APIKeyEnv) == "" {
			env.Logger.Warn("profile API key variable is not set; its runs will fail with code auth where it stays unset",
				"profile", name, "api_key_env", p.APIKeyEnv)
		}
		d, err := b(p, env)
		if err != nil {
			return nil, fmt.Errorf("profile %q: %w", name, err)
		}
		out[name] = driver.Profile{Driver: d, Kind: p.Driver, Model: p.Model,
			GoalMaxTurns: cmp.Or(p.GoalMaxTurns, DefaultGoalMaxTurns)}
	}
	if err := c.resolveGoalJudges(out); err != nil {
		return nil, err
	}
	return out, nil
}
