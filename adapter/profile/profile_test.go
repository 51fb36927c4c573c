package profile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/execdrv"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/openai"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/protocol"
)

// drivers is the binary's registry (cmd/hub's drivers()).
func drivers() *profile.Registry {
	return profile.NewRegistry(sim.Registration(), openai.Registration(), execdrv.Registration(), hermes.Registration())
}

const example = `{
  "default": "local",
  "profiles": {
    "local": {"driver": "openai", "base_url": "http://127.0.0.1:8081/v1", "model": "m1", "idle_timeout": "90s"},
    "gpt":   {"driver": "openai", "base_url": "https://api.example.com", "model": "gpt", "api_key_env": "GPT_KEY", "instructions": "be brief"},
    "agent": {"driver": "exec", "command": "python3", "args": ["a.py"], "env": {"A": "1"}, "inherit_env": ["HOSTNAME"], "cancel_grace": "2s", "kill_grace": "1s", "timeout": "10m"},
    "hermes": {"driver": "hermes", "base_url": "http://127.0.0.1:8642", "api_key_env": "HERMES_KEY", "options": {"poll_interval": "1s"}}
  }
}`

func TestParse_Example(t *testing.T) {
	c, err := profile.Parse([]byte(example), drivers())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(c.Names(), ","), "agent,gpt,hermes,local,sim"; got != want {
		t.Errorf("names %s, want %s (the built-in sim added)", got, want)
	}
	if c.DefaultName() != "local" {
		t.Errorf("default %q", c.DefaultName())
	}
	l := c.Profiles["local"]
	ls := l.Settings.(*openai.Settings)
	if l.Name != "local" || l.Model != "m1" || ls.IdleTimeout.D() != 90*time.Second || ls.Timeout.Or(time.Minute) != time.Minute {
		t.Errorf("local = %+v %+v", l, ls)
	}
	a := c.Profiles["agent"].Settings.(*execdrv.Settings)
	if a.CancelGrace.D() != 2*time.Second || a.KillGrace.D() != time.Second || a.Timeout.D() != 10*time.Minute || a.Args[0] != "a.py" || a.Env["A"] != "1" {
		t.Errorf("agent = %+v", a)
	}
	if h := c.Profiles["hermes"].Settings.(*hermes.Settings); h.Options.PollInterval.D() != time.Second || h.APIKeyEnv != "HERMES_KEY" {
		t.Errorf("hermes = %+v", h)
	}
	pub := c.Public()
	b, _ := json.Marshal(pub)
	if strings.Contains(string(b), "GPT_KEY") || strings.Contains(string(b), "base_url") || strings.Contains(string(b), "python3") {
		t.Errorf("public info leaks settings: %s", b)
	}
	if !strings.Contains(string(b), `{"name":"local","driver":"openai","capabilities":["cancel","queue","goal","attachments","reasoning","usage"],"default":true}`) {
		t.Errorf("public info %s", b)
	}
}

