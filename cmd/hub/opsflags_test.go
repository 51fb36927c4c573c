package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/protocol"
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

// With authentication on, /debug/pprof answers only a token with the admin
// role: 401 without a token or with a bad one, 403 for a user's token.
func TestProcess_PProfNeedsAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	secret := strings.Repeat("s", 32)
	p := startHub(t, t.TempDir(), "RUNHUB_JWT_SECRET="+secret, "RUNHUB_PPROF=1")
	token := func(role string) string {
		tok, err := auth.Sign([]byte(secret), auth.Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{Subject: "u1",
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", p.URL()+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/cmdline", "/debug/pprof"} {
		if code, body := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %.200s", path, code, body)
		}
		if code, body := get(path, "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("%s with a bad token: %d %.200s", path, code, body)
		}
		if code, body := get(path, token("")); code != http.StatusForbidden {
			t.Errorf("%s with a user's token: %d %.200s", path, code, body)
		}
	}
	if code, body := get("/debug/pprof/heap?debug=1", token(auth.RoleAdmin)); code != 200 || !strings.Contains(body, "heap profile") {
		t.Fatalf("heap with an admin token: %d %.200s", code, body)
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

// RUNHUB_HELLO_TIMEOUT bounds the wait for hello: a socket that says
// nothing is closed 4400 after it, not after the 10 s default.
func TestProcess_HelloTimeoutFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	p := startHub(t, t.TempDir(), "RUNHUB_HELLO_TIMEOUT=300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/v1/ws", &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	began := time.Now()
	for {
		if _, _, err = ws.Read(ctx); err != nil {
			break
		}
	}
	if code := websocket.CloseStatus(err); code != protocol.CloseProtocol {
		t.Fatalf("closed with %v (%d), want 4400", err, code)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("closed after %v: the 300ms timeout was not applied", took)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, err := parseServeConfig(nil, env(map[string]string{"RUNHUB_HELLO_TIMEOUT": "soon"})); err == nil {
		t.Fatal("RUNHUB_HELLO_TIMEOUT=soon accepted")
	}
}

// RUNHUB_JOURNAL_COMMIT_INTERVAL: 2ms by default, 0 allowed, a negative or
// an unreasonably long interval refused with the variable's name.
func TestParseServeConfig_CommitInterval(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := parseServeConfig(nil, env(nil))
	if err != nil || cfg.CommitInterval != 2*time.Millisecond {
		t.Fatalf("default: %v %v", cfg.CommitInterval, err)
	}
	if cfg, err = parseServeConfig([]string{"-journal-commit-interval", "0"}, env(nil)); err != nil || cfg.CommitInterval != 0 {
		t.Fatalf("flag 0: %v %v", cfg.CommitInterval, err)
	}
	for _, v := range []string{"-1ms", "2s"} {
		_, err := parseServeConfig(nil, env(map[string]string{"RUNHUB_JOURNAL_COMMIT_INTERVAL": v}))
		if err == nil || !strings.Contains(err.Error(), "RUNHUB_JOURNAL_COMMIT_INTERVAL") {
			t.Errorf("RUNHUB_JOURNAL_COMMIT_INTERVAL=%s: %v, want refused by name", v, err)
		}
	}
}

// RUNHUB_FRAME_TIMEOUT bounds a frame that stops half way: after hello, a
// frame header that claims 100 bytes and sends 10 is closed 1008 after
// the 300ms setting, not after the 10 s default.
func TestProcess_FrameTimeoutFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	p := startHub(t, t.TempDir(), "RUNHUB_FRAME_TIMEOUT=300ms")
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	req := "GET /v1/ws HTTP/1.1\r\nHost: " + p.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " + protocol.SubprotocolV1 + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	// A masked frame with a zero key: the payload is sent as it is.
	frame := func(b0 byte, p []byte, n int) []byte {
		return append(append([]byte{b0, 0x80 | byte(n)}, 0, 0, 0, 0), p...)
	}
	hello := []byte(`{"type":"hello","client":"t"}`)
	c.Write(frame(0x81, hello, len(hello)))
	c.Write(frame(0x81, []byte("0123456789"), 100)) // claims 100 bytes, sends 10
	began := time.Now()
	code := -1
	for code < 0 {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			io.ReadFull(br, b[:])
			n = int(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			io.ReadFull(br, b[:])
			n = int(binary.BigEndian.Uint64(b[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f == 0x8 && len(p) >= 2 {
			code = int(binary.BigEndian.Uint16(p))
		}
	}
	if code != 1008 {
		t.Fatalf("closed %d, want 1008", code)
	}
	if took := time.Since(began); took > 8*time.Second { // the default is 10 s
		t.Fatalf("closed after %v: the 300ms frame timeout was not applied", took)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, err := parseServeConfig(nil, env(map[string]string{"RUNHUB_FRAME_TIMEOUT": "0s"})); err == nil {
		t.Fatal("RUNHUB_FRAME_TIMEOUT=0s accepted")
	}
}
