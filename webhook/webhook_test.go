package webhook_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/webhook"
)

// The Standard Webhooks test vector (the one its libraries test with),
// and one of runhub's, both as the official npm package computes them
// (node_test.go checks the package agrees on live traffic).
func TestSign_Vectors(t *testing.T) {
	for _, v := range []struct {
		secret, id string
		ts         int64
		body, want string
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, `{"test": 2432232314}`,
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{testSecret, "msg_runhub", 1767225600, `{"type":"run.finished"}`,
			"v1,QL8CazXHI3Zq9I+Qz+Kmvavwzl4d5xn57tEAqFpsCTY="},
	} {
		key, err := webhook.ParseSecret(v.secret)
		if err != nil {
			t.Fatal(err)
		}
		if got := webhook.Sign(key, v.id, v.ts, []byte(v.body)); got != v.want {
			t.Errorf("Sign(%s) = %s, want %s", v.id, got, v.want)
		}
		h := http.Header{}
		h.Set(webhook.HeaderID, v.id)
		h.Set(webhook.HeaderTimestamp, jsonInt(v.ts))
		h.Set(webhook.HeaderSignature, "v1,bm90IGl0 "+v.want) // several signatures: one matches
		if err := webhook.Verify(key, h, []byte(v.body), time.Unix(v.ts, 0)); err != nil {
			t.Errorf("Verify(%s): %v", v.id, err)
		}
		if err := webhook.Verify(key, h, []byte(v.body+" "), time.Unix(v.ts, 0)); err == nil {
			t.Errorf("Verify accepted a changed body")
		}
		if err := webhook.Verify(key, h, []byte(v.body), time.Unix(v.ts, 0).Add(6*time.Minute)); err == nil {
			t.Errorf("Verify accepted a timestamp 6 minutes old")
		}
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Bad configuration fails naming the variable, never showing the secret.
func TestConfig_Errors(t *testing.T) {
	good := testSecret
	base := webhook.Config{URLVar: "RUNHUB_WEBHOOK_URL", SecretVar: "RUNHUB_WEBHOOK_SECRET", EventsVar: "RUNHUB_WEBHOOK_EVENTS", FileVar: "RUNHUB_WEBHOOKS",
		Getenv: func(string) string { return "" }}
	for _, c := range []struct {
		url, secret, events string
		want                string
	}{
		{"ftp://example.test/hook", good, "", "RUNHUB_WEBHOOK_URL: scheme \"ftp\" refused"},
		{"file:///etc/passwd", good, "", "RUNHUB_WEBHOOK_URL: scheme \"file\" refused"},
		{"http://", good, "", "RUNHUB_WEBHOOK_URL: no host"},
		{"http://[::1", good, "", "RUNHUB_WEBHOOK_URL: not a URL"},
		{"https://example.test/hook", "", "", "RUNHUB_WEBHOOK_SECRET is empty"},
		{"https://example.test/hook", "s3cr3t-s3cr3t-s3cr3t-s3cr3t", "", "RUNHUB_WEBHOOK_SECRET: want whsec_"},
		{"https://example.test/hook", "whsec_!!s3cr3t!!", "", "RUNHUB_WEBHOOK_SECRET: the part after whsec_ is not valid base64"},
		{"https://example.test/hook", "whsec_c2hvcnQ=", "", "RUNHUB_WEBHOOK_SECRET: decodes to 5 bytes"},
		{"", good, "", "RUNHUB_WEBHOOK_SECRET is set but RUNHUB_WEBHOOK_URL is empty"},
		{"https://example.test/hook", good, "run.finished,run.exploded", "RUNHUB_WEBHOOK_EVENTS: event \"run.exploded\""},
	} {
		cfg := base
		cfg.URL, cfg.Secret, cfg.Events = c.url, c.secret, c.events
		_, err := cfg.Endpoints()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q %q: error %v, want %q", c.url, c.secret, c.events, err, c.want)
			continue
		}
		if c.secret != "" && strings.Contains(err.Error(), strings.TrimPrefix(c.secret, "whsec_")) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
	cfg := base
	cfg.URL, cfg.Secret = "https://example.test/hook?token=abc", good
	eps, err := cfg.Endpoints()
	if err != nil || len(eps) != 1 || !eps[0].Wants(webhook.TypeFinished) || eps[0].Wants(webhook.TypeGoal) {
		t.Fatalf("a good endpoint: %+v %v (want the default types, no session.goal)", eps, err)
	}
}

// The file form: several endpoints, secret_env, errors naming the entry.
func TestConfig_File(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := dir + "/webhooks.json"
		if err := osWriteFile(p, s); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"OPS_SECRET": testSecret}
	cfg := webhook.Config{FileVar: "RUNHUB_WEBHOOKS", Getenv: func(k string) string { return env[k] }}
	cfg.File = write(`{"webhooks":[{"name":"ops","url":"https://ops.test/h","secret_env":"OPS_SECRET","events":["run.finished","session.goal"]},
		{"url":"http://127.0.0.1:9/h","secret":"` + testSecret + `"}]}`)
	eps, err := cfg.Endpoints()
	if err != nil || len(eps) != 2 || eps[0].Name != "ops" || !eps[0].Wants(webhook.TypeGoal) || eps[1].Name != "webhook-2" {
		t.Fatalf("endpoints %+v, %v", eps, err)
	}
	for body, want := range map[string]string{
		`{"webhooks":[{"url":"gopher://x/","secret":"` + testSecret + `"}]}`: `webhooks[0] (webhook-1): url: scheme "gopher" refused`,
		`{"webhooks":[{"name":"a","url":"https://x/","secret_env":"NOPE"}]}`: "NOPE is empty",
		`{"webhooks":[{"name":"a","url":"https://x/"}]}`:                     "webhooks[0] (a): secret is empty",
		`{"hooks":[]}`: `unknown field "hooks"`,
		`{"webhooks":[{"name":"a","url":"https://x/","secret":"` + testSecret + `"},{"name":"a","url":"https://y/","secret":"` + testSecret + `"}]}`: `name "a" is used twice`,
	} {
		cfg.File = write(body)
		if _, err := cfg.Endpoints(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "RUNHUB_WEBHOOKS") && !strings.Contains(want, "twice") && !strings.Contains(want, "NOPE") {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// Receiver down (503) for the first 3 attempts, then up: each
// notification is acknowledged exactly once, every attempt with the same
// webhook-id, and the body names the event.
func TestSender_RetriesThenDeliversOnce(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	rc := newReceiver(t, func(n int, _ *http.Request) int {
		if n <= 3 {
			return 503
		}
		return 200
	})
	newRun(t, s, "s1", "r1")
	ap := approval(t, s, "s1", "r1")
	appendEv(t, s, "s1", "r1", protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "not notable"})
	appendEv(t, s, "s1", "r1", protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m2", Text: "The files "})
	appendEv(t, s, "s1", "r1", protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t", Name: "rm", Args: []byte(`{}`)})
	appendEv(t, s, "s1", "r1", protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m2", Text: "are gone. "})
	fin := done(t, s, "s1", "r1")
	_, _, _, reg := startSender(t, s, webhook.Options{PublicURL: "https://hub.example.test/"}, endpoint(rc.srv.URL))

	eventually(t, "two acknowledged notifications", func() bool { return len(rc.acked()) == 2 })
	time.Sleep(200 * time.Millisecond) // more than the retry schedule: nothing more may come
	byID := map[string][]request{}
	for _, r := range rc.requests() {
		byID[r.id] = append(byID[r.id], r)
	}
	if len(byID) != 2 {
		t.Fatalf("%d webhook-ids, want 2 (one per notification)", len(byID))
	}
	types := map[string]webhook.Notification{}
	for id, rs := range byID {
		if len(rs) != 4 {
			t.Errorf("%s: %d attempts, want 4 (3 refused, 1 acknowledged)", id, len(rs))
		}
		if n := rc.acked()[id]; n != 1 {
			t.Errorf("%s: acknowledged %d times", id, n)
		}
		var n webhook.Notification
		if err := json.Unmarshal(rs[0].body, &n); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs[1:] {
			if string(r.body) != string(rs[0].body) {
				t.Errorf("%s: the body changed between attempts", id)
			}
		}
		types[n.Type] = n
	}
	a, f := types[webhook.TypeNeedsApproval], types[webhook.TypeFinished]
	if a.Data.Approval == nil || a.Data.Approval.Summary != "delete the files?" || a.Data.EventID != ap.EventID ||
		a.Data.Title != "title of s1" || a.Data.Owner != "alice" || a.Data.URL != "https://hub.example.test/#/s/s1" {
		t.Errorf("approval notification %+v", a)
	}
	if f.Data.Finished == nil || f.Data.Finished.Status != protocol.StatusCompleted || f.Data.Seq != fin.Seq ||
		f.Data.Finished.Usage == nil || f.Data.Finished.Usage.OutputTokens != 5 || f.Data.Finished.Summary != "The files are gone." {
		t.Errorf("finished notification %+v", f)
	}
	if got := metric(t, reg, "runhub_webhook_notifications_total", webhook.Delivered); got != 2 {
		t.Errorf("delivered %v, want 2", got)
	}
	if got := metric(t, reg, "runhub_webhook_attempts_failed_total", "status"); got != 6 {
		t.Errorf("failed attempts %v, want 6", got)
	}
	eventually(t, "an empty outbox", func() bool {
		en, err := s.OutboxList(context.Background(), 10)
		return err == nil && len(en) == 0
	})
}

// An endpoint gets only the types it asked for; what no endpoint wants
// leaves the outbox.
func TestSender_TypesFilter(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	rc := newReceiver(t, nil)
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	appendEv(t, s, "s1", "r1", protocol.EventGoalUpdated, protocol.GoalUpdatedPayload{State: "active", Text: "ship it"})
	appendEv(t, s, "s1", "r1", protocol.EventError, protocol.ErrorPayload{Code: "provider_error", Message: "upstream 500", Terminal: true})
	startSender(t, s, webhook.Options{}, endpoint(rc.srv.URL, webhook.TypeFinished, webhook.TypeGoal))
	eventually(t, "an empty outbox", func() bool {
		en, err := s.OutboxList(context.Background(), 10)
		return err == nil && len(en) == 0
	})
	var got []string
	for _, r := range rc.requests() {
		var n webhook.Notification
		json.Unmarshal(r.body, &n)
		got = append(got, n.Type)
		if n.Type == webhook.TypeFinished && (n.Data.Finished.Code != "provider_error" || n.Data.Finished.Status != protocol.StatusFailed) {
			t.Errorf("finished %+v", n.Data.Finished)
		}
	}
	if strings.Join(sorted(got), ",") != "run.finished,session.goal" {
		t.Fatalf("types delivered %v, want run.finished and session.goal", got)
	}
}

// A stopped sender (the process gone) resumes from the outbox: the
// notification is delivered after the restart with the same webhook-id,
// and a delivered one is not sent again.
func TestSender_ResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := openBolt(t, dir)
	down := true
	rc := newReceiver(t, func(int, *http.Request) int {
		if down {
			return 500
		}
		return 204
	})
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	sn, _, _, _ := startSender(t, s, webhook.Options{}, endpoint(rc.srv.URL))
	eventually(t, "a refused attempt", func() bool { return len(rc.requests()) >= 1 })
	sn.Stop()
	s.Close()
	first := rc.requests()[0].id

	rc.mu.Lock()
	down = false
	rc.mu.Unlock()
	s = openBolt(t, dir)
	defer s.Close()
	sn, _, _, _ = startSender(t, s, webhook.Options{}, endpoint(rc.srv.URL))
	// Acknowledged as far as the sender knows (the receiver records its
	// answer before sending it; a Stop before the sender reads it would
	// rightly send again).
	eventually(t, "the delivery after the restart", func() bool {
		d := sn.Deliveries(1)
		return rc.acked()[first] == 1 && len(d) == 1 && d[0].Status == webhook.Delivered
	})
	sn.Stop()
	s.Close()

	// Once more: nothing left to send.
	s = openBolt(t, dir)
	defer s.Close()
	n := len(rc.requests())
	startSender(t, s, webhook.Options{}, endpoint(rc.srv.URL))
	time.Sleep(200 * time.Millisecond)
	if len(rc.requests()) != n {
		t.Fatalf("a delivered notification was sent again after a restart")
	}
	for _, r := range rc.requests() {
		if r.id != first {
			t.Fatalf("webhook-id %s, then %s", first, r.id)
		}
	}
}

// 410 Gone disables the endpoint with a warning: nothing more goes there,
// other endpoints carry on.
func TestSender_GoneDisables(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	gone := newReceiver(t, func(int, *http.Request) int { return 410 })
	ok := newReceiver(t, nil)
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	g, o := endpoint(gone.srv.URL), endpoint(ok.srv.URL)
	g.Name, o.Name = "gone", "ok"
	_, logs, _, reg := startSender(t, s, webhook.Options{}, g, o)
	eventually(t, "the first notification", func() bool { return len(ok.acked()) == 1 && len(gone.requests()) == 1 })
	// (Attempts already under way when the 410 arrives still go out.)
	eventually(t, "the endpoint disabled", func() bool {
		return metric(t, reg, "runhub_webhook_notifications_total", webhook.Disabled) == 1
	})
	done(t, s, "s1", "r1")
	eventually(t, "the second notification", func() bool { return len(ok.acked()) == 2 })
	eventually(t, "an empty outbox", func() bool {
		en, err := s.OutboxList(context.Background(), 10)
		return err == nil && len(en) == 0
	})
	if n := len(gone.requests()); n != 1 {
		t.Fatalf("the disabled endpoint got %d requests, want 1", n)
	}
	if !strings.Contains(logs.String(), "410 Gone") || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no warning:\n%s", logs)
	}
	if got := metric(t, reg, "runhub_webhook_notifications_total", webhook.Disabled); got != 2 {
		t.Errorf("disabled %v, want 2", got)
	}
}

// A host that resolves to nothing: attempts fail (dns), are retried, and
// the notification is given up and counted after GiveUp.
func TestSender_UnresolvableGivesUp(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	// A resolver whose server is unreachable: every name resolves to
	// nothing, without a query leaving the machine.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Err: errNoDNS}
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Resolver: resolver}).DialContext}}
	_, logs, _, reg := startSender(t, s, webhook.Options{Client: client,
		Retry: webhook.Retry{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond, GiveUp: 300 * time.Millisecond}},
		endpoint("http://hooks.runhub-test.invalid/h"))
	eventually(t, "the notification given up", func() bool {
		return metric(t, reg, "runhub_webhook_notifications_total", webhook.GaveUp) == 1
	})
	if n := metric(t, reg, "runhub_webhook_attempts_failed_total", "dns"); n < 3 {
		t.Fatalf("%v failed dns attempts, want retries", n)
	}
	if !strings.Contains(logs.String(), "given up") {
		t.Fatalf("no log line for the given-up notification:\n%s", logs)
	}
	eventually(t, "an empty outbox", func() bool {
		en, err := s.OutboxList(context.Background(), 10)
		return err == nil && len(en) == 0
	})
}

