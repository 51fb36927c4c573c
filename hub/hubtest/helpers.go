package hubtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Do sends a JSON request and decodes the JSON answer into out (if not
// nil); it returns the status. An answer that is not JSON fails the test.
func Do(t testing.TB, method, url string, body string, hdr map[string]string, out any) int {
	t.Helper()
	status, data, ct := send(t, method, url, body, hdr)
	if !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: content type %q, body %s", method, url, ct, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, url, data, err)
		}
	}
	return status
}

// RawDo sends a JSON request and returns the status and the body, trimmed.
func RawDo(t testing.TB, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	status, data, _ := send(t, method, url, body, hdr)
	return status, strings.TrimSpace(string(data))
}

func send(t testing.TB, method, url, body string, hdr map[string]string) (int, []byte, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header.Get("Content-Type")
}

// TestSecret is the HS256 key of WithAuth and Token.
var TestSecret = []byte("hub-test-secret-0123456789abcdef!!")

// WithAuth is cfg with a JWT verifier of TestSecret.
func WithAuth(t testing.TB, cfg hub.Config) hub.Config {
	t.Helper()
	v, err := auth.New(auth.Config{Secret: TestSecret, Leeway: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Authenticator = v
	return cfg
}

// Token mints an HS256 token of sub valid for ttl; role may be "".
func Token(t testing.TB, sub string, ttl time.Duration, role string) string {
	t.Helper()
	now := time.Now()
	tok, err := auth.Sign(TestSecret, auth.Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{
		Subject: sub, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl))}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// BearerOf is the Authorization header of tok.
func BearerOf(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// WaitFor polls cond until it holds, failing the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitTerminal waits until the journal has run runID's terminal event.
func WaitTerminal(t testing.TB, th *Hub, runID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m, err := th.Store.Run(context.Background(), runID)
		if err == nil && m.Terminal {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", runID)
}

// JournalEvents reads every journaled event of a run.
func JournalEvents(t testing.TB, th *Hub, runID string) []protocol.Envelope {
	t.Helper()
	var out []protocol.Envelope
	err := journal.ReadAll(context.Background(), th.Store, runID, 0, func(e protocol.Envelope) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatalf("read run %s: %v", runID, err)
	}
	return out
}

// WaitEvent polls the journal until the run has an event matching pred.
func WaitEvent(t testing.TB, th *Hub, runID, what string, pred func(*protocol.Envelope) bool) protocol.Envelope {
	t.Helper()
	var found protocol.Envelope
	WaitFor(t, 20*time.Second, what, func() bool {
		for _, e := range JournalEvents(t, th, runID) {
			if pred(&e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// IsType matches an event of type typ.
func IsType(typ protocol.EventType) func(*protocol.Envelope) bool {
	return func(e *protocol.Envelope) bool { return e.Type == typ }
}

// SessionMeta reads a session's record.
func SessionMeta(t testing.TB, th *Hub, sid string) journal.SessionMeta {
	t.Helper()
	m, err := th.Store.Session(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// RunMeta reads a run's record.
func RunMeta(t testing.TB, th *Hub, runID string) journal.RunMeta {
	t.Helper()
	m, err := th.Store.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// SimStart builds a start control for the simulator: tokens of tokenMS
// each, one tool, extra (",…" JSON members) added to its script.
func SimStart(sessionID string, tokens, tokenMS int, extra string) protocol.Control {
	md := `{"sim":{"tokens":` + strconv.Itoa(tokens) + `,"token_ms":` + strconv.Itoa(tokenMS) + `,"tools":1` + extra + `}}`
	return protocol.Control{Op: protocol.OpStart, SessionID: sessionID, Message: "hello sim", Metadata: []byte(md)}
}

// StartRun starts m over the socket and fails the test unless accepted.
func StartRun(t testing.TB, c *client.Conn, m protocol.Control) protocol.ControlResult {
	t.Helper()
	res, err := c.Control(Ctx(t, 10*time.Second), m)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if !res.Accepted {
		t.Fatalf("start not accepted: %+v", res)
	}
	return res
}

// Payload decodes e's payload as T, failing the test when it is not one.
func Payload[T any](t testing.TB, e protocol.Envelope) T {
	t.Helper()
	v, err := protocol.DecodePayload[T](&e)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// PostOK posts body to url and fails the test unless the answer is 2xx.
func PostOK(t testing.TB, url, body string) {
	t.Helper()
	if code, b := RawDo(t, "POST", url, body, nil); code/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, code, b)
	}
}

// ApprovalRun is a run of alice's that waits for an approval.
type ApprovalRun struct {
	SID, RID, Approval string
}

// StartAliceRun starts a run over alice's socket (authenticated as
// "alice", Token) and waits until it asks for an approval.
func StartAliceRun(t testing.TB, th *Hub, alice *client.Conn) ApprovalRun {
	t.Helper()
	res := StartRun(t, alice, SimStart("", 5, 5, `,"approval":true`))
	var st protocol.SessionStatus
	deadline := time.Now().Add(10 * time.Second)
	for st.PendingApproval == nil && time.Now().Before(deadline) {
		Do(t, "GET", th.URL+"/v1/sessions/"+res.SessionID, "", BearerOf(Token(t, "alice", time.Hour, "")), &st)
		time.Sleep(10 * time.Millisecond)
	}
	if st.PendingApproval == nil {
		t.Fatalf("alice's run never asked for approval: %+v", st)
	}
	return ApprovalRun{SID: res.SessionID, RID: res.RunID, Approval: st.PendingApproval.ApprovalID}
}

// Terminal waits for run runID's end and returns its journaled events,
// checked contiguous with exactly one terminal event.
func Terminal(t testing.TB, th *Hub, runID string) []protocol.Envelope {
	t.Helper()
	WaitTerminal(t, th, runID)
	evs := JournalEvents(t, th, runID)
	CheckRun(t, evs, runID)
	return evs
}
