package hub_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/protocol"
)

// rawSocket opens a socket without a hello.
func rawSocket(t testing.TB, th *testHub, hdr http.Header) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctxT(t, 10*time.Second), th.WSURL, &websocket.DialOptions{
		Subprotocols: []string{protocol.SubprotocolV1}, HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// readToClose reads server messages until the socket closes and returns
// their types (errors as "error:<code>") and the close code.
func readToClose(t testing.TB, ws *websocket.Conn, d time.Duration) ([]string, int) {
	t.Helper()
	ctx := ctxT(t, d)
	var got []string
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("socket still open after %v (got %v)", d, got)
			}
			return got, int(websocket.CloseStatus(err))
		}
		for _, line := range protocol.SplitBatch(data) {
			m, err := protocol.DecodeServer(line)
			if err != nil {
				t.Fatalf("undecodable %s", line)
			}
			switch v := m.(type) {
			case *protocol.ErrorMessage:
				got = append(got, "error:"+string(v.Code))
			case *protocol.Welcome:
				got = append(got, "welcome:"+v.Subject)
			default:
				var head struct{ Type string }
				json.Unmarshal(line, &head)
				got = append(got, head.Type)
			}
		}
	}
}

func sendRaw(t testing.TB, ws *websocket.Conn, msg string) {
	t.Helper()
	if err := ws.Write(ctxT(t, 5*time.Second), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// Every /v1 HTTP path needs a valid bearer token once an Authenticator is
// configured; the answer is 401 unauthorized with a JSON body and a
// WWW-Authenticate challenge.
func TestAuth_HTTPBearer(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	good := token(t, "alice", time.Hour, "")
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no header", nil, 401},
		{"not bearer", map[string]string{"Authorization": "Basic YWxpY2U6cHc="}, 401},
		{"garbage", bearerOf("nope"), 401},
		{"expired", bearerOf(token(t, "alice", -time.Minute, "")), 401},
		{"other secret", bearerOf(foreignToken(t)), 401},
		{"valid", bearerOf(good), 200},
	} {
		var body protocol.ErrorBody
		var out any = &body
		if tc.want == 200 {
			out = nil
		}
		code := do(t, "GET", th.URL+"/v1/sessions", "", tc.hdr, out)
		if code != tc.want {
			t.Fatalf("%s: %d, want %d", tc.name, code, tc.want)
		}
		if tc.want == 401 && (body.Error == nil || body.Error.Code != protocol.CodeUnauthorized) {
			t.Fatalf("%s: body %+v", tc.name, body.Error)
		}
	}
	// The challenge header, and unknown /v1 paths answer 401 first (no
	// route enumeration without a token).
	req, _ := http.NewRequest("POST", th.URL+"/v1/nowhere", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("unknown path without token: %d, challenge %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	var sess protocol.CreateSessionResult
	if code := do(t, "POST", th.URL+"/v1/sessions", `{}`, bearerOf(good), &sess); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var st protocol.SessionStatus
	if code := do(t, "GET", th.URL+"/v1/sessions/"+sess.SessionID, "", bearerOf(token(t, "alice", time.Hour, "")), &st); code != 200 || st.SessionID != sess.SessionID {
		t.Fatalf("get with a second token of alice: %d %+v", code, st)
	}
}

func foreignToken(t testing.TB) string {
	tok, err := auth.Sign([]byte("some-other-secret-0123456789abcdef"), auth.Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject: "alice", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A socket authenticates with hello.token: a missing or bad token gets
// error unauthorized and close 4401; a good one a welcome with its subject.
func TestAuth_SocketHello(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	for _, tc := range []struct{ name, hello string }{
		{"no token", `{"type":"hello","client":"t"}`},
		{"bad token", `{"type":"hello","client":"t","token":"x.y.z"}`},
		{"expired", `{"type":"hello","client":"t","token":"` + token(t, "alice", -time.Minute, "") + `"}`},
		{"other secret", `{"type":"hello","client":"t","token":"` + foreignToken(t) + `"}`},
	} {
		ws := rawSocket(t, th, nil)
		sendRaw(t, ws, tc.hello)
		// Whatever follows a refused hello is not handled.
		sendRaw(t, ws, `{"type":"watch","all":true}`)
		got, code := readToClose(t, ws, 5*time.Second)
		if code != protocol.CloseUnauthorized || len(got) != 1 || got[0] != "error:unauthorized" {
			t.Fatalf("%s: got %v, close %d; want [error:unauthorized], 4401", tc.name, got, code)
		}
	}
	tab := th.DialToken(t, token(t, "alice", time.Hour, ""))
	if tab.Welcome.Subject != "alice" || tab.Welcome.Limits.MessagesPerSecond == 0 {
		t.Fatalf("welcome %+v", tab.Welcome)
	}
}

// A non-browser client may authenticate the upgrade with an Authorization
// header; a bad header is refused before the upgrade with a JSON 401.
func TestAuth_SocketUpgradeHeader(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	ctx := ctxT(t, 10*time.Second)
	c, err := client.Dial(ctx, th.WSURL, client.Options{Header: http.Header{"Authorization": {"Bearer " + token(t, "bob", time.Hour, "")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Welcome.Subject != "bob" {
		t.Fatalf("welcome subject %q", c.Welcome.Subject)
	}
	_, resp, err := websocket.Dial(ctx, th.WSURL, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1},
		HTTPHeader: http.Header{"Authorization": {"Bearer garbage"}}})
	if err == nil || resp == nil || resp.StatusCode != 401 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("bad upgrade header: %v %+v", err, resp)
	}
	// A hello token on a header-authenticated socket must keep the subject.
	ws := rawSocket(t, th, http.Header{"Authorization": {"Bearer " + token(t, "bob", time.Hour, "")}})
	sendRaw(t, ws, `{"type":"hello","client":"t","token":"`+token(t, "mallory", time.Hour, "")+`"}`)
	sendRaw(t, ws, `{"type":"hello","client":"t","token":"`+token(t, "bob", time.Hour, "")+`"}`)
	got, code := readToClose(t, ws, 5*time.Second)
	// The first hello names a new subject; it is accepted as the socket's
	// credentials (the header only stands in for a missing token); the
	// second changes the subject and is refused.
	if code != protocol.CloseUnauthorized || len(got) != 2 || got[0] != "welcome:mallory" || got[1] != "error:unauthorized" {
		t.Fatalf("got %v close %d", got, code)
	}
}

// A socket whose token expires gets error unauthorized and close 4401.
func TestAuth_SocketExpiry(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	ws := rawSocket(t, th, nil)
	sendRaw(t, ws, `{"type":"hello","client":"t","token":"`+token(t, "alice", 2*time.Second, "")+`"}`)
	begin := time.Now()
	got, code := readToClose(t, ws, 10*time.Second)
	if code != protocol.CloseUnauthorized || len(got) != 2 || got[0] != "welcome:alice" || got[1] != "error:unauthorized" {
		t.Fatalf("got %v close %d", got, code)
	}
	if d := time.Since(begin); d > 4*time.Second {
		t.Fatalf("closed after %v, the token lived at most 2 s", d)
	}
}

// A fresh hello before expiry renews the socket's credentials: it stays
// open past the first token's expiry and answers pings.
func TestAuth_SocketRenewal(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{}))
	tab := th.DialToken(t, token(t, "alice", 2*time.Second, ""))
	ctx := ctxT(t, 15*time.Second)
	if err := tab.Send(ctx, protocol.Hello{Type: protocol.MsgHello, Client: "t", Token: token(t, "alice", time.Hour, "")}); err != nil {
		t.Fatal(err)
	}
	m, err := tab.Next(ctx)
	if w, ok := m.(*protocol.Welcome); err != nil || !ok || w.Subject != "alice" || w.ConnID != tab.Welcome.ConnID {
		t.Fatalf("renewal: %+v %v", m, err)
	}
	time.Sleep(3 * time.Second)
	if err := tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "after"}); err != nil {
		t.Fatal(err)
	}
	m, err = tab.Next(ctx)
	if p, ok := m.(*protocol.Pong); err != nil || !ok || p.ID != "after" {
		t.Fatalf("after the first token's expiry: %+v %v", m, err)
	}

	// A renewal naming another subject closes the socket.
	tab.Send(ctx, protocol.Hello{Type: protocol.MsgHello, Client: "t", Token: token(t, "bob", time.Hour, "")})
	m, err = tab.Next(ctx)
	if e, ok := m.(*protocol.ErrorMessage); err != nil || !ok || e.Code != protocol.CodeUnauthorized {
		t.Fatalf("subject change: %+v %v", m, err)
	}
	<-tab.Done()
	if got := client.CloseStatus(tab.Err()); got != protocol.CloseUnauthorized {
		t.Fatalf("close %d, want 4401", got)
	}
}

// Without an Authenticator the hub is open: every caller is "local" and
// tokens are ignored.
func TestAuth_OpenMode(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	tab := th.DialToken(t, "whatever")
	if tab.Welcome.Subject != hub.OpenSubject {
		t.Fatalf("subject %q", tab.Welcome.Subject)
	}
	var list protocol.SessionList
	if code := do(t, "GET", th.URL+"/v1/sessions", "", bearerOf("garbage"), &list); code != 200 {
		t.Fatalf("open HTTP with a garbage token: %d", code)
	}
}

// The upgrade and the HTTP API refuse a cross-site Origin (cross-site
// WebSocket hijacking, CSRF); same-origin, no Origin, and configured
// patterns pass.
func TestAuth_Origin(t *testing.T) {
	th := newTestHub(t, hub.Config{OriginPatterns: []string{"app.example.com", "https://*.trusted.example"}})
	ctx := ctxT(t, 10*time.Second)
	dial := func(origin string) int {
		hdr := http.Header{}
		if origin != "" {
			hdr.Set("Origin", origin)
		}
		ws, resp, err := websocket.Dial(ctx, th.WSURL, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}, HTTPHeader: hdr})
		if err != nil {
			if resp == nil {
				t.Fatalf("origin %q: %v", origin, err)
			}
			return resp.StatusCode
		}
		ws.CloseNow()
		return 101
	}
	self := th.URL // http://127.0.0.1:port: same origin
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", 101},
		{self, 101},
		{"https://app.example.com", 101},
		{"https://x.trusted.example", 101},
		{"http://x.trusted.example", 403}, // the pattern names the scheme
		{"https://evil.example", 403},
		{"null", 403},
		{"https://app.example.com.evil.example", 403},
	} {
		if got := dial(tc.origin); got != tc.want {
			t.Errorf("upgrade with Origin %q: %d, want %d", tc.origin, got, tc.want)
		}
	}
	var body protocol.ErrorBody
	if code := do(t, "POST", th.URL+"/v1/sessions", `{}`, map[string]string{"Origin": "https://evil.example"}, &body); code != 403 || body.Error.Code != protocol.CodeForbidden {
		t.Fatalf("cross-site POST: %d %+v", code, body.Error)
	}
	if code := do(t, "POST", th.URL+"/v1/sessions", `{}`, map[string]string{"Origin": self}, nil); code != 201 {
		t.Fatalf("same-origin POST: %d", code)
	}
}
