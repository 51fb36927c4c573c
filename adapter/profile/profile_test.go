package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

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
	c, err := Parse([]byte(example))
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
	if l.Name != "local" || l.IdleTimeout.D() != 90*time.Second || l.Timeout.Or(time.Minute) != time.Minute {
		t.Errorf("local = %+v", l)
	}
	a := c.Profiles["agent"]
	if a.CancelGrace.D() != 2*time.Second || a.KillGrace.D() != time.Second || a.Timeout.D() != 10*time.Minute || a.Args[0] != "a.py" {
		t.Errorf("agent = %+v", a)
	}
	var opts struct {
		PollInterval string `json:"poll_interval"`
	}
	if err := c.Profiles["hermes"].DecodeOptions(&opts); err != nil || opts.PollInterval != "1s" {
		t.Errorf("options = %+v, %v", opts, err)
	}
	var strict struct{}
	if err := c.Profiles["hermes"].DecodeOptions(&strict); err == nil {
		t.Error("unknown option field accepted")
	}
	pub := c.Public()
	b, _ := json.Marshal(pub)
	if strings.Contains(string(b), "GPT_KEY") || strings.Contains(string(b), "base_url") || strings.Contains(string(b), "python3") {
		t.Errorf("public info leaks settings: %s", b)
	}
	if !strings.Contains(string(b), `{"name":"local","driver":"openai","default":true}`) {
		t.Errorf("public info %s", b)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, file, want string
		notWant          string
	}{
		{"syntax", `{"profiles": {`, "invalid JSON", ""},
		{"no profiles", `{}`, `no "profiles"`, ""},
		{"unknown field", `{"profiles": {"a": {"driver": "sim", "colour": "red"}}}`, `unknown field "colour"`, ""},
		{"key in file", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "api_key": "sk-live-123456789"}}}`, "api_key_env", "sk-live"},
		{"key as env name", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "api_key_env": "sk-live-123456789"}}}`, "NAME of an environment variable", "sk-live"},
		{"no driver", `{"profiles": {"a": {}}}`, `profile "a": driver is required`, ""},
		{"bad driver", `{"profiles": {"a": {"driver": "gpt"}}}`, `unknown driver "gpt"`, ""},
		{"bad name", `{"profiles": {"a b": {"driver": "sim"}}}`, `profile "a b": names are`, ""},
		{"openai no url", `{"profiles": {"a": {"driver": "openai", "model": "m"}}}`, "base_url is required", ""},
		{"openai no model", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x"}}}`, "model is required", ""},
		{"bad url", `{"profiles": {"a": {"driver": "openai", "base_url": "ftp://x", "model": "m"}}}`, "http:// or https://", ""},
		{"url creds", `{"profiles": {"a": {"driver": "hermes", "base_url": "http://u:hunter22@x"}}}`, "must not carry credentials", "hunter22"},
		{"exec no command", `{"profiles": {"a": {"driver": "exec"}}}`, "command is required", ""},
		{"command on openai", `{"profiles": {"a": {"driver": "openai", "base_url": "http://x", "model": "m", "command": "sh"}}}`, "command is not used by driver openai", ""},
		{"timeout on sim", `{"profiles": {"a": {"driver": "sim", "timeout": "1s"}}}`, "timeout is not used by driver sim", ""},
		{"base_url on exec", `{"profiles": {"a": {"driver": "exec", "command": "sh", "base_url": "http://x"}}}`, "base_url is not used by driver exec", ""},
		{"bad duration", `{"profiles": {"a": {"driver": "exec", "command": "sh", "timeout": "soon"}}}`, `"soon" is not a duration`, ""},
		{"number duration", `{"profiles": {"a": {"driver": "exec", "command": "sh", "timeout": 5}}}`, "duration string", ""},
		{"negative", `{"profiles": {"a": {"driver": "exec", "command": "sh", "timeout": "-1s"}}}`, "timeout must not be negative", ""},
		{"bad env name", `{"profiles": {"a": {"driver": "exec", "command": "sh", "env": {"A-B": "1"}}}}`, `env: "A-B"`, ""},
		{"unknown default", `{"default": "nope", "profiles": {"a": {"driver": "sim"}}}`, `default: no profile named "nope"`, ""},
		{"options not object", `{"profiles": {"a": {"driver": "sim", "options": [1]}}}`, "options must be a JSON object", ""},
		{"trailing", `{"profiles": {"a": {"driver": "sim"}}} {}`, "trailing data", ""},
		{"unknown goal judge", `{"profiles": {"a": {"driver": "sim", "goal_judge": "nope"}}}`, `profile "a": goal_judge: no profile named "nope"`, ""},
		{"goal judge not openai", `{"profiles": {"a": {"driver": "hermes", "base_url": "http://x", "goal_judge": "b"}, "b": {"driver": "exec", "command": "sh"}}}`,
			`profile "a": goal_judge: profile "b" has driver exec; a goal judge is an openai profile`, ""},
		{"negative goal budget", `{"profiles": {"a": {"driver": "sim", "goal_max_turns": -1}}}`, "goal_max_turns must be between 0", ""},
		{"goal budget too big", `{"profiles": {"a": {"driver": "sim", "goal_max_turns": 1001}}}`, "goal_max_turns must be between 0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file))
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
}

func TestLoad(t *testing.T) {
	c, err := Load("")
	if err != nil || len(c.Profiles) != 1 || c.Profiles["sim"].Driver != KindSim || c.DefaultName() != "sim" {
		t.Fatalf("Load(\"\") = %+v, %v", c, err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "p.json")
	os.WriteFile(p, []byte(example), 0o600)
	if c, err := Load(p); err != nil || len(c.Profiles) != 5 {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"profiles": {"x": {"driver": "openai"}}}`), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), `profile "x"`) {
		t.Errorf("bad file: %v", err)
	}
}

func TestSecret_NeverFormats(t *testing.T) {
	const key = "sk-test-abcdefghijklmnop"
	s := NewSecret(key)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "key", s, "p", struct{ K Secret }{s})
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

type fakeDriver struct{ key Secret }

func (fakeDriver) Execute(context.Context, *driver.Execution) (*protocol.Usage, error) {
	return nil, nil
}

func TestBuild_OwnKeyOnly(t *testing.T) {
	c, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GPT_KEY": "gpt-secret", "HERMES_KEY": "hermes-secret"}
	keys := map[string]string{}
	var logBuf bytes.Buffer
	b := func(p Profile, e Env) (driver.Driver, error) {
		keys[p.Name] = p.APIKey(e.Getenv).Reveal()
		return fakeDriver{key: p.APIKey(e.Getenv)}, nil
	}
	builders := map[string]Builder{KindSim: b, KindOpenAI: b, KindExec: b, KindHermes: b}
	drivers, err := c.Build(builders, Env{Getenv: func(k string) string { return env[k] },
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if keys["gpt"] != "gpt-secret" || keys["hermes"] != "hermes-secret" || keys["local"] != "" || keys["agent"] != "" {
		t.Errorf("keys = %v", keys)
	}
	if d := drivers["local"]; d.Kind != KindOpenAI || d.Model != "m1" || d.Driver == nil {
		t.Errorf("local driver = %+v", d)
	}
	delete(builders, KindHermes)
	if _, err := c.Build(builders, Env{Getenv: func(string) string { return "" }, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}); err == nil ||
		!strings.Contains(err.Error(), `profile "hermes": driver hermes is not available`) {
		t.Errorf("missing builder: %v", err)
	}
	if !strings.Contains(logBuf.String(), "GPT_KEY") || strings.Contains(logBuf.String(), "secret") {
		t.Errorf("unset-key warning: %s", logBuf.String())
	}
}

// judgeDriver is a fake driver that judges goals.
type judgeDriver struct{ fakeDriver }

func (judgeDriver) JudgeGoal(context.Context, protocol.GoalUpdatedPayload, string) (driver.Verdict, error) {
	return driver.Verdict{Kind: driver.VerdictDone}, nil
}

// Each profile's goal judge is resolved when the drivers are built: its
// goal_judge's driver, else its own driver when that judges, else none;
// goal_max_turns defaults to 20.
func TestBuild_GoalJudges(t *testing.T) {
	c, err := Parse([]byte(`{"profiles": {
		"llm":    {"driver": "openai", "base_url": "http://x", "model": "m"},
		"cheap":  {"driver": "openai", "base_url": "http://x", "model": "small", "goal_max_turns": 3},
		"agent":  {"driver": "hermes", "base_url": "http://h"},
		"judged": {"driver": "hermes", "base_url": "http://h", "goal_judge": "cheap", "goal_max_turns": 7},
		"script": {"driver": "exec", "command": "sh", "goal_judge": "llm"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]driver.Driver{}
	b := func(p Profile, e Env) (driver.Driver, error) {
		var d driver.Driver = fakeDriver{}
		if p.Driver == KindOpenAI || p.Driver == KindSim {
			d = &judgeDriver{}
		}
		built[p.Name] = d
		return d, nil
	}
	drivers, err := c.Build(map[string]Builder{KindSim: b, KindOpenAI: b, KindExec: b, KindHermes: b}, Env{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		judge  string
		budget int
	}{"llm": {"llm", 20}, "cheap": {"cheap", 3}, "agent": {"", 20}, "judged": {"cheap", 7}, "script": {"llm", 20}, "sim": {"sim", 20}} {
		pd := drivers[name]
		var wantJudge driver.GoalJudge
		if want.judge != "" {
			wantJudge = built[want.judge].(driver.GoalJudge)
		}
		if pd.Judge != wantJudge || pd.GoalMaxTurns != want.budget {
			t.Errorf("profile %s: judge %v, budget %d; want the judge of %q, budget %d", name, pd.Judge, pd.GoalMaxTurns, want.judge, want.budget)
		}
	}
	// A goal_judge whose driver cannot judge (a build without openai's
	// judge) fails the build, naming both profiles.
	_, err = c.Build(map[string]Builder{KindSim: b, KindOpenAI: func(Profile, Env) (driver.Driver, error) { return fakeDriver{}, nil },
		KindExec: b, KindHermes: b}, Env{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "goal_judge: the driver of profile") {
		t.Errorf("a judge that cannot judge: %v", err)
	}
}
