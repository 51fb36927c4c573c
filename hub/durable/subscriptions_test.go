package durable_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/journal/redis"
)

// fakeClock is a clock the test moves: leases lapse when it says.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// jdo sends v as JSON.
func jdo(t *testing.T, method, url, token string, v any) answer {
	t.Helper()
	body := ""
	switch x := v.(type) {
	case nil:
	case string:
		body = x
	default:
		raw, _ := json.Marshal(v)
		body = string(raw)
	}
	return do(t, method, url, token, map[string]string{"Content-Type": "application/json"}, body)
}

// apiError is an answer's error code and message.
func apiError(a answer) (code, msg string) {
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &b)
	return b.Error.Code, b.Error.Message
}

func decode(t *testing.T, a answer) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
	return v
}

// hook is a webhook receiver on loopback: it records every wake and
// answers as answer says.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	wakes  []map[string]any
	got    chan map[string]any
	answer func(n int, wake map[string]any) (status int, body string, hang bool)
}

func newHook(t *testing.T, answer func(n int, wake map[string]any) (int, string, bool)) *hook {
	h := &hook{got: make(chan map[string]any, 64), answer: answer}
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
		status, body, hang := 200, `{}`, false
		if h.answer != nil {
			status, body, hang = h.answer(n, wake)
		}
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

func (h *hook) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case w := <-h.got:
		return w
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook wake came")
		return nil
	}
}

// linkOf is a stream's link in a subscription's GET.
func linkOf(t *testing.T, url, token, path string) map[string]any {
	t.Helper()
	a := jdo(t, "GET", url, token, nil)
	if a.status != 200 {
		t.Fatalf("GET %s: %d %s", url, a.status, a.body)
	}
	for _, s := range decode(t, a)["streams"].([]any) {
		if l := s.(map[string]any); l["path"] == path {
			return l
		}
	}
	return nil
}