type dnsErr struct{}

func (dnsErr) Error() string { return "no DNS server in tests" }

var errNoDNS = dnsErr{}

// A receiver that never answers holds no append and no subscriber: runs
// go on journaling and the bus goes on delivering while every attempt
// hangs, and the attempts time out and are retried.
func TestSender_SlowReceiverHoldsNothing(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	rc := newReceiver(t, nil)
	rc.block = make(chan struct{})
	defer close(rc.block)
	_, _, _, reg := startSender(t, s, webhook.Options{Timeout: 300 * time.Millisecond, Concurrency: 2}, endpoint(rc.srv.URL))
	seen := make(chan protocol.Envelope, 10000)
	cancel := s.SubscribeFeed(func(e protocol.Envelope) { seen <- e })
	defer cancel()
	const runs = 20
	for i := range runs {
		sid, rid := "s"+itoa(i), "r"+itoa(i)
		newRun(t, s, sid, rid)
		approval(t, s, sid, rid)
		for range 20 {
			appendEv(t, s, sid, rid, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: "x"})
		}
		done(t, s, sid, rid)
	}
	// Every event reached the feed while the receiver held every request.
	n := 0
	for n < runs*22 {
		select {
		case e := <-seen:
			if e.Type != "journal.session_changed" {
				n++
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the feed delivered %d of %d events", n, runs*22)
		}
	}
	eventually(t, "attempts timing out", func() bool { return metric(t, reg, "runhub_webhook_attempts_failed_total", "timeout") >= 2 })
	if g := metric(t, reg, "runhub_webhook_queue_depth", ""); g < 1 || g > runs*2 {
		t.Fatalf("queue depth %v, want between 1 and %d", g, runs*2)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// Secrets never reach the log: neither the secret, nor the URL's query
// (which may hold a token), nor a notification's body.
func TestSender_LogsNoSecrets(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	calls := 0
	rc := newReceiver(t, func(int, *http.Request) int {
		calls++
		if calls%2 == 1 {
			return 500
		}
		return 410
	})
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	ep := endpoint(rc.srv.URL + "/hook?token=tok-SECRET-query")
	_, logs, _, reg := startSender(t, s, webhook.Options{}, ep)
	eventually(t, "the endpoint disabled", func() bool { return metric(t, reg, "runhub_webhook_notifications_total", webhook.Disabled) == 1 })
	out := logs.String()
	for _, secret := range []string{testSecret, strings.TrimPrefix(testSecret, "whsec_"), string(testKey), "tok-SECRET-query", "delete the files?"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log shows %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "attempt failed") || !strings.Contains(out, "/hook") {
		t.Fatalf("the log lacks the attempt lines:\n%s", out)
	}
}

// GET /v1/webhooks/deliveries: newest first, bounded, limit checked.
func TestDeliveriesHandler(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	rc := newReceiver(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return 502
		}
		return 200
	})
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	sn, _, _, _ := startSender(t, s, webhook.Options{History: 3}, endpoint(rc.srv.URL))
	// The receiver has its answer before the sender records the outcome:
	// wait for the record, not the receiver.
	eventually(t, "the delivery recorded", func() bool {
		d := sn.Deliveries(10)
		return len(rc.acked()) == 1 && len(d) == 2 && d[0].Status == webhook.Delivered
	})
	srv := httptest.NewServer(sn.DeliveriesHandler())
	defer srv.Close()
	var out struct{ Deliveries []webhook.Delivery }
	resp, err := http.Get(srv.URL + "?limit=10")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if len(out.Deliveries) != 2 || out.Deliveries[0].Status != webhook.Delivered || out.Deliveries[0].Attempt != 2 ||
		out.Deliveries[1].Status != webhook.Failed || out.Deliveries[1].HTTPStatus != 502 || out.Deliveries[1].NextAt == 0 ||
		out.Deliveries[0].ID != out.Deliveries[1].ID || out.Deliveries[0].RunID != "r1" {
		t.Fatalf("deliveries %+v", out.Deliveries)
	}
	for _, bad := range []string{"0", "501", "x"} {
		resp, err := http.Get(srv.URL + "?limit=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("limit=%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}

// A run started with "metadata": {"webhooks": false} sends nothing; its
// entries leave the outbox, counted skipped.
func TestSender_RunOptsOut(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	rc := newReceiver(t, nil)
	ctx := context.Background()
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: "quiet", SessionID: "s1", Request: []byte(`{"message":"m","metadata":{"webhooks":false}}`)}); err != nil {
		t.Fatal(err)
	}
	approval(t, s, "s1", "quiet")
	done(t, s, "s1", "quiet")
	if err := s.BeginRun(ctx, journal.RunMeta{ID: "loud", SessionID: "s1", Request: []byte(`{"message":"m","metadata":{"webhooks":true}}`)}); err != nil {
		t.Fatal(err)
	}
	done(t, s, "s1", "loud")
	_, _, _, reg := startSender(t, s, webhook.Options{}, endpoint(rc.srv.URL))
	eventually(t, "an empty outbox", func() bool {
		en, err := s.OutboxList(ctx, 10)
		return err == nil && len(en) == 0
	})
	reqs := rc.requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].body), `"run_id":"loud"`) {
		t.Fatalf("requests %d, want the loud run's end only", len(reqs))
	}
	if got := metric(t, reg, "runhub_webhook_notifications_total", webhook.Skipped); got != 2 {
		t.Fatalf("skipped %v, want 2", got)
	}
}

// Bodies are bounded whatever the event holds: long texts are clipped,
// choices capped.
func TestSender_BodiesAreBounded(t *testing.T) {
	s := openBolt(t, t.TempDir())
	defer s.Close()
	rc := newReceiver(t, nil)
	newRun(t, s, "s1", "r1")
	choices := make([]string, 60)
	for i := range choices {
		choices[i] = strings.Repeat("c", 1000)
	}
	appendEv(t, s, "s1", "r1", protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a1",
		Summary: strings.Repeat("\x01é", 15000), Risk: "high", Choices: choices})
	startSender(t, s, webhook.Options{}, endpoint(rc.srv.URL))
	eventually(t, "the delivery", func() bool { return len(rc.acked()) == 1 })
	body := rc.requests()[0].body
	var n webhook.Notification
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatal(err)
	}
	if len(body) > webhook.MaxBody || len(n.Data.Approval.Summary) > 2000+len("…") || len(n.Data.Approval.Choices) != 20 ||
		len(n.Data.Approval.Choices[0]) > 200+len("…") {
		t.Fatalf("a body of %d bytes, summary %d bytes, %d choices", len(body), len(n.Data.Approval.Summary), len(n.Data.Approval.Choices))
	}
}
