package execdrv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// Profiles' environments stay apart (contract.md ST-7; the RFC's
// per-request HERMES_HOME mutation lock): two exec profiles of one hub,
// each with its own env (a HERMES_HOME among it) and its own key, run at
// the same time, and each command sees its own values only — not the
// other profile's, nor anything of the hub's environment it was not
// given — while the hub's process environment is never changed.
func TestProfiles_EnvironmentsStayApart(t *testing.T) {
	dir := t.TempDir()
	// Each command waits until both have started, so the two run at once.
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(`IFS= read -r start
env > "$OUT/$RUNHUB_PROFILE.env"
: > "$OUT/$RUNHUB_PROFILE.started"
i=0
while [ ! -e "$OUT/a.started" ] || [ ! -e "$OUT/b.started" ]; do
  i=$((i+1)); [ $i -gt 500 ] && break; sleep 0.01
done
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	hubEnv := map[string]string{"PATH": os.Getenv("PATH"), "HOME": "/home/hub",
		"KEY_A": "key-of-a-3b9f1c7e5d", "KEY_B": "key-of-b-8e2a6d4c1f", "HUB_SECRET": "hub-only-5a7c9e1b3d"}
	reg := profile.NewRegistry(Registration())
	log, logs := drivertest.Logger()
	profiles := map[string]driver.Profile{}
	for _, name := range []string{"a", "b"} {
		s := Settings{Command: "/bin/sh", Args: []string{script},
			Env:         map[string]string{"OUT": dir, "HERMES_HOME": "/srv/hermes/" + name, "STYLE": "style-" + name},
			Key:         profile.Key{APIKeyEnv: "KEY_" + strings.ToUpper(name)},
			CancelGrace: profile.Duration(2 * time.Second), KillGrace: profile.Duration(2 * time.Second)}
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		p, err := reg.Profile(name, append([]byte(`{"driver":"exec",`), raw[1:]...))
		if err != nil {
			t.Fatal(err)
		}
		d, err := reg.Build(p, profile.Env{Getenv: func(k string) string { return hubEnv[k] }, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		profiles[name] = driver.Profile{Driver: d, Kind: Kind, Model: p.Model}
	}
	before := os.Environ()
	h := drivertest.New(t, drivertest.Config{Log: log, Logs: logs, Profiles: profiles})
	ra := h.Start(protocol.StartRunRequest{Message: "go", Profile: "a"}).RunID
	rb := h.Start(protocol.StartRunRequest{Message: "go", Profile: "b"}).RunID
	drivertest.Terminal(t, h.Events(ra, 10*time.Second), protocol.EventDone)
	drivertest.Terminal(t, h.Events(rb, 10*time.Second), protocol.EventDone)

	for own, other := range map[string]string{"a": "b", "b": "a"} {
		env := read(t, filepath.Join(dir, own+".env"))
		for _, want := range []string{"HERMES_HOME=/srv/hermes/" + own, "STYLE=style-" + own,
			"KEY_" + strings.ToUpper(own) + "=" + hubEnv["KEY_"+strings.ToUpper(own)], "HOME=/home/hub"} {
			if !strings.Contains(env, want+"\n") {
				t.Errorf("profile %s's command lacks %s:\n%s", own, want, env)
			}
		}
		for _, leak := range []string{"/srv/hermes/" + other, "style-" + other, hubEnv["KEY_"+strings.ToUpper(other)],
			"KEY_" + strings.ToUpper(other) + "=", "HUB_SECRET", hubEnv["HUB_SECRET"]} {
			if strings.Contains(env, leak) {
				t.Errorf("profile %s's command sees %q:\n%s", own, leak, env)
			}
		}
	}
	if after := os.Environ(); !slices.Equal(before, after) {
		t.Error("running the profiles changed the hub's process environment")
	}
}
