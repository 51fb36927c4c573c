package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/webhook"
)

var (
	whKey    = []byte("cmd-hub-webhook-test-secret-32bytes")
	whSecret = "whsec_" + base64.StdEncoding.EncodeToString(whKey)
)

// whReceiver verifies every notification (webhook.Verify) and answers 204.
type whReceiver struct {
	t    *testing.T
	url  string
	mu   sync.Mutex
	reqs []webhook.Notification
	ids  []string
	bad  int
	srv  *http.Server
}

func startReceiverOn(t *testing.T, addr string) *whReceiver {
	t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // the port was free a moment ago; it may take a moment to be again
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	rc := &whReceiver{t: t, url: "http://" + ln.Addr().String() + "/"}
	rc.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err := webhook.Verify(whKey, r.Header, body, time.Now()); err != nil {
			rc.bad++
			w.WriteHeader(400)
			return
		}
		var n webhook.Notification
		json.Unmarshal(body, &n)
		rc.reqs = append(rc.reqs, n)
		rc.ids = append(rc.ids, r.Header.Get(webhook.HeaderID))
		w.WriteHeader(204)
	})}
	go rc.srv.Serve(ln)
	t.Cleanup(func() { rc.srv.Close() })
	return rc
}

func (rc *whReceiver) got() ([]webhook.Notification, []string, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]webhook.Notification(nil), rc.reqs...), append([]string(nil), rc.ids...), rc.bad
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SIGKILL the hub after a run's approval event is journaled and before its
// notification was POSTed (nothing listens at the URL yet): the hub
// started again delivers it, once, signed, and then the run's end
// (interrupted by the kill), once.
func TestProcess_WebhookSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	data := t.TempDir()
	rcAddr := freeAddr(t) // nothing listens there until after the kill
	env := []string{"RUNHUB_WEBHOOK_URL=http://" + rcAddr + "/hooks?token=q", "RUNHUB_WEBHOOK_SECRET=" + whSecret,
		"RUNHUB_WEBHOOK_RETRY_MIN=50ms", "RUNHUB_WEBHOOK_RETRY_MAX=200ms", "RUNHUB_PUBLIC_URL=https://hub.example.test"}
	p := startHub(t, data, env...)
	run := startHTTP(t, p, `{"approval":true,"tools":1,"tokens":3}`)
	sid := run.SessionID
	var approvalSeq uint64
	waitUntil(t, 20*time.Second, "the approval event in the journal", func() bool {
		for _, e := range allEvents(t, p.URL(), run.RunID) {
			if e.Type == protocol.EventApprovalReq {
				approvalSeq = e.Seq
				return true
			}
		}
		return false
	})
	p.kill()
	if strings.Contains(p.out.String(), whSecret) || strings.Contains(p.out.String(), strings.TrimPrefix(whSecret, "whsec_")) {
		t.Fatalf("the hub logged the webhook secret:\n%s", p.out.String())
	}

	rc := startReceiverOn(t, rcAddr)
	p = startHub(t, data, env...)
	waitUntil(t, 20*time.Second, "the approval and the end delivered", func() bool {
		ns, _, _ := rc.got()
		return len(ns) >= 2
	})
	time.Sleep(500 * time.Millisecond) // more than the retry schedule: nothing more may come
	ns, ids, bad := rc.got()
	if bad != 0 || len(ns) != 2 || ids[0] == ids[1] {
		t.Fatalf("deliveries %+v ids %v, %d unverified; want one approval and one end", ns, ids, bad)
	}
	byType := map[string]webhook.Notification{}
	for _, n := range ns {
		byType[n.Type] = n
	}
	a, f := byType[webhook.TypeNeedsApproval], byType[webhook.TypeFinished]
	if a.Data.RunID != run.RunID || a.Data.Seq != approvalSeq || a.Data.Approval == nil || a.Data.Title != "scale" ||
		a.Data.URL != "https://hub.example.test/#/s/"+sid {
		t.Fatalf("approval notification %+v", a)
	}
	if f.Data.Finished == nil || f.Data.Finished.Status != protocol.StatusInterrupted || f.Data.Finished.Code != protocol.ErrorInterrupted {
		t.Fatalf("end notification %+v", f.Data.Finished)
	}

	// The admin view shows them (open mode: every caller is admin).
	var view struct{ Deliveries []webhook.Delivery }
	if code := call(t, "GET", p.URL()+"/v1/webhooks/deliveries?limit=10", nil, &view); code != 200 || len(view.Deliveries) != 2 ||
		view.Deliveries[0].Status != webhook.Delivered {
		t.Fatalf("deliveries view: %d %+v", code, view)
	}
	if code := call(t, "GET", p.URL()+"/v1/webhooks/deliveries?limit=0", nil, nil); code != 400 {
		t.Fatalf("limit=0: %d, want 400", code)
	}
	if v := whMetric(t, p, `runhub_webhook_notifications_total{outcome="delivered"}`); v != 2 {
		t.Fatalf("delivered metric %v", v)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	out := p.out.String()
	for _, s := range []string{whSecret, strings.TrimPrefix(whSecret, "whsec_"), "token=q"} {
		if strings.Contains(out, s) {
			t.Fatalf("the hub logged %q:\n%s", s, out)
		}
	}
}

