package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/protocol"
)

// The binary registers the four drivers, the simulator under the built-in
// profile's name, and each declares the capabilities docs/profiles.md
// says it has.
func TestDrivers_Registry(t *testing.T) {
	reg := drivers()
	if got := strings.Join(reg.Kinds(), ","); got != "sim,openai,exec,hermes,agui" {
		t.Fatalf("kinds %s", got)
	}
	if sim.Kind != profile.BuiltinSim {
		t.Fatalf("the built-in profile %q is not the simulator's kind %q", profile.BuiltinSim, sim.Kind)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "profiles.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (sim|openai|exec|hermes|agui) \| ([a-z, ]+) \|`)
	rows := row.FindAllStringSubmatch(string(doc), -1)
	if len(rows) != 5 {
		t.Fatalf("docs/profiles.md's capabilities table has %d driver rows, want 5", len(rows))
	}
	for _, r := range rows {
		caps, _ := reg.Capabilities(r[1])
		if got := strings.Join(caps, ", "); got != r[2] {
			t.Errorf("driver %s declares %q; docs/profiles.md says %q", r[1], got, r[2])
		}
	}
	// What a driver declares, its built driver does: steer iff it steers,
	// goal iff it judges goals.
	minimal := map[string]string{
		"sim":    `{"driver": "sim"}`,
		"openai": `{"driver": "openai", "base_url": "http://127.0.0.1:1", "model": "m"}`,
		"exec":   `{"driver": "exec", "command": "/bin/true"}`,
		"hermes": `{"driver": "hermes", "base_url": "http://127.0.0.1:1"}`,
		"agui":   `{"driver": "agui", "url": "http://127.0.0.1:1/agent"}`,
	}
	for _, kind := range reg.Kinds() {
		p, err := reg.Profile("p", []byte(minimal[kind]))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		d, err := reg.Build(p, profile.Env{Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		s, _ := d.(driver.Steerer)
		_, judges := d.(driver.GoalJudge)
		if steers := s != nil && s.Steers(); steers != slices.Contains(p.Capabilities, protocol.CapSteer) {
			t.Errorf("driver %s steers %v, declares %v", kind, steers, p.Capabilities)
		}
		if judges != slices.Contains(p.Capabilities, protocol.CapGoal) {
			t.Errorf("driver %s judges goals %v, declares %v", kind, judges, p.Capabilities)
		}
	}
}

// The simulator is built once: the built-in profile's driver is the one a
// start picks by provider, unless the file gave that name to another
// driver.
func TestProfiles_SimBuiltOnce(t *testing.T) {
	l, err := loadProfiles(RuntimeConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.providers[sim.Kind] == nil || l.providers[sim.Kind] != l.drivers[profile.BuiltinSim].Driver {
		t.Fatalf("provider sim %v, profile sim %v: two simulators", l.providers[sim.Kind], l.drivers[profile.BuiltinSim].Driver)
	}
	file := filepath.Join(t.TempDir(), "profiles.json")
	os.WriteFile(file, []byte(`{"profiles": {"sim": {"driver": "exec", "command": "/bin/true"}}}`), 0o600)
	l, err = loadProfiles(RuntimeConfig{Profiles: file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.providers[sim.Kind].(*sim.Driver); !ok || l.drivers["sim"].Kind != "exec" {
		t.Fatalf("provider sim %T, profile sim %+v", l.providers[sim.Kind], l.drivers["sim"])
	}
}

// The file example of docs/profiles.md loads.
func TestProfiles_DocExamplesLoad(t *testing.T) {
	block := regexp.MustCompile("(?s)```json\n(\\{\n  \"default\".*?)\n```")
	for _, f := range []string{filepath.Join(repoRoot, "docs", "profiles.md")} {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := block.FindStringSubmatch(string(doc))
		if m == nil {
			t.Fatalf("%s: no profile file example", f)
		}
		c, err := profile.Parse([]byte(m[1]), drivers())
		if err != nil {
			t.Fatalf("%s: the example does not load: %v", f, err)
		}
		if !slices.Contains(c.Names(), "script") {
			t.Errorf("%s: example profiles %v", f, c.Names())
		}
	}
}

// An unknown capability name in a profile file fails start-up, naming the
// profile and the name.
func TestProfiles_UnknownCapabilityFailsStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "profiles.json")
	os.WriteFile(file, []byte(`{"profiles": {"agent": {"driver": "exec", "command": "/bin/true", "capabilities": ["cancel", "telepathy"]}}}`), 0o600)
	want := `profile "agent": capabilities: unknown capability "telepathy"`
	if _, err := loadProfiles(RuntimeConfig{Profiles: file}, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("loadProfiles: %v", err)
	}
	if testing.Short() {
		return
	}
	_, stderr, code := runHubCmd(t, []string{"RUNHUB_ADDR=127.0.0.1:0", "RUNHUB_DATA=" + t.TempDir(), "RUNHUB_PROFILES=" + file}, "serve")
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("hub serve: exit %d, want 1 with %q:\n%s", code, want, stderr)
	}
}