// A file written before drivers registered themselves loads the same:
// flat keys, keys in any case, an empty options object on any driver.
func TestParse_FlatKeysAsBefore(t *testing.T) {
	c, err := profile.Parse([]byte(`{"profiles": {
		"a": {"Driver": "openai", "BASE_URL": "http://x", "Model": "m", "options": {}},
		"s": {"driver": "sim", "model": "m-sim", "options": null, "description": "d"}}}`), drivers())
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Profiles["a"]; a.Driver != "openai" || a.Model != "m" || a.Settings.(*openai.Settings).BaseURL != "http://x" {
		t.Errorf("a = %+v", a)
	}
	if s := c.Profiles["s"]; s.Model != "m-sim" || s.Description != "d" {
		t.Errorf("s = %+v", s)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, file, want string
		notWant          string
	}{
		{"syntax", `{"profiles": {`, "invalid JSON", ""},
		{"no profiles", `{}`, `no "profiles"`, ""},
		{"unknown field", `{"profiles": {"a": {"driver": "sim", "colour": "red"}}}`, `profile "a": unknown field "colour"`, ""},
		{"unknown top-level field", `{"profiles": {}, "colour": 1}`, `unknown field "colour"`, ""},
		{"key in file", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "api_key": "sk-live-123456789"}}}`, "api_key_env", "sk-live"},
		{"key as env name", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "api_key_env": "sk-live-123456789"}}}`, "NAME of an environment variable", "sk-live"},
		{"no driver", `{"profiles": {"a": {}}}`, `profile "a": driver is required`, ""},
		{"bad driver", `{"profiles": {"a": {"driver": "gpt"}}}`, `unknown driver "gpt" (want one of sim, openai, exec, hermes)`, ""},
		{"driver not a string", `{"profiles": {"a": {"driver": 5}}}`, `profile "a": field driver: want string`, ""},
		{"bad name", `{"profiles": {"a b": {"driver": "sim"}}}`, `profile "a b": names are`, ""},
		{"not an object", `{"profiles": {"a": [1]}}`, `profile "a": want a JSON object`, ""},
		{"openai no url", `{"profiles": {"a": {"driver": "openai", "model": "m"}}}`, "base_url is required", ""},
		{"openai no model", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x"}}}`, "model is required", ""},
		{"bad url", `{"profiles": {"a": {"driver": "openai", "base_url": "ftp://x", "model": "m"}}}`, "http:// or https://", ""},
		{"url creds", `{"profiles": {"a": {"driver": "hermes", "base_url": "http://u:hunter22@x"}}}`, "must not carry credentials", "hunter22"},
		{"exec no command", `{"profiles": {"a": {"driver": "exec"}}}`, "command is required", ""},
		{"command on openai", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "command": "sh"}}}`, `profile "a": command is not used by driver openai`, ""},
		{"timeout on sim", `{"profiles": {"a": {"driver": "sim", "timeout": "1s"}}}`, "timeout is not used by driver sim", ""},
		{"base_url on exec", `{"profiles": {"a": {"driver": "exec", "command": "sh", "base_url": "http://x"}}}`, "base_url is not used by driver exec", ""},
		{"cancel_grace on openai", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "cancel_grace": "1s"}}}`, "cancel_grace is not used by driver openai", ""},
		{"options on sim", `{"profiles": {"a": {"driver": "sim", "options": {"x": 1}}}}`, "options is not used by driver sim", ""},
		{"unknown hermes option", `{"profiles": {"a": {"driver": "hermes", "base_url": "http://x", "options": {"polling": "1s"}}}}`, `profile "a": options: unknown field "polling"`, ""},
		{"bad duration", `{"profiles": {"a": {"driver": "exec", "command": "sh", "timeout": "soon"}}}`, `"soon" is not a duration`, ""},
		{"number duration", `{"profiles": {"a": {"driver": "exec", "command": "sh", "timeout": 5}}}`, "duration string", ""},
		{"negative", `{"profiles": {"a": {"driver": "exec", "command": "sh", "timeout": "-1s"}}}`, "timeout must not be negative", ""},
		{"bad env name", `{"profiles": {"a": {"driver": "exec", "command": "sh", "env": {"A-B": "1"}}}}`, `env: "A-B"`, ""},
		{"unknown default", `{"default": "nope", "profiles": {"a": {"driver": "sim"}}}`, `default: no profile named "nope"`, ""},
		{"options not object", `{"profiles": {"a": {"driver": "sim", "options": [1]}}}`, "options must be a JSON object", ""},
		{"trailing", `{"profiles": {"a": {"driver": "sim"}}} {}`, "trailing data", ""},
		{"unknown capability", `{"profiles": {"a": {"driver": "exec", "command": "sh", "capabilities": ["cancel", "telepathy"]}}}`,
			`profile "a": capabilities: unknown capability "telepathy"`, ""},
		{"capability the driver lacks", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "capabilities": ["approval"]}}}`,
			`profile "a": capabilities: driver openai cannot do "approval"`, ""},
		{"capabilities not a list", `{"profiles": {"a": {"driver": "sim", "capabilities": "steer"}}}`, `profile "a": field capabilities: want []string`, ""},
		{"goal without a judge", `{"profiles": {"a": {"driver": "hermes", "base_url": "http://x", "capabilities": ["goal"]}}}`,
			`profile "a": capabilities: driver hermes cannot do "goal"`, ""},
		{"unknown goal judge", `{"profiles": {"a": {"driver": "sim", "goal_judge": "nope"}}}`, `profile "a": goal_judge: no profile named "nope"`, ""},
		{"goal judge not openai", `{"profiles": {"a": {"driver": "hermes", "base_url": "http://x", "goal_judge": "b"}, "b": {"driver": "exec", "command": "sh"}}}`,
			`profile "a": goal_judge: profile "b" has driver exec; a goal judge is an openai profile`, ""},
		{"negative goal budget", `{"profiles": {"a": {"driver": "sim", "goal_max_turns": -1}}}`, "goal_max_turns must be between 0", ""},
		{"goal budget too big", `{"profiles": {"a": {"driver": "sim", "goal_max_turns": 1001}}}`, "goal_max_turns must be between 0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := profile.Parse([]byte(tt.file), drivers())
			if err == nil {
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
				t.Errorf("error %q echoes the secret %q", err, tt.notWant)
			}
		})
	}
	// Every profile's problems are reported at once.
	_, err := profile.Parse([]byte(`{"profiles": {"a": {"driver": "exec"}, "b": {"driver": "sim", "colour": 1}}}`), drivers())
	if err == nil || !strings.Contains(err.Error(), `profile "a"`) || !strings.Contains(err.Error(), `profile "b"`) {
		t.Errorf("two bad profiles: %v", err)
	}
}

// Each driver declares its capabilities; a profile has its driver's, or
// the fewer its file lists; a start naming a provider has the kind's.
func TestParse_Capabilities(t *testing.T) {
	c, err := profile.Parse([]byte(`{"profiles": {
		"chat": {"driver": "openai", "base_url": "http://x", "model": "m"},
		"plain": {"driver": "exec", "command": "sh", "capabilities": ["usage", "cancel", "queue", "cancel"]},
		"mute": {"driver": "exec", "command": "sh", "capabilities": []},
		"agent": {"driver": "exec", "command": "sh"},
		"hermes": {"driver": "hermes", "base_url": "http://x"},
		"judged": {"driver": "hermes", "base_url": "http://x", "goal_judge": "chat"},
		"narrow": {"driver": "hermes", "base_url": "http://x", "goal_judge": "chat", "capabilities": ["cancel", "goal"]}}}`), drivers())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"chat":   "cancel queue goal attachments reasoning usage",
		"plain":  "cancel queue usage",
		"mute":   "",
		"agent":  "cancel approval clarify steer queue attachments workspace reasoning usage tools",
		"hermes": "cancel approval steer queue reasoning usage tools",
		"sim":    "cancel approval clarify steer queue goal attachments reasoning usage tools",
		"judged": "cancel approval steer queue goal reasoning usage tools",
		"narrow": "cancel goal",
	}
	for name, w := range want {
		caps, ok := c.Capabilities(name, "")
		if got := strings.Join(caps, " "); !ok || got != w {
			t.Errorf("%s: %q %v, want %q", name, got, ok, w)
		}
	}
	if caps, ok := c.Capabilities("", "sim"); !ok || !slices.Contains(caps, protocol.CapGoal) {
		t.Errorf("provider sim: %v %v", caps, ok)
	}
	if caps, ok := c.Capabilities("", ""); !ok || !slices.Contains(caps, protocol.CapGoal) {
		t.Errorf("no default: the simulator's, got %v %v", caps, ok)
	}
	if _, ok := c.Capabilities("nope", ""); ok {
		t.Error("an unknown profile has capabilities")
	}
	if _, ok := c.Capabilities("", "nope"); ok {
		t.Error("an unknown provider has capabilities")
	}
	c.Default = "hermes"
	if caps, _ := c.Capabilities("", ""); slices.Contains(caps, protocol.CapGoal) {
		t.Errorf("the default hermes profile: %v", caps)
	}
}

func TestLoad(t *testing.T) {
	c, err := profile.Load("", drivers())
	if err != nil || len(c.Profiles) != 1 || c.Profiles["sim"].Driver != sim.Kind || c.DefaultName() != "sim" {
		t.Fatalf("Load(\"\") = %+v, %v", c, err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "p.json")
	os.WriteFile(p, []byte(example), 0o600)
	if c, err := profile.Load(p, drivers()); err != nil || len(c.Profiles) != 5 {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if _, err := profile.Load(filepath.Join(dir, "missing.json"), drivers()); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"profiles": {"x": {"driver": "openai"}}}`), 0o600)
	if _, err := profile.Load(bad, drivers()); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), `profile "x"`) {
		t.Errorf("bad file: %v", err)
	}
}

