package profile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// Settings is a driver's own settings of a profile: the profile's keys
// besides the common ones (driver, description, model, goal_judge,
// goal_max_turns, capabilities),
// decoded strictly into the driver's type, then checked by Validate. p is
// the profile's common part (its name, model…); Validate's errors need not
// name the profile, the caller does.
type Settings interface {
	Validate(p Profile) error
}

// CapabilityAdjuster is optional on Settings: a profile whose settings
// give it more or less than its driver declares (a goal judge, say)
// returns its set from the driver's.
type CapabilityAdjuster interface {
	AdjustCapabilities(declared []string) []string
}

// KeyEnver is optional on Settings: the name of the environment variable
// that holds the profile's API key (Key implements it), so a profile
// whose variable is unset is warned about when it is built.
type KeyEnver interface {
	KeyEnv() string
}

// Registration is what a driver package declares of itself: its kind,
// its capabilities, the settings its profiles take and how to build its
// driver. A package exports one (NewRegistration); the binary lists them
// in a Registry.
type Registration struct {
	// Kind is the driver kind a profile names ("driver").
	Kind string
	// Capabilities are what the driver can do (protocol.Cap* names): every
	// profile of this kind has them, unless the profile's "capabilities"
	// lists fewer.
	Capabilities []string
	// GoalJudge says a profile of this kind may be another profile's
	// goal_judge: its driver is a driver.GoalJudge that judges any goal
	// (openai's model), not only those of its own runs.
	GoalJudge bool

	keys   []string // the setting keys its profiles take
	decode func(p Profile, raw []byte) (Settings, error)
	build  func(p Profile, env Env) (driver.Driver, error)
}

// NewRegistration declares a driver of kind that has caps: a profile's
// own keys decode strictly into an S (its JSON field names are the keys
// the driver takes) and are checked by (*S).Validate; build makes the
// profile's driver from them.
func NewRegistration[S any, PS interface {
	*S
	Settings
}](kind string, caps []string, build func(p Profile, s *S, env Env) (driver.Driver, error)) Registration {
	return Registration{Kind: kind, Capabilities: slices.Clone(caps), keys: jsonKeys(reflect.TypeFor[S]()),
		decode: func(p Profile, raw []byte) (Settings, error) {
			s := PS(new(S))
			if err := DecodeObject(raw, s); err != nil {
				return nil, err
			}
			return s, s.Validate(p)
		},
		build: func(p Profile, env Env) (driver.Driver, error) {
			s, ok := p.Settings.(PS)
			if !ok {
				return nil, fmt.Errorf("the profile's settings are not those of driver %s", kind)
			}
			return build(p, s, env)
		},
	}
}

// takes reports whether the driver's profiles take key (JSON's
// case-insensitive match).
func (r Registration) takes(key string) bool {
	return slices.ContainsFunc(r.keys, func(k string) bool { return strings.EqualFold(k, key) })
}

// jsonKeys lists the JSON field names of struct type t, its embedded
// structs' included.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			keys = append(keys, jsonKeys(f.Type)...)
		case name != "":
			keys = append(keys, name)
		default:
			keys = append(keys, f.Name)
		}
	}
	return keys
}

// Registry is the drivers profiles may name, by kind: a value the binary
// builds (NewRegistry), one Registration per driver.
type Registry struct {
	byKind map[string]Registration
	kinds  []string // in registration order
}

// NewRegistry lists the drivers profiles may name. A registration without
// a kind, a kind registered twice or an unknown capability is a
// programming error: it panics.
func NewRegistry(rs ...Registration) *Registry {
	r := &Registry{byKind: make(map[string]Registration, len(rs))}
	for _, reg := range rs {
		if reg.Kind == "" || reg.decode == nil {
			panic("profile: a registration without kind or settings (use NewRegistration)")
		}
		if _, dup := r.byKind[reg.Kind]; dup {
			panic("profile: driver " + reg.Kind + " registered twice")
		}
		for _, c := range reg.Capabilities {
			if !protocol.KnownCapability(c) {
				panic(fmt.Sprintf("profile: driver %s declares unknown capability %q", reg.Kind, c))
			}
		}
		reg.Capabilities = protocol.SortCapabilities(reg.Capabilities)
		r.byKind[reg.Kind] = reg
		r.kinds = append(r.kinds, reg.Kind)
	}
	return r
}

// Kinds lists the registered driver kinds, in registration order.
func (r *Registry) Kinds() []string { return slices.Clone(r.kinds) }

// Capabilities returns the capabilities driver kind declares (false: no
// such kind).
func (r *Registry) Capabilities(kind string) ([]string, bool) {
	reg, ok := r.byKind[kind]
	return slices.Clone(reg.Capabilities), ok
}

