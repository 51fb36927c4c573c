package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// GET /debug/pprof/ is off by default and served with RUNHUB_PPROF=1.
func TestProcess_PProfFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	off := startHub(t, t.TempDir())
	if code, body := get(off.URL() + "/debug/pprof/heap?debug=1"); code == 200 && strings.Contains(body, "heap profile") {
		t.Fatalf("pprof served without RUNHUB_PPROF: %d", code)
	}
	on := startHub(t, t.TempDir(), "RUNHUB_PPROF=1")
	if code, body := get(on.URL() + "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("index: %d %.200s", code, body)
	}
	if code, body := get(on.URL() + "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Fatalf("heap: %d %.200s", code, body)
	}
	if code, _ := get(on.URL() + "/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Fatalf("goroutine: %d", code)
	}
}

func TestParseServeConfig_PProf(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := parseServeConfig(nil, env(nil))
	if err != nil || cfg.PProf {
		t.Fatalf("default: %v %v", cfg.PProf, err)
	}
	if cfg, err = parseServeConfig(nil, env(map[string]string{"RUNHUB_PPROF": "1"})); err != nil || !cfg.PProf {
		t.Fatalf("env: %v %v", cfg.PProf, err)
	}
	if cfg, err = parseServeConfig([]string{"-pprof"}, env(nil)); err != nil || !cfg.PProf {
		t.Fatalf("flag: %v %v", cfg.PProf, err)
	}
	if _, err = parseServeConfig(nil, env(map[string]string{"RUNHUB_PPROF": "maybe"})); err == nil {
		t.Fatal("RUNHUB_PPROF=maybe accepted")
	}
}