func TestSecret_NeverFormats(t *testing.T) {
	const key = "sk-test-abcdefghijklmnop"
	s := profile.NewSecret(key)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "key", s, "p", struct{ K profile.Secret }{s})
	b, _ := json.Marshal(map[string]any{"k": s})
	out := fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s) + string(b) + buf.String()
	if strings.Contains(out, key) {
		t.Fatalf("secret printed: %s", out)
	}
	if s.Reveal() != key {
		t.Fatal("Reveal")
	}
	if got := s.Scrub("bad key " + key + "!"); got != "bad key [REDACTED]!" {
		t.Errorf("Scrub = %q", got)
	}
}

// A driver is its package's registration and nothing else: this test's
// own kind "keyed" takes a key and a colour, and builds with its own key.
type keyedSettings struct {
	profile.Key
	Colour string `json:"colour"`
}

func (s *keyedSettings) Validate(profile.Profile) error {
	if s.Colour == "" {
		return fmt.Errorf("colour is required for driver keyed")
	}
	return s.Key.Validate()
}

type fakeDriver struct{ key profile.Secret }

func (fakeDriver) Execute(context.Context, *driver.Execution) (*protocol.Usage, error) {
	return nil, nil
}

func TestBuild_OwnKeyOnly(t *testing.T) {
	keys := map[string]string{}
	keyed := profile.NewRegistration("keyed", []string{protocol.CapCancel},
		func(p profile.Profile, s *keyedSettings, env profile.Env) (driver.Driver, error) {
			keys[p.Name] = s.APIKey(env.Getenv).Reveal()
			return fakeDriver{key: s.APIKey(env.Getenv)}, nil
		})
	reg := profile.NewRegistry(sim.Registration(), keyed)
	c, err := profile.Parse([]byte(`{"profiles": {
		"a": {"driver": "keyed", "colour": "red", "api_key_env": "A_KEY", "model": "m-a"},
		"b": {"driver": "keyed", "colour": "blue", "api_key_env": "B_KEY"},
		"c": {"driver": "keyed", "colour": "green"}}}`), reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := profile.Parse([]byte(`{"profiles": {"a": {"driver": "keyed"}}}`), reg); err == nil || !strings.Contains(err.Error(), `profile "a": colour is required`) {
		t.Errorf("the kind's own validation: %v", err)
	}
	if _, err := profile.Parse([]byte(`{"profiles": {"a": {"driver": "sim", "colour": "red"}}}`), reg); err == nil || !strings.Contains(err.Error(), "colour is not used by driver sim") {
		t.Errorf("a key of another kind: %v", err)
	}
	env := map[string]string{"A_KEY": "a-secret"}
	var logBuf bytes.Buffer
	drivers, err := c.Build(profile.Env{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if keys["a"] != "a-secret" || keys["b"] != "" || keys["c"] != "" {
		t.Errorf("keys = %v", keys)
	}
	if d := drivers["a"]; d.Kind != "keyed" || d.Model != "m-a" || d.Driver == nil {
		t.Errorf("a's driver = %+v", d)
	}
	if d := drivers["sim"]; d.Kind != sim.Kind || d.Driver == nil {
		t.Errorf("the built-in sim = %+v", d)
	}
	if !strings.Contains(logBuf.String(), "B_KEY") || strings.Contains(logBuf.String(), "secret") || strings.Contains(logBuf.String(), "A_KEY") {
		t.Errorf("unset-key warning: %s", logBuf.String())
	}
	if caps, _ := c.Capabilities("a", ""); !slices.Equal(caps, []string{protocol.CapCancel}) {
		t.Errorf("a's capabilities %v", caps)
	}
}

func TestRegistry_Refuses(t *testing.T) {
	for name, regs := range map[string][]profile.Registration{
		"twice":   {sim.Registration(), sim.Registration()},
		"no kind": {{}},
		"unknown capability": {profile.NewRegistration("x", []string{"telepathy"},
			func(profile.Profile, *sim.Settings, profile.Env) (driver.Driver, error) { return nil, nil })},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("accepted")
				}
			}()
			profile.NewRegistry(regs...)
		})
	}
}