// A receiver that never answers leaves runs and sockets as they were: a
// tab runs a run, focuses it and gets every event, an approval is asked
// and answered over HTTP, while every delivery attempt hangs.
func TestProcess_WebhookSlowReceiverHoldsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	hang := make(chan struct{})
	var hung sync.WaitGroup
	var attempts sync.Map
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Store(r.Header.Get(webhook.HeaderID), true)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hung.Go(func() { srv.Serve(ln) })
	defer func() { close(hang); srv.Close(); hung.Wait() }()

	p := startHub(t, t.TempDir(), "RUNHUB_WEBHOOK_URL=http://"+ln.Addr().String()+"/", "RUNHUB_WEBHOOK_SECRET="+whSecret,
		"RUNHUB_WEBHOOK_TIMEOUT=10s", "RUNHUB_WEBHOOK_EVENTS=run.needs_approval,run.needs_input,run.finished,session.goal")
	for range 3 { // every event of a run reaches its tab, in order, once
		ta := dialTab(t, p)
		res := ta.start(`{"tokens":50,"token_ms":1,"tools":1}`)
		ta.c.Focus(ta.ctx(), res.SessionID, "")
		ta.until(30*time.Second, "the run's terminal event", func() bool { return ta.terminal(res.RunID) })
		checkDone(t, "a run", ta.run(res.RunID), 50)
		sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), allEvents(t, p.URL(), res.RunID))
		ta.c.Close()
	}
	run := startHTTP(t, p, `{"approval":true,"tools":1,"tokens":3}`)
	var aid string
	waitUntil(t, 20*time.Second, "the approval", func() bool {
		for _, e := range allEvents(t, p.URL(), run.RunID) {
			if e.Type == protocol.EventApprovalReq {
				pl, _ := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&e)
				aid = pl.ApprovalID
				return true
			}
		}
		return false
	})
	if code := call(t, "POST", p.URL()+"/v1/runs/"+run.RunID+"/approvals/"+aid, map[string]string{"choice": "once"}, nil); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	waitUntil(t, 20*time.Second, "the run's end", func() bool {
		evs := allEvents(t, p.URL(), run.RunID)
		return len(evs) > 0 && evs[len(evs)-1].Type == protocol.EventDone
	})
	n := 0
	attempts.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Fatal("the hub made no delivery attempt: the receiver was not exercised")
	}
	if v := whMetric(t, p, `runhub_webhook_notifications_total{outcome="delivered"}`); v != 0 {
		t.Fatalf("%v delivered to a receiver that never answers", v)
	}
}

// Bad webhook settings fail start-up naming the variable, never showing
// the secret.
func TestProcess_WebhookSettingErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	data := "RUNHUB_DATA=" + t.TempDir()
	badSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("too-short"))
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"RUNHUB_WEBHOOK_URL=ftp://example.test/", "RUNHUB_WEBHOOK_SECRET=" + whSecret}, []string{"RUNHUB_WEBHOOK_URL", `scheme "ftp" refused`}},
		{[]string{"RUNHUB_WEBHOOK_URL=http://%zz", "RUNHUB_WEBHOOK_SECRET=" + whSecret}, []string{"RUNHUB_WEBHOOK_URL", "not a URL"}},
		{[]string{"RUNHUB_WEBHOOK_URL=https://example.test/", "RUNHUB_WEBHOOK_SECRET=" + badSecret}, []string{"RUNHUB_WEBHOOK_SECRET", "decodes to 9 bytes"}},
		{[]string{"RUNHUB_WEBHOOK_URL=https://example.test/", "RUNHUB_WEBHOOK_SECRET=hunter2-hunter2"}, []string{"RUNHUB_WEBHOOK_SECRET", "want whsec_"}},
		{[]string{"RUNHUB_WEBHOOK_URL=https://example.test/"}, []string{"RUNHUB_WEBHOOK_SECRET is empty"}},
		{[]string{"RUNHUB_WEBHOOKS=/nonexistent/webhooks.json"}, []string{"RUNHUB_WEBHOOKS", "no such file"}},
		{[]string{"RUNHUB_WEBHOOK_URL=https://example.test/", "RUNHUB_WEBHOOK_SECRET=" + whSecret, "RUNHUB_WEBHOOK_RETRY_MIN=0s"}, []string{"RUNHUB_WEBHOOK_RETRY_MIN", "positive"}},
		{[]string{"RUNHUB_PUBLIC_URL=javascript:alert(1)"}, []string{"RUNHUB_PUBLIC_URL", "want an http or https URL"}},
	} {
		_, stderr, code := runHubCmd(t, append([]string{data, "RUNHUB_ADDR=127.0.0.1:0"}, c.env...), "serve")
		if code != 1 {
			t.Errorf("%v: exit %d, want 1; stderr:\n%s", c.env, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.env, w, stderr)
			}
		}
		for _, s := range []string{"hunter2", strings.TrimPrefix(whSecret, "whsec_"), strings.TrimPrefix(badSecret, "whsec_")} {
			if strings.Contains(stderr, s) {
				t.Errorf("%v: stderr shows a secret:\n%s", c.env, stderr)
			}
		}
	}
}

