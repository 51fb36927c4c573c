//go:build fault

package main

// Durable Streams subscriptions under faults (docs/durable-streams.md,
// "Subscriptions"): a hub killed between a wake and its ack, a receiver
// that fails and then times out, a lease that lapses while its holder
// still acks, Redis killed and restarted. None loses a wake or lets a
// fenced holder's ack through.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
)

// faultHook is a webhook receiver: it records every wake and answers as
// answer says (hang: no answer until the request's end or the test's).
type faultHook struct {
	*httptest.Server
	mu    sync.Mutex
	wakes []map[string]any
	got   chan map[string]any
}

func newFaultHook(t *testing.T, answer func(n int) (status int, body string, hang bool)) *faultHook {
	h := &faultHook{got: make(chan map[string]any, 256)}
	release := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var wake map[string]any
		_ = json.Unmarshal(raw, &wake)
		h.mu.Lock()
		h.wakes = append(h.wakes, wake)
		n := len(h.wakes)
		h.mu.Unlock()
		h.got <- wake
		status, body, hang := answer(n)
		if hang {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(func() { close(release); h.Close() })
	return h
}

func (h *faultHook) next(t *testing.T, within time.Duration) map[string]any {
	t.Helper()
	select {
	case w := <-h.got:
		return w
	case <-time.After(within):
		t.Fatal("no webhook wake came")
		return nil
	}
}

// sjson does a JSON request with an optional bearer token.
func sjson(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return resp.StatusCode, v
}

func errCode(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// streamPut creates (or appends to, POST) a JSON stream; it returns the
// stream's tail.
func streamWrite(t *testing.T, method, url, body string) string {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d", method, url, resp.StatusCode)
	}
	return resp.Header.Get("Stream-Next-Offset")
}

// ackedAt waits until the subscription's cursor of stream is at offset.
func ackedAt(t *testing.T, sub, stream, offset string, within time.Duration) {
	t.Helper()
	var last any
	waitFor(t, within, "the cursor of "+stream+" at "+offset, func() bool {
		code, v := sjson(t, "GET", sub, "", nil)
		if code != 200 {
			return false
		}
		for _, s := range v["streams"].([]any) {
			if l := s.(map[string]any); l["path"] == stream {
				last = l["acked_offset"]
				return last == offset
			}
		}
		return false
	})
}

func tailIn(wake map[string]any, stream string) string {
	for _, s := range wake["streams"].([]any) {
		if l := s.(map[string]any); l["path"] == stream {
			return l["tail_offset"].(string)
		}
	}
	return ""
}

// SIGKILL between a wake and its ack, on the embedded journal: a wake
// whose delivery the kill cut short is delivered again after the restart
// with the same wake id (the receiver drops the duplicate by it); a wake
// delivered and not acked lapses with its lease and comes again as a new
// generation, the old callback fenced; a pull-wake claim outlives the
// kill, its holder's ack taken by the restarted hub (the keys are in the
// journal).
func TestFault_SubscriptionKilledBetweenWakeAndAck(t *testing.T) {
	data := t.TempDir()
	env := []string{"RUNHUB_STREAM_WEBHOOK_TIMEOUT=1s"}
	var mode atomic.Int32 // 0: hang, 1: answer {} (acked later by callback)
	h := newFaultHook(t, func(int) (int, string, bool) { return 200, `{}`, mode.Load() == 0 })
	p := startHub(t, data, env...)
	base := p.URL() + "/v1/stream/"
	sub := base + "__ds/subscriptions/k"
	if code, v := sjson(t, "PUT", sub, "", map[string]any{"type": "webhook", "pattern": "jobs/*",
		"webhook": map[string]any{"url": h.URL + "/hook"}, "lease_ttl_ms": 8000}); code != 201 {
		t.Fatalf("register: %d %v", code, v)
	}
	tail := streamWrite(t, "PUT", base+"jobs/1", `{"job":1}`)
	first := h.next(t, 10*time.Second) // under way, unanswered
	p.kill()
	mode.Store(1)
	p = startHubAt(t, p.addr, data, env...)
	// The attempt's deadline (twice the webhook timeout and a second:
	// 3 s) passes well within the lease (8 s): the same wake again.
	again := h.next(t, 20*time.Second)
	if again["wake_id"] != first["wake_id"] || again["generation"] != first["generation"] {
		t.Fatalf("after the kill: wake %v gen %v, before %v gen %v: want the same wake", again["wake_id"], again["generation"], first["wake_id"], first["generation"])
	}
	if tailIn(again, "jobs/1") != tail {
		t.Fatalf("the wake after the kill covers %q, want the tail %s", tailIn(again, "jobs/1"), tail)
	}
	// Delivered, not acked; killed again: the lease lapses on the
	// restarted hub and the work comes again, the old callback fenced.
	p.kill()
	p = startHubAt(t, p.addr, data, env...)
	var third map[string]any
	for third == nil || third["wake_id"] == again["wake_id"] {
		third = h.next(t, 20*time.Second)
	}
	ack := func(w map[string]any) (int, map[string]any) {
		return sjson(t, "POST", w["callback_url"].(string), w["callback_token"].(string), map[string]any{
			"wake_id": w["wake_id"], "generation": w["generation"], "done": true,
			"acks": []map[string]any{{"stream": "jobs/1", "offset": tailIn(w, "jobs/1")}}})
	}
	if code, v := ack(again); code != 409 || errCode(v) != "FENCED" {
		t.Fatalf("the lapsed wake's callback: %d %v, want 409 FENCED", code, v)
	}
	if code, v := ack(third); code != 200 {
		t.Fatalf("the current wake's callback: %d %v", code, v)
	}
	ackedAt(t, sub, "jobs/1", tail, 10*time.Second)

	// A pull-wake claim survives a SIGKILL.
	streamWrite(t, "PUT", base+"wake/pool", `[]`)
	psub := base + "__ds/subscriptions/pk"
	if code, v := sjson(t, "PUT", psub, "", map[string]any{"type": "pull-wake", "pattern": "tasks/*", "wake_stream": "wake/pool", "lease_ttl_ms": 60000}); code != 201 {
		t.Fatalf("register pull-wake: %d %v", code, v)
	}
	ptail := streamWrite(t, "PUT", base+"tasks/1", `{"t":1}`)
	code, claim := sjson(t, "POST", psub+"/claim", "", map[string]any{"worker": "w1"})
	if code != 200 {
		t.Fatalf("claim: %d %v", code, claim)
	}
	p.kill()
	p = startHubAt(t, p.addr, data, env...)
	if code, v := sjson(t, "POST", psub+"/claim", "", map[string]any{"worker": "w2"}); code != 409 || errCode(v) != "ALREADY_CLAIMED" {
		t.Fatalf("a claim after the kill, the lease still held: %d %v", code, v)
	}
	if code, v := sjson(t, "POST", psub+"/ack", claim["token"].(string), map[string]any{"wake_id": claim["wake_id"], "generation": claim["generation"],
		"done": true, "acks": []map[string]any{{"stream": "tasks/1", "offset": ptail}}}); code != 200 {
		t.Fatalf("the holder's ack after the kill: %d %v", code, v)
	}
	ackedAt(t, psub, "tasks/1", ptail, 5*time.Second)
}

// A receiver that answers 500, then never answers (past the webhook
// timeout), then answers {"done": true}: the wake is retried with backoff,
// the same wake each time, the subscription "failed" meanwhile, and the
// work is acked in the end.
func TestFault_SubscriptionReceiver500ThenTimeout(t *testing.T) {
	h := newFaultHook(t, func(n int) (int, string, bool) {
		switch n {
		case 1:
			return 500, `{"error":"boom"}`, false
		case 2:
			return 0, "", true
		}
		return 200, `{"done":true}`, false
	})
	p := startHub(t, fastDir(t), "RUNHUB_STREAM_WEBHOOK_TIMEOUT=1s")
	base := p.URL() + "/v1/stream/"
	sub := base + "__ds/subscriptions/r"
	if code, v := sjson(t, "PUT", sub, "", map[string]any{"type": "webhook", "pattern": "jobs/*",
		"webhook": map[string]any{"url": h.URL + "/hook"}, "lease_ttl_ms": 600000}); code != 201 {
		t.Fatalf("register: %d %v", code, v)
	}
	tail := streamWrite(t, "PUT", base+"jobs/1", `{"job":1}`)
	w1 := h.next(t, 10*time.Second)
	waitFor(t, 5*time.Second, "the subscription to say failed", func() bool {
		_, v := sjson(t, "GET", sub, "", nil)
		return v["status"] == "failed" && v["next_attempt_at"] != nil
	})
	w2 := h.next(t, 10*time.Second)
	w3 := h.next(t, 20*time.Second)
	for _, w := range []map[string]any{w2, w3} {
		if w["wake_id"] != w1["wake_id"] || w["generation"] != w1["generation"] {
			t.Fatalf("a retry is wake %v gen %v, the first %v gen %v", w["wake_id"], w["generation"], w1["wake_id"], w1["generation"])
		}
	}
	ackedAt(t, sub, "jobs/1", tail, 10*time.Second)
	if _, v := sjson(t, "GET", sub, "", nil); v["status"] != "active" {
		t.Fatalf("status after the delivery: %v", v["status"])
	}
	noPanic(t, p)
}

// Two hubs on Redis; a pull-wake holder keeps acking (heartbeats, then
// done) on one hub while its lease lapses and another worker claims on
// the other: once the new claim is made, no ack of the old holder is
// taken, and the cursor moves only by the new holder's ack.
func TestFault_SubscriptionLeaseLapsesWhileHolderAcks(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL()}
	a, b := startHub(t, t.TempDir(), env...), startHub(t, t.TempDir(), env...)
	streamWrite(t, "PUT", a.URL()+"/v1/stream/wake/l", `[]`)
	sub := "/v1/stream/__ds/subscriptions/l"
	if code, v := sjson(t, "PUT", a.URL()+sub, "", map[string]any{"type": "pull-wake", "pattern": "jobs/*", "wake_stream": "wake/l", "lease_ttl_ms": 1000}); code != 201 {
		t.Fatalf("register: %d %v", code, v)
	}
	tail := streamWrite(t, "PUT", a.URL()+"/v1/stream/jobs/1", `{"job":1}`)
	code, c1 := sjson(t, "POST", a.URL()+sub+"/claim", "", map[string]any{"worker": "old"})
	if code != 200 {
		t.Fatalf("claim: %d %v", code, c1)
	}
	// The old holder acks without pause (heartbeats, without done) from
	// now on; its lease is extended by each taken one, so it is held
	// still: the holder stops heartbeating, and keeps sending done acks
	// of an earlier position, which must all be refused once fenced.
	var taken, fencedN atomic.Int64
	var claimedAt atomic.Int64 // when the new claim's answer came (unix ns)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now().UnixNano()
			code, v := sjson(t, "POST", a.URL()+sub+"/ack", c1["token"].(string), map[string]any{
				"wake_id": c1["wake_id"], "generation": c1["generation"], "acks": []map[string]any{{"stream": "jobs/1", "offset": "0000000000000000_0000000000000000"}}})
			switch {
			case code == 200:
				if c := claimedAt.Load(); c != 0 && sent > c {
					t.Errorf("the old holder's ack, sent after the new claim was answered, was taken")
				}
				taken.Add(1)
				time.Sleep(1200 * time.Millisecond) // past its lease: the next one must be fenced
			case code == 409 && errCode(v) == "FENCED":
				fencedN.Add(1)
			default:
				t.Errorf("the old holder's ack: %d %v", code, v)
				return
			}
		}
	}()
	var c2 map[string]any
	waitFor(t, 20*time.Second, "the new worker's claim on the other hub", func() bool {
		code, v := sjson(t, "POST", b.URL()+sub+"/claim", "", map[string]any{"worker": "new"})
		if code == 200 {
			claimedAt.Store(time.Now().UnixNano())
			c2 = v
			return true
		}
		return false
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	if taken.Load() == 0 || fencedN.Load() == 0 {
		t.Fatalf("the old holder's acks: %d taken, %d fenced; want both", taken.Load(), fencedN.Load())
	}
	if code, v := sjson(t, "POST", b.URL()+sub+"/ack", c2["token"].(string), map[string]any{"wake_id": c2["wake_id"], "generation": c2["generation"],
		"done": true, "acks": []map[string]any{{"stream": "jobs/1", "offset": tail}}}); code != 200 {
		t.Fatalf("the new holder's ack: %d %v", code, v)
	}
	ackedAt(t, a.URL()+sub, "jobs/1", tail, 5*time.Second)
}

// Redis killed (SIGKILL, AOF always) while a webhook wake is under way and
// started again: the outcome the hub could not record is made again (the
// same wake), and the work appended after the restart wakes too; every
// append is acked in the end.
func TestFault_SubscriptionRedisRestart(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{AOF: true})
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_STREAM_WEBHOOK_TIMEOUT=1s"}
	gate := make(chan struct{})
	h := newFaultHook(t, func(n int) (int, string, bool) {
		if n == 1 {
			<-gate
		}
		return 200, `{"done":true}`, false
	})
	p := startHub(t, t.TempDir(), env...)
	base := p.URL() + "/v1/stream/"
	sub := base + "__ds/subscriptions/rr"
	if code, v := sjson(t, "PUT", sub, "", map[string]any{"type": "webhook", "pattern": "jobs/*",
		"webhook": map[string]any{"url": h.URL + "/hook"}, "lease_ttl_ms": 600000}); code != 201 {
		t.Fatalf("register: %d %v", code, v)
	}
	streamWrite(t, "PUT", base+"jobs/1", `{"job":1}`)
	first := h.next(t, 10*time.Second)
	rs.Kill()
	close(gate) // answered {"done": true} while Redis is down
	time.Sleep(2 * time.Second)
	rs.Restart(t)
	waitFor(t, 20*time.Second, "/readyz 200 once Redis is back", func() bool { return readyz(p) == 200 })
	again := h.next(t, 20*time.Second)
	if again["wake_id"] != first["wake_id"] {
		t.Fatalf("the wake made again is %v, the first %v", again["wake_id"], first["wake_id"])
	}
	tail := streamWrite(t, "POST", base+"jobs/1", `{"job":2}`)
	ackedAt(t, sub, "jobs/1", tail, 20*time.Second)
	noPanic(t, p)
}