// Each profile's goal judge is resolved when the drivers are built: its
// goal_judge's driver, else its own driver when that judges, else none;
// goal_max_turns defaults to 20.
func TestBuild_GoalJudges(t *testing.T) {
	const file = `{"profiles": {
		"llm":    {"driver": "openai", "base_url": "http://x", "model": "m"},
		"cheap":  {"driver": "openai", "base_url": "http://x", "model": "small", "goal_max_turns": 3},
		"agent":  {"driver": "hermes", "base_url": "http://h"},
		"judged": {"driver": "hermes", "base_url": "http://h", "goal_judge": "cheap", "goal_max_turns": 7},
		"script": {"driver": "exec", "command": "sh", "goal_judge": "llm"}}}`
	c, err := profile.Parse([]byte(file), drivers())
	if err != nil {
		t.Fatal(err)
	}
	env := profile.Env{Getenv: func(string) string { return "" }}
	built, err := c.Build(env)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		judge  string
		budget int
	}{"llm": {"llm", 20}, "cheap": {"cheap", 3}, "agent": {"", 20}, "judged": {"cheap", 7}, "script": {"llm", 20}, "sim": {"sim", 20}} {
		pd := built[name]
		var wantJudge driver.GoalJudge
		if want.judge != "" {
			wantJudge = built[want.judge].Driver.(driver.GoalJudge)
		}
		if pd.Judge != wantJudge || pd.GoalMaxTurns != want.budget {
			t.Errorf("profile %s: judge %v, budget %d; want the judge of %q, budget %d", name, pd.Judge, pd.GoalMaxTurns, want.judge, want.budget)
		}
		caps, _ := c.Capabilities(name, "")
		if slices.Contains(caps, protocol.CapGoal) != (want.judge != "") {
			t.Errorf("profile %s: capabilities %v; goal only with a judge", name, caps)
		}
	}
	// A goal_judge whose driver cannot judge (a build whose openai is no
	// judge) fails the build, naming both profiles.
	notJudge := profile.NewRegistration("openai", []string{protocol.CapCancel},
		func(profile.Profile, *openai.Settings, profile.Env) (driver.Driver, error) { return fakeDriver{}, nil })
	notJudge.GoalJudge = true
	c, err = profile.Parse([]byte(file), profile.NewRegistry(sim.Registration(), notJudge, execdrv.Registration(), hermes.Registration()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.Build(env); err == nil || !strings.Contains(err.Error(), `profile "judged": goal_judge: the driver of profile "cheap" cannot judge goals`) {
		t.Errorf("a judge that cannot judge: %v", err)
	}
}