// Profile parses one profile named name from its JSON object: the common
// keys, then the rest decoded and checked by its driver's registration,
// then its capabilities. Errors name the profile.
func (r *Registry) Profile(name string, raw []byte) (Profile, error) {
	p := Profile{Name: name}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("profile %q: "+format, append([]any{name}, args...)...)
	}
	if !reName.MatchString(name) {
		return p, bad("names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return p, bad("want a JSON object of settings")
	}
	rest := map[string]json.RawMessage{}
	var listed bool // the file lists the profile's capabilities
	for k, v := range keys {
		var err error
		switch {
		case strings.EqualFold(k, "driver"):
			err = decodeField(v, &p.Driver)
		case strings.EqualFold(k, "description"):
			err = decodeField(v, &p.Description)
		case strings.EqualFold(k, "model"):
			err = decodeField(v, &p.Model)
		case strings.EqualFold(k, "goal_judge"):
			err = decodeField(v, &p.GoalJudge)
		case strings.EqualFold(k, "goal_max_turns"):
			err = decodeField(v, &p.GoalMaxTurns)
		case strings.EqualFold(k, "capabilities"):
			p.Capabilities, listed = []string{}, string(v) != "null"
			err = decodeField(v, &p.Capabilities)
		case strings.EqualFold(k, "options"):
			if !isObject(v) && string(v) != "null" {
				return p, bad("options must be a JSON object")
			}
			if isObject(v) && !isEmptyObject(v) {
				rest[k] = v // an empty object configures nothing
			}
			continue
		default:
			rest[k] = v
			continue
		}
		if err != nil {
			return p, bad("field %s: %v", strings.ToLower(k), err)
		}
	}
	reg, ok := r.byKind[p.Driver]
	if !ok {
		if p.Driver == "" {
			return p, bad("driver is required (one of %s)", strings.Join(r.kinds, ", "))
		}
		return p, bad("unknown driver %q (want one of %s)", p.Driver, strings.Join(r.kinds, ", "))
	}
	if err := p.validateGoalBudget(); err != nil {
		return p, err
	}
	if err := r.unusedKeys(reg, rest); err != nil {
		return p, fmt.Errorf("profile %q: %w", name, err)
	}
	raw, err := json.Marshal(rest)
	if err != nil {
		return p, bad("%v", err)
	}
	if p.Settings, err = reg.decode(p, raw); err != nil {
		return p, fmt.Errorf("profile %q: %w", name, err)
	}
	caps := slices.Clone(reg.Capabilities)
	if p.GoalJudge != "" { // another profile's driver judges its goals
		caps = protocol.SortCapabilities(append(caps, protocol.CapGoal))
	}
	if a, ok := p.Settings.(CapabilityAdjuster); ok {
		caps = protocol.SortCapabilities(a.AdjustCapabilities(caps))
	}
	if listed {
		for _, c := range p.Capabilities {
			switch {
			case !protocol.KnownCapability(c):
				return p, bad("capabilities: unknown capability %q (want some of %s)", c, strings.Join(protocol.Capabilities(), ", "))
			case !slices.Contains(caps, c):
				return p, bad("capabilities: driver %s cannot do %q (it can do %s)", p.Driver, c, orNone(caps))
			}
		}
		caps = protocol.SortCapabilities(p.Capabilities)
	}
	p.Capabilities = caps
	return p, nil
}

// unusedKeys refuses every key of rest that reg's driver does not take:
// "<key> is not used by driver <kind>" for a key another driver takes,
// else an unknown field (with a hint for a key pasted into the file).
func (r *Registry) unusedKeys(reg Registration, rest map[string]json.RawMessage) error {
	names := make([]string, 0, len(rest))
	for k := range rest {
		names = append(names, k)
	}
	slices.Sort(names)
	var errs []error
	for _, k := range names {
		switch {
		case reg.takes(k):
		case slices.ContainsFunc(r.kinds, func(kind string) bool { return r.byKind[kind].takes(k) }):
			errs = append(errs, fmt.Errorf("%s is not used by driver %s", strings.ToLower(k), reg.Kind))
		default:
			errs = append(errs, unknownField(k))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// Build builds the driver of p, a profile Profile parsed.
func (r *Registry) Build(p Profile, env Env) (driver.Driver, error) {
	reg, ok := r.byKind[p.Driver]
	if !ok {
		return nil, fmt.Errorf("profile %q: driver %s is not available in this build", p.Name, p.Driver)
	}
	env = env.withDefaults()
	if k, ok := p.Settings.(KeyEnver); ok && k.KeyEnv() != "" && env.Getenv(k.KeyEnv()) == "" {
		env.Logger.Warn("profile API key variable is not set; its runs will fail with code auth where it stays unset",
			"profile", p.Name, "api_key_env", k.KeyEnv())
	}
	d, err := reg.build(p, env)
	if err != nil {
		return nil, fmt.Errorf("profile %q: %w", p.Name, err)
	}
	return d, nil
}

func orNone(caps []string) string {
	if len(caps) == 0 {
		return "nothing"
	}
	return strings.Join(caps, ", ")
}
