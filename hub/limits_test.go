package hub_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// pings is one frame of n pings with ids prefix0…prefix(n-1).
func pings(prefix string, n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"type":"ping","id":"%s%d"}`+"\n", prefix, i)
	}
	return []byte(b.String())
}

// drain reads until a pong with id last arrives (or the socket closes) and
// counts pongs and rate_limited errors.
func drain(t testing.TB, c *client.Conn, last string, d time.Duration) (pongs, limited int, closed bool) {
	t.Helper()
	ctx := ctxT(t, d)
	for {
		m, err := c.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("no pong %s in %v (pongs %d, limited %d)", last, d, pongs, limited)
			}
			return pongs, limited, true
		}
		switch v := m.(type) {
		case *protocol.Pong:
			pongs++
			if v.ID == last {
				return pongs, limited, false
			}
		case *protocol.ErrorMessage:
			if v.Code != protocol.CodeRateLimited {
				t.Fatalf("unexpected error %+v", v)
			}
			limited++
		}
	}
}

// A socket over its message rate gets one rate_limited error per second
// while the extra messages are dropped, recovers when it slows down, and is
// closed with 1008 when it floods.
func TestLimits_MessageRate(t *testing.T) {
	th := newTestHub(t, hub.Config{MessagesPerSecond: 5, MessageBurst: 5})
	tab := th.Dial(t) // hello took one token: 4 left
	if tab.Welcome.Limits.MessagesPerSecond != 5 {
		t.Fatalf("welcome limits %+v", tab.Welcome.Limits)
	}
	ctx := ctxT(t, 20*time.Second)
	tab.SendRaw(ctx, pings("a", 7))
	time.Sleep(1100 * time.Millisecond) // the bucket refills; a new refusal window
	tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "ok"})
	pongs, limited, closed := drain(t, tab, "ok", 10*time.Second)
	if closed || limited != 1 || pongs < 5 || pongs > 6 {
		t.Fatalf("7 pings at 4 tokens then one: %d pongs, %d rate_limited, closed %v", pongs, limited, closed)
	}

	// A flood: more than a burst of refusals in a second closes the socket.
	tab.SendRaw(ctx, pings("f", 60))
	select {
	case <-tab.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a flooding socket stayed open")
	}
	if got := client.CloseStatus(tab.Err()); got != protocol.ClosePolicy {
		t.Fatalf("flood: close %d, want 1008 (%v)", got, tab.Err())
	}
	// Other sockets are unaffected.
	other := th.Dial(t)
	other.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "x"})
	if _, _, closed := drain(t, other, "x", 5*time.Second); closed {
		t.Fatal("another socket was closed")
	}
}

// A control dropped by the rate limit is answered, every time: error
// rate_limited naming its id, then control_result not-active, so its
// sender never waits for a result that cannot come. (It was dropped with
// only the once-per-second error, which names no message: a client over
// its rate waited on the control forever.) The control does not run.
func TestLimits_RateLimitedControlAnswered(t *testing.T) {
	// Four tokens, refilled one per 100 s: hello and three pings spend
	// them, and every message after them is over the rate (a flood after
	// four refusals in a second).
	th := newTestHub(t, hub.Config{MessagesPerSecond: 0.01, MessageBurst: 4})
	tab := th.Dial(t)
	ctx := ctxT(t, 20*time.Second)
	tab.SendRaw(ctx, pings("a", 3))
	if pongs, limited, closed := drain(t, tab, "a2", 5*time.Second); pongs != 3 || limited != 0 || closed {
		t.Fatalf("3 pings within the burst: %d pongs, %d rate_limited, closed %v", pongs, limited, closed)
	}
	for i := range 3 { // not only the first refusal of the second
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		id := fmt.Sprintf("c%d", i)
		_, err := tab.Control(wait, protocol.Control{ID: id, Op: protocol.OpStart, Message: "hello"})
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeRateLimited {
			cancel()
			t.Fatalf("control %s over the rate: %v, want error rate_limited", id, err)
		}
		m, err := tab.Next(wait) // wait is still live: the result may not be here yet
		cancel()
		res, ok := m.(*protocol.ControlResultMessage)
		if err != nil || !ok || res.ID != id || res.Accepted || res.Status != protocol.ResultNotActive || res.Message != pe.Message {
			t.Fatalf("after the error of %s: %T %+v %v, want its control_result not-active", id, m, m, err)
		}
	}
	if ss, err := th.Store.Sessions(ctx, hub.OpenSubject); err != nil || len(ss) != 0 {
		t.Fatalf("a dropped start ran: sessions %+v %v", ss, err)
	}
}

// Junk counts against the rate like any message: 10,000 malformed
// messages close the socket with 1008, and the hub serves the next one.
func TestLimits_JunkFlood(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	tab := th.Dial(t)
	ctx := ctxT(t, 20*time.Second)
	junk := []byte(strings.Repeat("{not json\n", 10000))
	tab.SendRaw(ctx, junk)
	select {
	case <-tab.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a junk flood stayed open")
	}
	if got := client.CloseStatus(tab.Err()); got != protocol.ClosePolicy {
		t.Fatalf("close %d, want 1008", got)
	}
	next := th.Dial(t)
	startRun(t, next, simStart("", 3, 0, ""))
}

// A subject's sockets past MaxSocketsPerSubject are refused at hello with
// limit_exceeded and close 1008; other subjects are not affected, and a
// closed socket frees its slot.
func TestLimits_SocketsPerSubject(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{MaxSocketsPerSubject: 2}))
	alice := token(t, "alice", time.Hour, "")
	first := th.DialToken(t, alice)
	th.DialToken(t, alice)
	ws := rawSocket(t, th, nil)
	sendRaw(t, ws, `{"type":"hello","client":"t","token":"`+alice+`"}`)
	got, code := readToClose(t, ws, 5*time.Second)
	if code != protocol.ClosePolicy || len(got) != 1 || got[0] != "error:limit_exceeded" {
		t.Fatalf("third socket of alice: %v close %d", got, code)
	}
	th.DialToken(t, token(t, "bob", time.Hour, ""))
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := client.Dial(ctxT(t, 5*time.Second), th.WSURL, client.Options{Token: alice})
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's slot was not freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Starts past MaxRunsPerSubject active runs get limit_exceeded (429 over
// HTTP), as does a queue control that would start a run on an idle
// session; a start on the busy session stays a conflict; other subjects
// are not affected; ending a run frees its slot.
func TestLimits_RunsPerSubject(t *testing.T) {
	th := newTestHub(t, withAuth(t, hub.Config{MaxRunsPerSubject: 1}))
	aliceTok := token(t, "alice", time.Hour, "")
	alice := th.DialToken(t, aliceTok)
	ctx := ctxT(t, 30*time.Second)
	long := startRun(t, alice, simStart("", 100000, 20, ""))

	if _, err := alice.Control(ctx, simStart("", 3, 0, "")); protocol.CodeOf(err) != protocol.CodeLimitExceeded {
		t.Fatalf("second start over the socket: %v", err)
	}
	if res, err := alice.Control(ctx, simStart(long.SessionID, 3, 0, "")); err != nil || res.Status != protocol.ResultConflict {
		t.Fatalf("start on the busy session: %+v %v", res, err)
	}
	hdr := bearerOf(aliceTok)
	var sess protocol.CreateSessionResult
	do(t, "POST", th.URL+"/v1/sessions", `{}`, hdr, &sess)
	var body protocol.ErrorBody
	if code := do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", `{"message":"x"}`, hdr, &body); code != http.StatusTooManyRequests || body.Error.Code != protocol.CodeLimitExceeded {
		t.Fatalf("HTTP start: %d %+v", code, body.Error)
	}
	if code := do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/queue", `{"message":"x"}`, hdr, &body); code != http.StatusTooManyRequests {
		t.Fatalf("queue on an idle session: %d %+v", code, body.Error)
	}
	// Queueing behind the active run starts nothing now: allowed.
	if code := do(t, "POST", th.URL+"/v1/sessions/"+long.SessionID+"/queue", `{"message":"later"}`, hdr, nil); code != 200 {
		t.Fatalf("queue behind the active run: %d", code)
	}
	bob := th.DialToken(t, token(t, "bob", time.Hour, ""))
	startRun(t, bob, simStart("", 3, 0, ""))

	// Cancel: the queued message would start next; clear it by cancelling
	// again once it runs, then a start goes through.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st protocol.SessionStatus
		do(t, "GET", th.URL+"/v1/sessions/"+long.SessionID, "", hdr, &st)
		if st.Terminal && st.QueueDepth == 0 {
			break
		}
		if !st.Terminal && st.Status != protocol.StatusCancelling {
			alice.Control(ctx, protocol.Control{Op: protocol.OpCancel, SessionID: long.SessionID})
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's session never went idle: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The queued message may have been taken (its run registered, not yet
	// started) just as the status showed the cancelled run idle: then its
	// run holds the slot until it is cancelled too. Once alice has no
	// active run, a start goes through.
	for {
		res, err := alice.Control(ctx, simStart(sess.SessionID, 3, 0, ""))
		if err == nil {
			if !res.Accepted {
				t.Fatalf("start once alice's runs ended: %+v", res)
			}
			break
		}
		if protocol.CodeOf(err) != protocol.CodeLimitExceeded || time.Now().After(deadline) {
			t.Fatalf("start once alice's runs ended: %v", err)
		}
		alice.Control(ctx, protocol.Control{Op: protocol.OpCancel, SessionID: long.SessionID})
		time.Sleep(20 * time.Millisecond)
	}
}

// The other bounds answer with their own codes and keep the socket open:
// too_large for an oversized message or field, limit_exceeded for watching
// past MaxWatch.
func TestLimits_Bounds(t *testing.T) {
	th := newTestHub(t, hub.Config{MaxWatch: 2})
	tab := th.Dial(t)
	ctx := ctxT(t, 20*time.Second)
	var sids []string
	for range 3 {
		var sess protocol.CreateSessionResult
		do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
		sids = append(sids, sess.SessionID)
	}
	attachments := strings.Repeat(`{"name":"a"},`, protocol.MaxAttachments) + `{"name":"a"}`
	for _, tc := range []struct {
		name string
		msg  string
		want protocol.Code
	}{
		{"message over 256 KiB", `{"type":"ping","id":"p","pad":"` + strings.Repeat("x", protocol.MaxClientMessageBytes) + `"}`, protocol.CodeTooLarge},
		{"start message over 64 KiB", `{"type":"control","id":"c1","op":"start","message":"` + strings.Repeat("x", protocol.MaxTextBytes+1) + `"}`, protocol.CodeTooLarge},
		{"17 attachments", `{"type":"control","id":"c2","op":"start","message":"m","attachments":[` + attachments + `]}`, protocol.CodeTooLarge},
		{"attachment over its size", `{"type":"control","id":"c3","op":"start","message":"m","attachments":[{"name":"a","size":1000000000}]}`, protocol.CodeTooLarge},
		{"queue message over 64 KiB", `{"type":"control","id":"c4","op":"queue","session_id":"s_1","message":"` + strings.Repeat("x", protocol.MaxTextBytes+1) + `"}`, protocol.CodeTooLarge},
		{"watch past MaxWatch", `{"type":"watch","sessions":["` + strings.Join(sids, `","`) + `"]}`, protocol.CodeLimitExceeded},
	} {
		tab.SendRaw(ctx, []byte(tc.msg))
		col := newCollector()
		col.Until(t, tab, 5*time.Second, tc.name, func() bool { return len(col.Errors) > 0 })
		if col.Errors[0].Code != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, col.Errors[0], tc.want)
		}
	}
	tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "alive"})
	if _, _, closed := drain(t, tab, "alive", 5*time.Second); closed {
		t.Fatal("the socket closed")
	}
}
