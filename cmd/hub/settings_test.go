package main

import (
	"strings"
	"testing"
	"time"
)

// A misspelt RUNHUB_ variable is named with the nearest known one; a
// variable another command reads (healthcheck, import, token) is no
// mistake, and neither is a variable outside RUNHUB_.
func TestUnknownEnv_NearestName(t *testing.T) {
	got := unknownEnv([]string{
		"RUNHUB_ADRR=127.0.0.1:9", "RUNHUB_STATUS_INTERVALL=2s", "RUNHUB_MAXRUNS=5", "RUNHUB_JWT_SECRT=s3cret",
		"RUNHUB_ADDR=127.0.0.1:8080", "RUNHUB_HEALTHCHECK_URL=http://x/healthz", "RUNHUB_IMPORT_OWNER=alice",
		"RUNHUB_WEBHOOK_SECRET=whsec_x", "HOME=/root", "RUNHUBX=1",
	})
	want := map[string]string{
		"RUNHUB_ADRR": "RUNHUB_ADDR", "RUNHUB_STATUS_INTERVALL": "RUNHUB_STATUS_INTERVAL",
		"RUNHUB_MAXRUNS": "RUNHUB_MAX_RUNS", "RUNHUB_JWT_SECRT": "RUNHUB_JWT_SECRET",
	}
	if len(got) != len(want) {
		t.Fatalf("unknown variables %v, want those of %v", got, want)
	}
	for _, u := range got {
		if want[u.name] != u.nearest {
			t.Errorf("%s: nearest %q, want %q", u.name, u.nearest, want[u.name])
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"ADRR", "ADDR", 1}, {"kitten", "sitting", 3}, {"INTERVALL", "INTERVAL", 1}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// `hub serve` logs each misspelt variable at start-up with the nearest
// known name, and never its value (it may be a secret).
func TestProcess_UnknownEnvLogged(t *testing.T) {
	p := startHub(t, t.TempDir(), "RUNHUB_ADRR=127.0.0.1:9999", "RUNHUB_STATUS_INTERVALL=2s", "RUNHUB_JWT_SECRT=hunter2hunter2")
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out.String())
	}
	out := p.out.String()
	for _, w := range []string{
		"RUNHUB_ADRR is no runhub setting; did you mean RUNHUB_ADDR?",
		"RUNHUB_STATUS_INTERVALL is no runhub setting; did you mean RUNHUB_STATUS_INTERVAL?",
		"RUNHUB_JWT_SECRT is no runhub setting; did you mean RUNHUB_JWT_SECRET?",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "RUNHUB_TEST_AS_HUB") {
		t.Errorf("log names a value or a test variable:\n%s", out)
	}
}

// A flag value that does not parse is one line on stderr naming the flag
// and the form it wants, with the hint of -h, exit 2 (not the usage).
func TestProcess_BadFlagValueOneLine(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "-max-runs", "lots"}, `hub serve: -max-runs "lots": want an integer; see 'hub serve -h'`},
		{[]string{"-status-interval=soon"}, `hub serve: -status-interval "soon": want a duration such as 500ms, 30s, 5m or 1h30m; see 'hub serve -h'`},
		{[]string{"serve", "-pprof=maybe"}, `hub serve: -pprof "maybe": want true or false (or 1, 0); see 'hub serve -h'`},
		{[]string{"serve", "-ws-rate", "fast"}, `hub serve: -ws-rate "fast": want a number; see 'hub serve -h'`},
		{[]string{"runner", "-lease-ttl", "10"}, `hub runner: -lease-ttl "10": want a duration such as 500ms, 30s, 5m or 1h30m; see 'hub runner -h'`},
		{[]string{"token", "-ttl", "forever"}, `hub token: -ttl "forever": want a duration`},
		{[]string{"serve", "-max-run", "5"}, `hub serve: flag provided but not defined: -max-run (did you mean -max-runs?); see 'hub serve -h'`},
		{[]string{"import", "hermes-webui", "/nowhere", "-dryrun"}, `hub import: flag provided but not defined: -dryrun (did you mean -dry-run?); see 'hub import -h'`},
	}
	for _, c := range cases {
		stdout, stderr, code := runHubCmd(t, nil, c.args...)
		if code != 2 {
			t.Errorf("hub %v: exit %d, want 2; stderr:\n%s", c.args, code, stderr)
		}
		if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 {
			t.Errorf("hub %v: %d lines on stderr, want 1:\n%s", c.args, len(lines), stderr)
		}
		if !strings.HasPrefix(stderr, c.want) {
			t.Errorf("hub %v: stderr %q, want it to begin %q", c.args, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("hub %v: stdout %q, want nothing", c.args, stdout)
		}
	}
}

