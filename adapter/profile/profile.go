// Package profile loads runhub's runtime profiles: a JSON file that maps
// profile names to a driver kind and its settings. Each profile becomes one
// driver.Driver with its own settings; a run's `profile` picks one
// (docs/profiles.md).
//
// Drivers register themselves: each driver package (adapter/sim,
// adapter/openai, adapter/execdrv, adapter/hermes) declares a Registration
// (NewRegistration): its kind, its capabilities, the typed settings its
// profiles take with their validation, and its builder. The binary lists
// them in a Registry value, one line per driver; nothing here knows a
// driver by name.
//
// A profile is its common part (Profile: driver, description, model,
// goal_judge, goal_max_turns, capabilities) and its driver's own keys, flat beside them in the file,
// decoded strictly by the driver's registration: a key the profile's
// driver does not take is refused, naming the profile and the key.
//
// Secrets never live in the file: a profile names the environment variable
// that holds its API key (api_key_env, Key), and the key is read when the
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
//	    "agent": {"driver": "exec", "command": "python3", "args": ["agent.py"], "cancel_grace": "3s",
//	              "capabilities": ["cancel", "queue", "usage"]},
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
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// BuiltinSim is the profile every configuration has unless the file
// defines one of that name: the simulator (driver kind "sim"), and the
// default when the file names none.
const BuiltinSim = "sim"

// MaxFileBytes bounds a profile file.
const MaxFileBytes = 1 << 20

// Profile is one named runtime configuration: what every driver shares.
// Its driver's own settings are in Settings, decoded and validated by the
// driver's Registration.
type Profile struct {
	// Name is the profile's key in the file.
	Name string `json:"-"`
	// Driver is the kind: one of the Registry's.
	Driver string `json:"driver"`
	// Description is a short human note (not sent anywhere).
	Description string `json:"description,omitempty"`
	// Model is the upstream model (required by some drivers). A start's
	// `model` overrides it for that run; run.started records it.
	Model string `json:"model,omitempty"`
	// GoalJudge names the profile (of a driver that judges goals: openai)
	// whose model judges, after each turn, whether a session's goal is
	// reached (default: the profile itself when its driver judges goals:
	// openai with its own model, sim with its turns=N rule). A profile
	// with neither has no goal capability, and a goal set is unsupported.
	GoalJudge string `json:"goal_judge,omitempty"`
	// GoalMaxTurns bounds the runs a goal starts on this profile (default
	// DefaultGoalMaxTurns); past it the goal pauses.
	GoalMaxTurns int `json:"goal_max_turns,omitempty"`
	// Capabilities are what the profile's runs can do (protocol.Cap*
	// names, in protocol.Capabilities order): its driver's declared set,
	// with goal when it names a goal_judge, or the fewer the file lists.
	Capabilities []string `json:"capabilities,omitempty"`
	// Settings are the driver's own settings (the driver's type, from its
	// Registration).
	Settings Settings `json:"-"`
}

// Config is a loaded profile file.
type Config struct {
	// Default names the profile of a start that names neither a profile
	// nor a provider. Empty: the built-in simulator (BuiltinSim).
	Default string
	// Profiles by name.
	Profiles map[string]Profile

	reg *Registry

	mu   sync.RWMutex
	live map[string]driver.CapabilityReporter // built drivers whose runtime says what it can do
}

// Builtin returns the configuration without a file: the sim profile only
// (when reg has driver kind sim).
func Builtin(reg *Registry) *Config {
	c := &Config{Profiles: map[string]Profile{}, reg: reg}
	c.addBuiltins()
	return c
}

func (c *Config) addBuiltins() {
	if _, ok := c.Profiles[BuiltinSim]; ok {
		return
	}
	if p, err := c.reg.Profile(BuiltinSim, []byte(`{"driver":"sim","description":"the built-in simulated agent"}`)); err == nil {
		c.Profiles[BuiltinSim] = p
	}
}

