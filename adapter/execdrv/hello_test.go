package execdrv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// A command's hello line states what it can do: before its first run the
// profile has its declared capabilities (approval among them, the
// default); after a run whose command said hello with cancel, queue and
// usage only, the profile's capabilities (Capabilities, GET /v1/profiles'
// Info) lack approval, and nothing of the hello is journaled.
func TestHello_CapabilitiesFollowTheCommand(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(`IFS= read -r start
echo '{"type":"hello","payload":{"capabilities":["cancel","queue","usage","no-such-cap"]}}'
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"ok"}}'
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"profiles": map[string]any{"cmd": map[string]any{
		"driver": "exec", "command": "/bin/sh", "args": []string{script}}}})
	cfg, err := profile.Parse(raw, profile.NewRegistry(Registration()))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := drivertest.Logger()
	built, err := cfg.Build(profile.Env{Getenv: func(k string) string { return os.Getenv(k) }, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	public := func() string {
		for _, i := range cfg.Public() {
			if i.Name == "cmd" {
				b, _ := json.Marshal(i)
				return string(b)
			}
		}
		t.Fatal("no profile cmd in Public")
		return ""
	}
	if caps, ok := cfg.Capabilities("cmd", ""); !ok || !slices.Contains(caps, protocol.CapApproval) {
		t.Fatalf("before any hello: capabilities %v %v, want the declared set with approval", caps, ok)
	}
	if !strings.Contains(public(), `"approval"`) {
		t.Fatalf("before any hello: %s lacks approval", public())
	}

	h := drivertest.New(t, drivertest.Config{Log: log, Logs: logs, Profiles: built})
	rid := h.Start(protocol.StartRunRequest{Message: "hi", Profile: "cmd"}).RunID
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	for _, e := range ev {
		if string(e.Type) == "hello" {
			t.Errorf("the hello line was journaled: %+v", e)
		}
	}

	want := []string{protocol.CapCancel, protocol.CapQueue, protocol.CapUsage}
	if caps, ok := cfg.Capabilities("cmd", ""); !ok || !slices.Equal(caps, want) {
		t.Errorf("after the hello: capabilities %v %v, want %v", caps, ok, want)
	}
	if got := public(); strings.Contains(got, `"approval"`) || !strings.Contains(got, `"capabilities":["cancel","queue","usage"]`) {
		t.Errorf("after the hello: GET /v1/profiles' entry %s, want capabilities [cancel queue usage]", got)
	}
}
