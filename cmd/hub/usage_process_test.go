package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runHubCmd runs the hub binary (the test binary as hub) with args and env
// to its end and returns its stdout, stderr and exit status.
func runHubCmd(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RUNHUB_TEST_AS_HUB=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("hub %v did not exit; stdout:\n%s\nstderr:\n%s", args, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("hub %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// -h, -help and --help on hub and on every command, and hub help
// [command], print the usage on stdout — the commands, or the command's
// flags with their defaults and environment variables — and exit 0.
func TestProcess_Help(t *testing.T) {
	overview := []string{"Commands:", "serve", "runner", "token", "healthcheck", "version", "-addr string", "RUNHUB_ADDR, default 127.0.0.1:8080"}
	serve := []string{"Usage: hub [serve]", "-addr string", "RUNHUB_ADDR, default 127.0.0.1:8080", "-data string", "RUNHUB_DATA, default ./data",
		"-clarify-timeout duration", "RUNHUB_CLARIFY_TIMEOUT, default 120s", "RUNHUB_JWT_SECRET"}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, overview},
		{[]string{"--help"}, overview},
		{[]string{"-help"}, overview},
		{[]string{"help"}, overview},
		{[]string{"serve", "-h"}, serve},
		{[]string{"serve", "--help"}, serve},
		{[]string{"help", "serve"}, serve},
		{[]string{"runner", "-h"}, []string{"Usage: hub runner", "-redis-url string", "RUNHUB_REDIS_URL, default empty", "RUNHUB_MAX_RUNS, default 100"}},
		{[]string{"token", "-h"}, []string{"Usage: hub token", "-sub string", "-ttl duration", "default 24h", "RUNHUB_JWT_ISSUER", "RUNHUB_JWT_SECRET"}},
		{[]string{"help", "token"}, []string{"Usage: hub token", "-sub string"}},
		{[]string{"healthcheck", "-h"}, []string{"Usage: hub healthcheck", "-url string", "RUNHUB_HEALTHCHECK_URL", "-timeout duration", "RUNHUB_HEALTHCHECK_TIMEOUT, default 3s"}},
		{[]string{"healthcheck", "--help"}, []string{"Usage: hub healthcheck"}},
	}
	// A variable that does not parse does not hide the help, and no
	// variable's value (a secret) is printed.
	env := []string{"RUNHUB_LEASE_TTL=soon", "RUNHUB_JWT_SECRET=" + strings.Repeat("k", 40), "RUNHUB_REDIS_URL=redis://:hunter2@127.0.0.1:1"}
	for _, c := range cases {
		stdout, stderr, code := runHubCmd(t, env, c.args...)
		if code != 0 {
			t.Errorf("hub %v: exit %d; stderr:\n%s", c.args, code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("hub %v: stdout lacks %q:\n%s", c.args, w, stdout)
			}
		}
		if strings.Contains(stdout, "help requested") || strings.Contains(stdout, "hunter2") || strings.Contains(stdout, "kkkkkkkk") {
			t.Errorf("hub %v printed an error or a secret:\n%s", c.args, stdout)
		}
	}
}

// A flag hub does not know, a flag without its value and a stray argument
// print one line saying what is wrong, with the hint of the command's -h,
// on stderr and exit 2; an unknown command prints the commands.
func TestProcess_BadCommandLine(t *testing.T) {
	cases := []struct {
		args  []string
		want  []string
		lines int
	}{
		{[]string{"-bogus"}, []string{"hub serve: flag provided but not defined: -bogus; see 'hub serve -h'"}, 1},
		{[]string{"serve", "-addr"}, []string{"hub serve: flag needs an argument: -addr; see 'hub serve -h'"}, 1},
		{[]string{"serve", "stray"}, []string{"hub serve: unexpected arguments [stray]; see 'hub serve -h'"}, 1},
		{[]string{"runner", "-x"}, []string{"hub runner: flag provided but not defined: -x; see 'hub runner -h'"}, 1},
		{[]string{"token", "-ttl", "forever"}, []string{"hub token: -ttl \"forever\": want a duration", "see 'hub token -h'"}, 1},
		{[]string{"healthcheck", "-nope"}, []string{"hub healthcheck: flag provided but not defined: -nope; see 'hub healthcheck -h'"}, 1},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "Commands:"}, 0},
		{[]string{"help", "frobnicate"}, []string{"help frobnicate: no such command", "Commands:"}, 0},
	}
	for _, c := range cases {
		stdout, stderr, code := runHubCmd(t, nil, c.args...)
		if code != 2 {
			t.Errorf("hub %v: exit %d, want 2; stderr:\n%s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("hub %v: stderr lacks %q:\n%s", c.args, w, stderr)
			}
		}
		if n := strings.Count(stderr, "\n"); c.lines > 0 && n != c.lines {
			t.Errorf("hub %v: %d lines on stderr, want %d:\n%s", c.args, n, c.lines, stderr)
		}
		if stdout != "" {
			t.Errorf("hub %v: stdout %q, want nothing", c.args, stdout)
		}
	}
}
