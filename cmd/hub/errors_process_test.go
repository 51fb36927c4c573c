package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// A setting hub serve refuses at start-up exits 1 with an error that says
// which setting (the variable or the flag it came from) and what is
// accepted: a listen address that is no host:port, one already taken, an
// unknown log level.
func TestProcess_SettingErrorsNameTheSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := "RUNHUB_DATA=" + t.TempDir()
	cases := []struct {
		env  []string
		args []string
		want []string
	}{
		{[]string{"RUNHUB_ADDR=localhost"}, nil, []string{`RUNHUB_ADDR "localhost"`, "missing port", "want host:port"}},
		{[]string{"RUNHUB_ADDR=127.0.0.1:99999"}, nil, []string{`RUNHUB_ADDR "127.0.0.1:99999"`, "0..65535"}},
		{[]string{"RUNHUB_ADDR=127.0.0.1:8080"}, []string{"-addr", "8080"}, []string{`-addr "8080"`, "missing port"}},
		{[]string{"RUNHUB_ADDR=" + taken.Addr().String()}, nil, []string{"RUNHUB_ADDR " + taken.Addr().String(), "address already in use"}},
		{[]string{"RUNHUB_ADDR=127.0.0.1:0", "RUNHUB_METRICS_ADDR=nowhere"}, nil, []string{`RUNHUB_METRICS_ADDR "nowhere"`, "missing port"}},
		{[]string{"RUNHUB_ADDR=127.0.0.1:0", "RUNHUB_LOG_LEVEL=verbose"}, nil, []string{`RUNHUB_LOG_LEVEL "verbose"`, "want debug, info, warn or error"}},
		{[]string{"RUNHUB_ADDR=127.0.0.1:0"}, []string{"-log-level", "loud"}, []string{`-log-level "loud"`, "want debug, info, warn or error"}},
		{[]string{"RUNHUB_ADDR=127.0.0.1:0", "RUNHUB_LOG_FORMAT=xml"}, nil, []string{`RUNHUB_LOG_FORMAT "xml"`, "want text or json"}},
	}
	for _, c := range cases {
		_, stderr, code := runHubCmd(t, append([]string{data}, c.env...), append([]string{"serve"}, c.args...)...)
		if code != 1 {
			t.Errorf("%v %v: exit %d, want 1; stderr:\n%s", c.env, c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v %v: stderr lacks %q:\n%s", c.env, c.args, w, stderr)
			}
		}
	}
	// A runner names its variables the same way.
	_, stderr, code := runHubCmd(t, []string{"RUNHUB_REDIS_URL=redis://127.0.0.1:1", "RUNHUB_LOG_LEVEL=trace"}, "runner")
	if code != 1 || !strings.Contains(stderr, `RUNHUB_LOG_LEVEL "trace"`) {
		t.Errorf("runner: exit %d:\n%s", code, stderr)
	}
	// The accepted levels start (any case; warning is warn).
	for _, level := range []string{"debug", "INFO", "Warn", "warning", "error"} {
		p := startHub(t, t.TempDir(), "RUNHUB_LOG_LEVEL="+level)
		if err := p.stop(); err != nil {
			t.Fatalf("level %s: %v\n%s", level, err, p.out.String())
		}
	}
}

// A second hub on a data directory another hub holds says the directory is
// in use by another hub process (not bbolt's "timeout") and exits 1.
func TestProcess_DataDirInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	data := t.TempDir()
	first := startHub(t, data)
	_, stderr, code := runHubCmd(t, []string{"RUNHUB_ADDR=127.0.0.1:0", "RUNHUB_DATA=" + data}, "serve")
	if code != 1 || !strings.Contains(stderr, "data directory "+data+" (RUNHUB_DATA) is in use by another hub process") {
		t.Fatalf("second hub: exit %d:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "hub: timeout") {
		t.Fatalf("the error is bbolt's bare timeout:\n%s", stderr)
	}
	_, stderr, _ = runHubCmd(t, []string{"RUNHUB_ADDR=127.0.0.1:0"}, "serve", "-data", data)
	if !strings.Contains(stderr, "data directory "+data+" (-data) is in use") {
		t.Fatalf("second hub with -data:\n%s", stderr)
	}
	// The first hub is unharmed.
	if code := call(t, "POST", first.URL()+"/v1/sessions", map[string]string{}, nil); code != 201 {
		t.Fatalf("first hub: create session %d", code)
	}
}

// A hub listening on 0.0.0.0 reports the address as given, not as the [::]
// of Go's dual-stack listener.
func TestProcess_ListenAddressReportedAsGiven(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a hub process")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p := startHubOn(t, "0.0.0.0:"+port, addr, t.TempDir(), "RUNHUB_INSECURE_LISTEN=1")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.out.String(), "runhub serving") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := p.out.String()
	if !strings.Contains(out, "url=http://0.0.0.0:"+port+"/") || strings.Contains(out, "[::]") {
		t.Fatalf("start log does not report 0.0.0.0:%s as given:\n%s", port, out)
	}
}