// A value out of range stops start-up, naming the variable (or the flag)
// it came from: a negative or zero limit would otherwise start a hub that
// refuses every run as if under load, or panics later.
func TestParseConfig_OutOfRange(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"RUNHUB_MAX_RUNS": "-5"}, nil, "RUNHUB_MAX_RUNS -5: want at least 1"},
		{map[string]string{"RUNHUB_MAX_RUNS": "0"}, nil, "RUNHUB_MAX_RUNS 0: want at least 1"},
		{nil, []string{"-max-runs", "-5"}, "-max-runs -5: want at least 1"},
		{map[string]string{"RUNHUB_STATUS_INTERVAL": "0s"}, nil, "RUNHUB_STATUS_INTERVAL 0s: want a positive duration"},
		{map[string]string{"RUNHUB_STATUS_INTERVAL": "-1s"}, nil, "RUNHUB_STATUS_INTERVAL -1s"},
		{map[string]string{"RUNHUB_CLARIFY_TIMEOUT": "0"}, nil, "RUNHUB_CLARIFY_TIMEOUT 0s: want a positive duration"},
		{map[string]string{"RUNHUB_SHUTDOWN_GRACE": "-1s"}, nil, "RUNHUB_SHUTDOWN_GRACE -1s"},
		{map[string]string{"RUNHUB_JOURNAL_SYNC_EVERY": "-1ms"}, nil, "RUNHUB_JOURNAL_SYNC_EVERY -1ms"},
		{map[string]string{"RUNHUB_RETENTION": "-1h"}, nil, "RUNHUB_RETENTION -1h0m0s"},
		{map[string]string{"RUNHUB_JWT_LEEWAY": "-5s"}, nil, "RUNHUB_JWT_LEEWAY -5s"},
		{map[string]string{"RUNHUB_WS_RATE": "0"}, nil, "RUNHUB_WS_RATE 0: want a positive rate"},
		{map[string]string{"RUNHUB_WS_BURST": "0"}, nil, "RUNHUB_WS_BURST 0: want at least 1"},
		{map[string]string{"RUNHUB_HELLO_TIMEOUT": "0"}, nil, "RUNHUB_HELLO_TIMEOUT 0s: want a positive duration, or a negative one"},
		{map[string]string{"RUNHUB_MAX_RUNS": "many"}, nil, `RUNHUB_MAX_RUNS "many": want an integer`},
		{map[string]string{"RUNHUB_LEASE_TTL": "10"}, nil, `RUNHUB_LEASE_TTL "10": want a duration such as`},
	}
	for _, c := range cases {
		getenv := func(k string) string { return c.env[k] }
		_, err := parseServeConfig(c.args, getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %v %v: error %v, want %q", c.env, c.args, err, c.want)
		}
	}
	// The runner has the same bounds.
	env := map[string]string{"RUNHUB_REDIS_URL": "redis://127.0.0.1:1", "RUNHUB_MAX_RUNS": "0"}
	if _, err := parseRunnerConfig(nil, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "RUNHUB_MAX_RUNS 0") {
		t.Errorf("runner RUNHUB_MAX_RUNS=0: error %v", err)
	}
	// The defaults, and the values that mean "none", are in range.
	ok := map[string]string{"RUNHUB_SHUTDOWN_GRACE": "0s", "RUNHUB_RETENTION": "0", "RUNHUB_HELLO_TIMEOUT": "-1s",
		"RUNHUB_WS_RATE": "-1", "RUNHUB_MAX_RUNS_PER_SUBJECT": "-1", "RUNHUB_JWT_LEEWAY": "0s"}
	cfg, err := parseServeConfig(nil, func(k string) string { return ok[k] })
	if err != nil {
		t.Fatalf("serve with values meaning none: %v", err)
	}
	if cfg.ShutdownGrace != 0 || cfg.HelloTimeout != -time.Second {
		t.Errorf("parsed %v, %v", cfg.ShutdownGrace, cfg.HelloTimeout)
	}
}

// RUNHUB_MAX_RUNS=-5 stops `hub serve` at start-up, exit 1, naming it.
func TestProcess_OutOfRangeStops(t *testing.T) {
	_, stderr, code := runHubCmd(t, []string{"RUNHUB_MAX_RUNS=-5", "RUNHUB_ADDR=127.0.0.1:0", "RUNHUB_DATA=" + t.TempDir()}, "serve")
	if code != 1 || !strings.Contains(stderr, "hub: RUNHUB_MAX_RUNS -5: want at least 1") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}