// With authentication on, GET /v1/webhooks/deliveries answers only a
// token with the admin role.
func TestProcess_WebhookDeliveriesNeedAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	secret := strings.Repeat("s", 32)
	p := startHub(t, t.TempDir(), "RUNHUB_JWT_SECRET="+secret, "RUNHUB_WEBHOOK_URL=http://127.0.0.1:9/", "RUNHUB_WEBHOOK_SECRET="+whSecret)
	get := func(role string) int {
		req, _ := http.NewRequest("GET", p.URL()+"/v1/webhooks/deliveries", nil)
		if role != "-" {
			tok, err := auth.Sign([]byte(secret), auth.Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{Subject: "u1",
				ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("-"); c != 401 {
		t.Errorf("no token: %d", c)
	}
	if c := get(""); c != 403 {
		t.Errorf("a user's token: %d", c)
	}
	if c := get(auth.RoleAdmin); c != 200 {
		t.Errorf("an admin token: %d", c)
	}
}

func whMetric(t *testing.T, p *hubProcess, series string) float64 {
	t.Helper()
	resp, err := http.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return seriesValue(string(b), series)
}

// Two hubs on one Redis journal, runs executed by a runner (which has no
// webhook settings: the append script records the outbox entries): every
// run's end is sent by one hub, once; when that hub is killed, the other
// takes over.
func TestProcess_WebhookTwoHubsOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	rc := startReceiverOn(t, "127.0.0.1:0")
	s := newScaled(t, redistest.Options{}, 2*time.Second)
	env := []string{"RUNHUB_WEBHOOK_URL=" + rc.url, "RUNHUB_WEBHOOK_SECRET=" + whSecret,
		"RUNHUB_WEBHOOK_RETRY_MIN=50ms", "RUNHUB_WEBHOOK_RETRY_MAX=200ms"}
	hubs := []*hubProcess{s.hub("hub-a", env...), s.hub("hub-b", env...)}
	s.runner("runner-1")
	const n = 6
	runs := map[string]bool{}
	for i := range n {
		run := startHTTP(t, hubs[i%2], `{"tokens":2,"token_ms":1}`)
		runs[run.RunID] = true
	}
	waitUntil(t, 30*time.Second, "every run's end delivered", func() bool {
		ns, _, _ := rc.got()
		return len(ns) >= n
	})
	time.Sleep(500 * time.Millisecond) // more than the retry schedule: nothing more may come
	ns, ids, bad := rc.got()
	if bad != 0 || len(ns) != n {
		t.Fatalf("%d deliveries (%d unverified) for %d runs", len(ns), bad, n)
	}
	seen := map[string]bool{}
	for i, nt := range ns {
		if nt.Type != webhook.TypeFinished || !runs[nt.Data.RunID] || nt.Data.Finished.Status != protocol.StatusCompleted || seen[ids[i]] {
			t.Fatalf("delivery %d: %+v (id %s)", i, nt, ids[i])
		}
		seen[ids[i]] = true
	}
	sent, sender := 0, -1
	for i, p := range hubs {
		var view struct{ Deliveries []webhook.Delivery }
		if code := call(t, "GET", p.URL()+"/v1/webhooks/deliveries?limit=100", nil, &view); code != 200 {
			t.Fatalf("deliveries view: %d", code)
		}
		sent += len(view.Deliveries)
		if len(view.Deliveries) > 0 {
			sender = i
		}
	}
	if sent != n {
		t.Fatalf("the hubs made %d attempts, want %d (one each)", sent, n)
	}

	// SIGKILL the sending hub: once its claim lapses the other sends the
	// next ends, each once.
	hubs[sender].kill()
	other := hubs[1-sender]
	for range n {
		run := startHTTP(t, other, `{"tokens":2,"token_ms":1}`)
		runs[run.RunID] = true
	}
	waitUntil(t, 30*time.Second, "the next ends delivered by the other hub", func() bool {
		ns, _, _ := rc.got()
		return len(ns) >= 2*n
	})
	time.Sleep(500 * time.Millisecond)
	ns, ids, bad = rc.got()
	if bad != 0 || len(ns) != 2*n {
		t.Fatalf("%d deliveries (%d unverified) for %d runs", len(ns), bad, 2*n)
	}
	for i, nt := range ns[n:] {
		if !runs[nt.Data.RunID] || seen[ids[n+i]] {
			t.Fatalf("delivery %d after the kill: %+v (id %s)", n+i, nt, ids[n+i])
		}
		seen[ids[n+i]] = true
	}
}