// Every malformed registration, claim, ack or callback gets the
// protocol's status, its code and a message, and registers nothing.
func TestSubscriptions_BadInput(t *testing.T) {
	base := memEdge(t, durable.Options{}, hub.Config{})
	sub := base + "__ds/subscriptions/"
	hookURL := "http://127.0.0.1:9/hook"
	for _, c := range []struct {
		name, method, url string
		body              any
		status            int
		code              string
	}{
		{"no body", "PUT", sub + "b1", "", 400, "INVALID_REQUEST"},
		{"not JSON", "PUT", sub + "b1", "{", 400, "INVALID_REQUEST"},
		{"an array", "PUT", sub + "b1", "[]", 400, "INVALID_REQUEST"},
		{"no type", "PUT", sub + "b1", map[string]any{"pattern": "a/*"}, 400, "INVALID_REQUEST"},
		{"unknown type", "PUT", sub + "b1", map[string]any{"type": "email", "pattern": "a/*"}, 400, "INVALID_REQUEST"},
		{"neither pattern nor streams", "PUT", sub + "b1", map[string]any{"type": "webhook", "webhook": map[string]any{"url": hookURL}}, 400, "INVALID_REQUEST"},
		{"streams not strings", "PUT", sub + "b1", map[string]any{"type": "webhook", "streams": []any{1}, "webhook": map[string]any{"url": hookURL}}, 400, "INVALID_REQUEST"},
		{"streams not an array", "PUT", sub + "b1", map[string]any{"type": "webhook", "streams": "a", "webhook": map[string]any{"url": hookURL}}, 400, "INVALID_REQUEST"},
		{"a reserved stream", "PUT", sub + "b1", map[string]any{"type": "webhook", "streams": []any{"__ds/x"}, "webhook": map[string]any{"url": hookURL}}, 400, "INVALID_REQUEST"},
		{"a .. segment", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/../b", "webhook": map[string]any{"url": hookURL}}, 400, "INVALID_REQUEST"},
		{"lease too short", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": hookURL}, "lease_ttl_ms": 999}, 400, "INVALID_REQUEST"},
		{"lease too long", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": hookURL}, "lease_ttl_ms": 600001}, 400, "INVALID_REQUEST"},
		{"lease not an integer", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": hookURL}, "lease_ttl_ms": 1500.5}, 400, "INVALID_REQUEST"},
		{"webhook without url", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*"}, 400, "INVALID_REQUEST"},
		{"webhook url not a string", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": 5}}, 400, "INVALID_REQUEST"},
		{"webhook to a private address", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": "http://10.0.0.1/hook"}}, 400, "WEBHOOK_URL_REJECTED"},
		{"webhook to link-local over https", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": "https://169.254.169.254/x"}}, 400, "WEBHOOK_URL_REJECTED"},
		{"webhook over plain http", "PUT", sub + "b1", map[string]any{"type": "webhook", "pattern": "a/*", "webhook": map[string]any{"url": "http://hooks.example.com/x"}}, 400, "WEBHOOK_URL_REJECTED"},
		{"pull-wake without wake_stream", "PUT", sub + "b1", map[string]any{"type": "pull-wake", "pattern": "a/*"}, 400, "INVALID_REQUEST"},
		{"description not a string", "PUT", sub + "b1", map[string]any{"type": "pull-wake", "pattern": "a/*", "wake_stream": "w", "description": 3}, 400, "INVALID_REQUEST"},
		{"an id with a control character", "PUT", sub + "b%01", map[string]any{"type": "pull-wake", "pattern": "a/*", "wake_stream": "w"}, 400, "INVALID_REQUEST"},
		{"an unknown control route", "GET", base + "__ds/nothing", nil, 404, "SUBSCRIPTION_NOT_FOUND"},
		{"an unknown subscription", "GET", sub + "none", nil, 404, "SUBSCRIPTION_NOT_FOUND"},
		{"a method the route has not", "PATCH", sub + "b1", nil, 405, ""},
		{"claim of an unknown subscription", "POST", sub + "none/claim", map[string]any{"worker": "w"}, 404, "SUBSCRIPTION_NOT_FOUND"},
		{"claim without a worker", "POST", sub + "none/claim", map[string]any{}, 400, "INVALID_REQUEST"},
		{"ack without a token", "POST", sub + "none/ack", map[string]any{}, 401, "TOKEN_INVALID"},
		{"callback with a forged token", "POST", sub + "none/callback", map[string]any{}, 401, "TOKEN_INVALID"},
	} {
		token := ""
		if strings.Contains(c.name, "forged") {
			token = "eyJzdWIiOiJ4In0.AAAA"
		}
		a := jdo(t, c.method, c.url, token, c.body)
		code, msg := apiError(a)
		if c.method == "PATCH" {
			// echo answers a method no route has before the edge sees it
			if a.status != 405 {
				t.Errorf("%s: %d %s, want 405", c.name, a.status, a.body)
			}
			continue
		}
		if a.status != c.status || code != c.code || msg == "" {
			t.Errorf("%s: %d %s, want %d %s with a message", c.name, a.status, a.body, c.status, c.code)
		}
	}
	if a := jdo(t, "GET", sub+"b1", "", nil); a.status != 404 {
		t.Fatalf("a refused registration registered: %d %s", a.status, a.body)
	}
	// A subscription's control paths are no stream's.
	if a := do(t, "PUT", base+"__ds/subscriptions/x/y/z", "", map[string]string{"Content-Type": "text/plain"}, "x"); a.status != 404 {
		t.Fatalf("PUT under __ds/ as a stream: %d %s", a.status, a.body)
	}
	// An ack of an unknown stream, a regressing or a past-the-tail offset.
	do(t, "PUT", base+"w", "", map[string]string{"Content-Type": "application/json"}, "[]")
	if a := jdo(t, "PUT", sub+"p1", "", map[string]any{"type": "pull-wake", "streams": []string{"s"}, "wake_stream": "w"}); a.status != 201 {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	do(t, "PUT", base+"s", "", map[string]string{"Content-Type": "text/plain"}, "abc")
	claim := jdo(t, "POST", sub+"p1/claim", "", map[string]any{"worker": "w1"})
	if claim.status != 200 {
		t.Fatalf("claim: %d %s", claim.status, claim.body)
	}
	cl := decode(t, claim)
	for _, c := range []struct {
		name string
		acks []map[string]any
	}{
		{"an unknown stream", []map[string]any{{"stream": "other", "offset": "0000000000000001_0000000000000003"}}},
		{"-1", []map[string]any{{"stream": "s", "offset": "-1"}}},
		{"not an offset", []map[string]any{{"stream": "s", "offset": "abc"}}},
		{"past the tail", []map[string]any{{"stream": "s", "offset": "0000000000000009_0000000000000099"}}},
	} {
		a := jdo(t, "POST", sub+"p1/ack", cl["token"].(string), map[string]any{"wake_id": cl["wake_id"], "generation": cl["generation"], "acks": c.acks})
		if code, msg := apiError(a); a.status != 409 || code != "INVALID_OFFSET" || msg == "" {
			t.Errorf("ack of %s: %d %s, want 409 INVALID_OFFSET", c.name, a.status, a.body)
		}
	}
	if l := linkOf(t, sub+"p1", "", "s"); l["acked_offset"] != "0000000000000000_0000000000000000" {
		t.Fatalf("a refused ack moved the cursor: %v", l)
	}
}

// Subscriptions are their creator's, as streams are: another subject
// gets 404 (403 on a PUT of the id), an admin reads and changes nothing,
// no token is 401; a pattern links only the owner's streams.
func TestSubscriptions_Ownership(t *testing.T) {
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), durable.Options{SubscriptionSweep: 50 * time.Millisecond},
		hubtest.WithAuth(t, hub.Config{}))
	base := th.URL + durable.Prefix
	sub := base + "__ds/subscriptions/"
	alice, bob := hubtest.Token(t, "alice", time.Hour, ""), hubtest.Token(t, "bob", time.Hour, "")
	admin := hubtest.Token(t, "root", time.Hour, auth.RoleAdmin)
	reg := map[string]any{"type": "pull-wake", "pattern": "ev/*", "wake_stream": "wake"}
	if a := jdo(t, "PUT", sub+"s1", "", reg); a.status != 401 {
		t.Fatalf("no token: %d %s", a.status, a.body)
	}
	if a := do(t, "PUT", base+"wake", alice, map[string]string{"Content-Type": "application/json"}, "[]"); a.status != 201 {
		t.Fatalf("wake stream: %d", a.status)
	}
	if a := jdo(t, "PUT", sub+"s1", alice, reg); a.status != 201 {
		t.Fatalf("alice registers: %d %s", a.status, a.body)
	}
	for _, c := range []struct {
		who, method, path string
		body              any
		status            int
	}{
		{bob, "GET", "s1", nil, 404},
		{bob, "PUT", "s1", reg, 403},
		{bob, "DELETE", "s1", nil, 404},
		{bob, "POST", "s1/claim", map[string]any{"worker": "b"}, 404},
		{bob, "POST", "s1/streams", map[string]any{"streams": []string{"x"}}, 404},
		{admin, "GET", "s1", nil, 200},
		{admin, "DELETE", "s1", nil, 403},
		{admin, "POST", "s1/claim", map[string]any{"worker": "a"}, 403},
		{"", "GET", "s1", nil, 401},
	} {
		if a := jdo(t, c.method, sub+c.path, c.who, c.body); a.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, a.status, a.body, c.status)
		}
	}
	if a := jdo(t, "GET", base+"__ds/jwks.json", "", nil); a.status != 200 {
		t.Errorf("the JWK Set without a token: %d %s, want 200", a.status, a.body)
	}
	// bob's stream matching alice's pattern wakes nothing of alice's.
	if a := do(t, "PUT", base+"ev/bobs", bob, map[string]string{"Content-Type": "text/plain"}, "secret"); a.status != 201 {
		t.Fatalf("bob's stream: %d", a.status)
	}
	time.Sleep(300 * time.Millisecond) // several sweeps
	if l := linkOf(t, sub+"s1", alice, "ev/bobs"); l != nil {
		t.Fatalf("alice's subscription linked bob's stream: %v", l)
	}
	if a := jdo(t, "POST", sub+"s1/claim", alice, map[string]any{"worker": "w"}); a.status != 409 {
		t.Fatalf("claim with only bob's stream appended: %d %s, want 409 NO_PENDING_WORK", a.status, a.body)
	} else if code, _ := apiError(a); code != "NO_PENDING_WORK" {
		t.Fatalf("claim: %s", a.body)
	}
	// alice's own stream wakes her subscription.
	do(t, "PUT", base+"ev/alices", alice, map[string]string{"Content-Type": "text/plain"}, "hi")
	if a := jdo(t, "POST", sub+"s1/claim", alice, map[string]any{"worker": "w"}); a.status != 200 {
		t.Fatalf("alice's claim: %d %s", a.status, a.body)
	}
	if a := jdo(t, "DELETE", sub+"s1", alice, nil); a.status != 204 {
		t.Fatalf("alice deletes: %d", a.status)
	}
}

// The bounds: subscriptions per subject, streams per subscription.
func TestSubscriptions_Bounds(t *testing.T) {
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	th, _ := serve(t, store, store.Streams(journal.StreamLimits{}),
		durable.Options{MaxSubscriptionsPerOwner: 2, MaxStreamsPerSubscription: 2}, hubtest.WithAuth(t, hub.Config{}))
	sub := th.URL + durable.Prefix + "__ds/subscriptions/"
	alice, bob := hubtest.Token(t, "alice", time.Hour, ""), hubtest.Token(t, "bob", time.Hour, "")
	reg := func(streams ...string) map[string]any {
		return map[string]any{"type": "pull-wake", "streams": streams, "wake_stream": "w"}
	}
	for _, id := range []string{"a1", "a2"} {
		if a := jdo(t, "PUT", sub+id, alice, reg("x")); a.status != 201 {
			t.Fatalf("%s: %d %s", id, a.status, a.body)
		}
	}
	if a := jdo(t, "PUT", sub+"a3", alice, reg("x")); a.status != 409 {
		t.Fatalf("a third subscription: %d %s, want 409", a.status, a.body)
	} else if code, msg := apiError(a); code != "SUBSCRIPTION_LIMIT_EXCEEDED" || msg == "" {
		t.Fatalf("a third subscription: %s", a.body)
	}
	if a := jdo(t, "PUT", sub+"a1", alice, reg("x")); a.status != 200 {
		t.Fatalf("re-confirming at the bound: %d %s", a.status, a.body)
	}
	if a := jdo(t, "PUT", sub+"b1", bob, reg("x", "y")); a.status != 201 {
		t.Fatalf("bob's first: %d %s", a.status, a.body)
	}
	if a := jdo(t, "PUT", sub+"b2", bob, reg("x", "y", "z")); a.status != 400 {
		t.Fatalf("three streams: %d %s, want 400", a.status, a.body)
	}
	if a := jdo(t, "POST", sub+"b1/streams", bob, map[string]any{"streams": []string{"z"}}); a.status != 400 {
		t.Fatalf("a third stream added: %d %s, want 400", a.status, a.body)
	}
	if a := jdo(t, "DELETE", sub+"a2", alice, nil); a.status != 204 {
		t.Fatalf("delete: %d", a.status)
	}
	if a := jdo(t, "PUT", sub+"a3", alice, reg("x")); a.status != 201 {
		t.Fatalf("after a delete, under the bound again: %d %s", a.status, a.body)
	}
}

// pullSetup registers a pull-wake subscription on base with lease and
// appends to its stream; it returns the subscription's URL.
func pullSetup(t *testing.T, base, id string, lease int) string {
	t.Helper()
	jsonCT := map[string]string{"Content-Type": "application/json"}
	if a := do(t, "PUT", base+"wake/"+id, "", jsonCT, "[]"); a.status != 201 {
		t.Fatalf("wake stream: %d %s", a.status, a.body)
	}
	sub := base + "__ds/subscriptions/" + id
	if a := jdo(t, "PUT", sub, "", map[string]any{"type": "pull-wake", "pattern": "jobs/" + id + "/*", "wake_stream": "wake/" + id, "lease_ttl_ms": lease}); a.status != 201 {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	if a := do(t, "PUT", base+"jobs/"+id+"/1", "", jsonCT, `{"n":1}`); a.status != 201 {
		t.Fatalf("stream: %d %s", a.status, a.body)
	}
	return sub
}

// claimOK claims the subscription's wake (the append linked its stream
// before it was answered).
func claimOK(t *testing.T, sub, worker string) map[string]any {
	t.Helper()
	a := jdo(t, "POST", sub+"/claim", "", map[string]any{"worker": worker})
	if a.status != 200 {
		t.Fatalf("claim by %s: %d %s", worker, a.status, a.body)
	}
	return decode(t, a)
}

func ackBody(c map[string]any, stream string, done bool) map[string]any {
	var off any
	for _, s := range c["streams"].([]any) {
		if l := s.(map[string]any); l["path"] == stream {
			off = l["tail_offset"]
		}
	}
	return map[string]any{"wake_id": c["wake_id"], "generation": c["generation"], "acks": []map[string]any{{"stream": stream, "offset": off}}, "done": done}
}

// A lease that lapses fences its holder: its ack, even a moment after the
// lapse and before any sweep, is 409 FENCED and moves no cursor; the next
// claim is a new generation.
func TestSubscriptions_LeaseLapseFencesTheHolder(t *testing.T) {
	clock := newClock()
	base := memEdge(t, durable.Options{Now: clock.Now, SubscriptionSweep: time.Hour}, hub.Config{})
	sub := pullSetup(t, base, "lapse", 1000)
	c1 := claimOK(t, sub, "worker-1")
	// A heartbeat (an ack without done) extends the lease.
	clock.Advance(800 * time.Millisecond)
	if a := jdo(t, "POST", sub+"/ack", c1["token"].(string), map[string]any{"wake_id": c1["wake_id"], "generation": c1["generation"]}); a.status != 200 {
		t.Fatalf("heartbeat: %d %s", a.status, a.body)
	}
	clock.Advance(800 * time.Millisecond)
	if a := jdo(t, "POST", sub+"/claim", "", map[string]any{"worker": "worker-2"}); a.status != 409 {
		t.Fatalf("a claim within the extended lease: %d %s, want 409 ALREADY_CLAIMED", a.status, a.body)
	}
	clock.Advance(201 * time.Millisecond) // the lease has lapsed
	a := jdo(t, "POST", sub+"/ack", c1["token"].(string), ackBody(c1, "jobs/lapse/1", true))
	if code, _ := apiError(a); a.status != 409 || code != "FENCED" {
		t.Fatalf("the lapsed holder's ack: %d %s, want 409 FENCED", a.status, a.body)
	}
	if l := linkOf(t, sub, "", "jobs/lapse/1"); l["acked_offset"] != "0000000000000000_0000000000000000" {
		t.Fatalf("a fenced ack moved the cursor: %v", l)
	}
	c2 := claimOK(t, sub, "worker-2")
	if c2["generation"].(float64) <= c1["generation"].(float64) || c2["wake_id"] == c1["wake_id"] {
		t.Fatalf("the claim after a lapse: generation %v wake %v, after %v %v", c2["generation"], c2["wake_id"], c1["generation"], c1["wake_id"])
	}
	if a := jdo(t, "POST", sub+"/release", c1["token"].(string), map[string]any{"wake_id": c1["wake_id"], "generation": c1["generation"]}); a.status != 409 {
		t.Fatalf("the old holder's release: %d %s, want 409", a.status, a.body)
	}
	if a := jdo(t, "POST", sub+"/ack", c2["token"].(string), ackBody(c2, "jobs/lapse/1", true)); a.status != 200 {
		t.Fatalf("the new holder's ack: %d %s", a.status, a.body)
	}
	if l := linkOf(t, sub, "", "jobs/lapse/1"); l["acked_offset"] != "0000000000000001_0000000000000007" {
		t.Fatalf("the cursor after the ack: %v", l)
	}
}

// redisReplica is a hub on Redis with the edge's subscriptions.
func redisReplica(t *testing.T, url string, o durable.Options) (string, *durable.Edge) {
	store, err := redis.Open(context.Background(), redis.Options{URL: url, Prefix: "subs:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	th, edge := serve(t, store, store.Streams(journal.StreamLimits{}), o, hub.Config{})
	return th.URL + durable.Prefix, edge
}

// Two hubs on one Redis: a stream appended through one wakes a webhook
// consumer registered through the other, each wake delivered once (by
// one replica); a pull-wake claim made on one is seen, and fenced, on the
// other.
func TestSubscriptions_TwoReplicas_Redis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	clock := newClock()
	o := durable.Options{SubscriptionSweep: 50 * time.Millisecond, Now: clock.Now}
	a, _ := redisReplica(t, rs.URL(), o)
	b, _ := redisReplica(t, rs.URL(), o)

	h := newHook(t, func(int, map[string]any) (int, string, bool) { return 200, `{"done":true}`, false })
	if r := jdo(t, "PUT", b+"__ds/subscriptions/wh", "", map[string]any{"type": "webhook", "pattern": "orders/*", "webhook": map[string]any{"url": h.URL + "/hook"}}); r.status != 201 {
		t.Fatalf("register on B: %d %s", r.status, r.body)
	}
	seen := map[string]bool{}
	for i := range 5 {
		body := `{"i":` + string(rune('0'+i)) + `}`
		if i == 0 {
			do(t, "PUT", a+"orders/o1", "", map[string]string{"Content-Type": "application/json"}, body)
		} else {
			do(t, "POST", a+"orders/o1", "", map[string]string{"Content-Type": "application/json"}, body)
		}
		w := h.next(t)
		id := w["wake_id"].(string)
		if seen[id] {
			t.Fatalf("wake %s delivered twice", id)
		}
		seen[id] = true
		// done: the snapshot acked (wait until B shows it, then append again)
		deadline := time.Now().Add(10 * time.Second)
		for {
			l := linkOf(t, b+"__ds/subscriptions/wh", "", "orders/o1")
			if l != nil && l["acked_offset"] == w["streams"].([]any)[0].(map[string]any)["tail_offset"] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the done wake %s was not acked: %v", id, l)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond) // sweeps on both replicas: nothing more to deliver
	h.mu.Lock()
	n := len(h.wakes)
	h.mu.Unlock()
	if n != 5 {
		t.Fatalf("%d webhook wakes for 5 appends, each acked: a wake delivered by both replicas", n)
	}

	// Pull-wake: claimed on A, busy and fenced on B.
	sub := pullSetup(t, a, "pw", 1000)
	subB := strings.Replace(sub, a, b, 1)
	c1 := claimOK(t, sub, "worker-a")
	if r := jdo(t, "POST", subB+"/claim", "", map[string]any{"worker": "worker-b"}); r.status != 409 {
		t.Fatalf("a claim on B while A's holds: %d %s", r.status, r.body)
	}
	clock.Advance(1500 * time.Millisecond)
	c2 := claimOK(t, subB, "worker-b")
	if r := jdo(t, "POST", sub+"/ack", c1["token"].(string), ackBody(c1, "jobs/pw/1", true)); r.status != 409 {
		t.Fatalf("A's lapsed holder acks on A: %d %s, want 409 FENCED", r.status, r.body)
	}
	if r := jdo(t, "POST", sub+"/ack", c2["token"].(string), ackBody(c2, "jobs/pw/1", true)); r.status != 200 {
		t.Fatalf("B's holder acks on A: %d %s", r.status, r.body)
	}
}

// A replica that stops mid-delivery loses no wake: another delivers it
// again, with the same wake id (the receiver drops the duplicate), once
// the attempt's deadline has passed.
func TestSubscriptions_ReplicaDiesMidDelivery_Redis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	o := durable.Options{SubscriptionSweep: 50 * time.Millisecond, WebhookTimeout: 500 * time.Millisecond}
	a, edgeA := redisReplica(t, rs.URL(), o)
	h := newHook(t, func(n int, _ map[string]any) (int, string, bool) {
		if n == 1 {
			return 0, "", true // the first delivery never gets its answer
		}
		return 200, `{"done":true}`, false
	})
	if r := jdo(t, "PUT", a+"__ds/subscriptions/die", "", map[string]any{"type": "webhook", "pattern": "d/*",
		"webhook": map[string]any{"url": h.URL + "/hook"}, "lease_ttl_ms": 600000}); r.status != 201 {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	do(t, "PUT", a+"d/1", "", map[string]string{"Content-Type": "text/plain"}, "work")
	first := h.next(t)
	edgeA.Close() // the replica dies with its delivery under way
	b, _ := redisReplica(t, rs.URL(), o)
	again := h.next(t)
	if again["wake_id"] != first["wake_id"] || again["generation"] != first["generation"] {
		t.Fatalf("the redelivery is wake %v gen %v, the first %v gen %v: want the same wake", again["wake_id"], again["generation"], first["wake_id"], first["generation"])
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l := linkOf(t, b+"__ds/subscriptions/die", "", "d/1"); l != nil && l["acked_offset"] == "0000000000000001_0000000000000004" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the redelivered wake's done was not applied")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
