package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/hub/auth"
)

func TestParseServeConfig_Security(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := parseServeConfig(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.JWTSecret != "" || cfg.InsecureListen || cfg.WSRate != 50 || cfg.WSBurst != 100 || cfg.JWTLeeway != 30*time.Second {
		t.Fatalf("defaults: %+v", cfg.Security)
	}
	if a, err := cfg.authenticator(); err != nil || a != nil {
		t.Fatalf("no key must run open: %v %v", a, err)
	}
	cfg, err = parseServeConfig([]string{"-allowed-origins", "a.example, https://*.b.example", "-insecure-listen", "-max-runs-per-subject", "3"},
		env(map[string]string{"RUNHUB_JWT_SECRET": strings.Repeat("k", 32), "RUNHUB_JWT_ISSUER": "iss", "RUNHUB_WS_RATE": "-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.origins(); len(got) != 2 || got[1] != "https://*.b.example" || !cfg.InsecureListen || cfg.WSRate != -1 || cfg.MaxRunsPerSub != 3 || cfg.JWTIssuer != "iss" {
		t.Fatalf("parsed %+v", cfg.Security)
	}
	if a, err := cfg.authenticator(); err != nil || a == nil {
		t.Fatalf("secret: %v %v", a, err)
	}
	for name, e := range map[string]map[string]string{
		"short secret":           {"RUNHUB_JWT_SECRET": "short"},
		"secret and key":         {"RUNHUB_JWT_SECRET": strings.Repeat("k", 32), "RUNHUB_JWT_PUBLIC_KEY": "/k.pem"},
		"missing key file":       {"RUNHUB_JWT_PUBLIC_KEY": "/nonexistent/key.pem"},
		"issuer without a key":   {"RUNHUB_JWT_ISSUER": "iss"},
		"rate zero":              {"RUNHUB_WS_RATE": "0"},
		"rate not a number":      {"RUNHUB_WS_RATE": "fast"},
		"insecure not a boolean": {"RUNHUB_INSECURE_LISTEN": "perhaps"},
	} {
		cfg, err := parseServeConfig(nil, env(e))
		if err == nil {
			_, err = cfg.authenticator()
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// runServe runs `hub serve` with env until it exits or grace passes; it
// returns the output and the exit error (nil while still running).
func runServe(t *testing.T, grace time.Duration, env ...string) (*syncBuffer, error) {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = append(os.Environ(), "RUNHUB_TEST_AS_HUB=1", "RUNHUB_DATA="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("serve exited cleanly; output:\n%s", out.String())
		}
		return out, err
	case <-time.After(grace):
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return out, nil
	}
}

// Without a JWT key the hub refuses a non-loopback address unless
// -insecure-listen says so; with a key it serves and wants tokens.
func TestProcess_OpenHubStaysOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	port := func() string {
		_, p, _ := net.SplitHostPort(freeAddr(t))
		return p
	}
	out, err := runServe(t, 10*time.Second, "RUNHUB_ADDR=0.0.0.0:"+port())
	if err == nil || !strings.Contains(out.String(), "insecure-listen") {
		t.Fatalf("open hub on 0.0.0.0: exit %v, output:\n%s", err, out.String())
	}
	waitHealthy := func(addr string) {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
				resp.Body.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no /healthz on %s", addr)
	}
	p := port()
	if out, err := runServe(t, 500*time.Millisecond, "RUNHUB_ADDR=0.0.0.0:"+p, "RUNHUB_INSECURE_LISTEN=1"); err != nil {
		t.Fatalf("insecure listen: %v\n%s", err, out.String())
	}
	waitHealthy("127.0.0.1:" + p)

	secret := strings.Repeat("s", 40)
	p = port()
	if out, err := runServe(t, 500*time.Millisecond, "RUNHUB_ADDR=0.0.0.0:"+p, "RUNHUB_JWT_SECRET="+secret); err != nil {
		t.Fatalf("with a key: %v\n%s", err, out.String())
	}
	addr := "127.0.0.1:" + p
	waitHealthy(addr)
	get := func(tok string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/sessions", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tok, err := auth.Sign([]byte(secret), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "ops",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	if err != nil {
		t.Fatal(err)
	}
	if code := get(""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code := get(tok); code != 200 {
		t.Fatalf("token: %d", code)
	}
}

// hub token mints a token the hub's verifier accepts, with the role.
func TestMintToken(t *testing.T) {
	secret := strings.Repeat("t", 40)
	env := func(k string) string {
		return map[string]string{"RUNHUB_JWT_SECRET": secret, "RUNHUB_JWT_AUDIENCE": "runhub"}[k]
	}
	cfg, err := parseTokenConfig([]string{"-sub", "ops", "-ttl", "1h", "-role", "admin"}, env)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := MintToken(&out, cfg); err != nil {
		t.Fatal(err)
	}
	v, err := auth.New(auth.Config{Secret: []byte(secret), Audience: "runhub"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Authenticate(strings.TrimSpace(out.String()))
	if err != nil || p.Subject != "ops" || !p.Admin || time.Until(p.Expires) < 59*time.Minute {
		t.Fatalf("minted token: %+v %v", p, err)
	}
	for _, args := range [][]string{nil, {"-sub", "x", "-role", "root"}, {"-sub", "x", "-ttl", "-1h"}} {
		if _, err := parseTokenConfig(args, env); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parseTokenConfig([]string{"-sub", "x"}, func(string) string { return "" }); err == nil {
		t.Error("minted without a secret")
	}
}