// Load reads and validates a profile file whose drivers are reg's. An
// empty path is Builtin(reg).
func Load(path string, reg *Registry) (*Config, error) {
	if path == "" {
		return Builtin(reg), nil
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
	c, err := Parse(data, reg)
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

// Parse decodes and validates a profile file's bytes: each profile by its
// driver's registration in reg (Registry.Profile). Unknown fields are
// errors (a misspelt setting never passes silently); every profile's
// problems are reported together. The built-in sim profile is added unless
// the file defines "sim".
func Parse(data []byte, reg *Registry) (*Config, error) {
	var file struct {
		Default  string                     `json:"default,omitempty"`
		Profiles map[string]json.RawMessage `json:"profiles"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	if file.Profiles == nil {
		return nil, errors.New(`no "profiles" object`)
	}
	c := &Config{Default: file.Default, Profiles: make(map[string]Profile, len(file.Profiles)+1), reg: reg}
	var errs []error
	for _, name := range sortedKeys(file.Profiles) {
		p, err := reg.Profile(name, file.Profiles[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Profiles[name] = p
	}
	c.addBuiltins()
	if len(errs) == 0 {
		errs = c.validateGoalJudges()
	}
	_, inFile := file.Profiles[c.Default]
	if _, ok := c.Profiles[c.Default]; c.Default != "" && !ok && !inFile {
		errs = append(errs, fmt.Errorf("default: no profile named %q", c.Default))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Names returns the profile names, sorted.
func (c *Config) Names() []string { return sortedKeys(c.Profiles) }

// DefaultName is the profile a start without profile or provider runs
// with: Default, else BuiltinSim.
func (c *Config) DefaultName() string {
	if c.Default != "" {
		return c.Default
	}
	return BuiltinSim
}

// Capabilities are what the runs of a profile, or of a provider (a driver
// kind a start names without a profile), can do: the profile's set, else
// the kind's declared set. Both empty is a start's default: the Default
// profile, else the built-in simulator's kind. ok is false for a name
// this configuration does not know. A profile whose built driver is a
// driver.CapabilityReporter has its set narrowed to what the runtime
// reports now (liveCaps); the goal capability stays, as runhub's goal
// judge, not the runtime, pursues a goal. The slice is shared unless
// narrowed (adapter.Capabilities): the caller must not change it.
func (c *Config) Capabilities(profile, provider string) (caps []string, ok bool) {
	if profile == "" && provider == "" {
		if c.Default != "" {
			profile = c.Default
		} else {
			provider = BuiltinSim
		}
	}
	if profile != "" {
		p, ok := c.Profiles[profile]
		if !ok {
			return nil, false
		}
		return c.liveCaps(p), true
	}
	reg, ok := c.reg.byKind[provider]
	return reg.Capabilities, ok
}

// liveCaps is p's capabilities narrowed by what its runtime reports.
func (c *Config) liveCaps(p Profile) []string {
	c.mu.RLock()
	rep := c.live[p.Name]
	c.mu.RUnlock()
	if rep == nil {
		return p.Capabilities
	}
	reported, known := rep.RuntimeCapabilities()
	if !known {
		return p.Capabilities
	}
	out := make([]string, 0, len(p.Capabilities))
	for _, cp := range p.Capabilities {
		if cp == protocol.CapGoal || slices.Contains(reported, cp) {
			out = append(out, cp)
		}
	}
	return out
}

// Info is what a browser may know of a profile: its name, driver kind and
// capabilities, never its settings. The capabilities of a profile whose
// runtime reports its own (driver.CapabilityReporter) are read again each
// time an Info is encoded, so GET /v1/profiles follows the runtime.
type Info struct {
	Name         string   `json:"name"`
	Driver       string   `json:"driver"`
	Capabilities []string `json:"capabilities"`
	Default      bool     `json:"default,omitempty"`

	live func() []string // the profile's capabilities now (nil: Capabilities)
}

// MarshalJSON encodes i with its capabilities as they are now.
func (i Info) MarshalJSON() ([]byte, error) {
	type plain Info
	p := plain(i)
	if i.live != nil {
		p.Capabilities = i.live()
	}
	return json.Marshal(p)
}

// Public lists every profile as Info, sorted by name.
func (c *Config) Public() []Info {
	out := make([]Info, 0, len(c.Profiles))
	def := c.DefaultName()
	for _, n := range c.Names() {
		p := c.Profiles[n]
		out = append(out, Info{Name: n, Driver: p.Driver, Capabilities: c.liveCaps(p), Default: n == def,
			live: func() []string { return c.liveCaps(p) }})
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

// Build builds one driver per profile with its driver's registration. A
// profile whose api_key_env names an unset variable builds (the key may
// only be set where runs execute, e.g. in runners) and is logged as a
// warning by name.
func (c *Config) Build(env Env) (map[string]driver.Profile, error) {
	out := make(map[string]driver.Profile, len(c.Profiles))
	for _, name := range c.Names() {
		p := c.Profiles[name]
		d, err := c.reg.Build(p, env)
		if err != nil {
			return nil, err
		}
		out[name] = driver.Profile{Driver: d, Kind: p.Driver, Model: p.Model,
			GoalMaxTurns: cmp.Or(p.GoalMaxTurns, DefaultGoalMaxTurns)}
		if rep, ok := d.(driver.CapabilityReporter); ok {
			c.mu.Lock()
			if c.live == nil {
				c.live = map[string]driver.CapabilityReporter{}
			}
			c.live[name] = rep
			c.mu.Unlock()
		}
	}
	if err := c.resolveGoalJudges(out); err != nil {
		return nil, err
	}
	return out, nil
}

// BuildKind builds a driver of kind with no settings of a profile: the
// driver a start picks by provider (the simulator, whose settings are
// none), when no profile already built one.
func (c *Config) BuildKind(kind string, env Env) (driver.Driver, error) {
	p, err := c.reg.Profile(kind, []byte(fmt.Sprintf(`{"driver":%q}`, kind)))
	if err != nil {
		return nil, err
	}
	return c.reg.Build(p, env)
}
