package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// httpCase is one API request.
type httpCase struct{ method, path, body string }

// apiCalls are the HTTP API's requests on a session and a run: reads,
// starts and every control.
func apiCalls(sid, rid string) []httpCase {
	return []httpCase{
		{"POST", "/v1/sessions", `{"title":"t"}`},
		{"GET", "/v1/sessions", ""},
		{"GET", "/v1/sessions/" + sid, ""},
		{"POST", "/v1/sessions/" + sid + "/runs", `{"message":"again"}`},
		{"POST", "/v1/sessions/" + sid + "/queue", `{"message":"later"}`},
		{"POST", "/v1/sessions/" + sid + "/goal", `{"action":"set","text":"ship it"}`},
		{"GET", "/v1/runs/" + rid, ""},
		{"GET", "/v1/runs/" + rid + "/events", ""},
		{"POST", "/v1/runs/" + rid + "/cancel", ""},
		{"POST", "/v1/runs/" + rid + "/approvals/a_1", `{"choice":"approve"}`},
		{"POST", "/v1/runs/" + rid + "/clarifications/q_1", `{"response":"yes"}`},
	}
}

// expect503 sends every call and wants 503 unavailable with Retry-After,
// never 500 internal.
func expect503(t *testing.T, base, what string, calls []httpCase) {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second}
	for _, c := range calls {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", what, c.method, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb protocol.ErrorBody
		json.Unmarshal(body, &eb)
		if resp.StatusCode != http.StatusServiceUnavailable || eb.Error == nil || eb.Error.Code != protocol.CodeUnavailable {
			t.Errorf("%s: %s %s: %d %s, want 503 unavailable", what, c.method, c.path, resp.StatusCode, body)
			continue
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %s %s: 503 without Retry-After", what, c.method, c.path)
		}
	}
}

// startRedisHub starts a hub (runs in process) on a fresh Redis and a run
// that waits on an approval; it returns the hub, the Redis, and the
// session and run ids.
func startRedisHub(t *testing.T, env ...string) (*hubProcess, *redistest.Server, string, string) {
	t.Helper()
	rs := redistest.Start(t, redistest.Options{})
	env = append([]string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_RUNTIME=inprocess", "RUNHUB_LEASE_TTL=1s"}, env...)
	p := startHub(t, t.TempDir(), env...)
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "redis down"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	body := map[string]any{"message": "wait", "metadata": map[string]any{"sim": map[string]any{"tokens": 100000, "token_ms": 20}}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return p, rs, sess.SessionID, run.RunID
}

// While Redis is down (killed, or stopped), every HTTP API request — reads, start,
// queue, goal, cancel, approvals, clarifications — answers 503 unavailable
// with Retry-After, never 500 internal; so do the socket's watch, focus
// and controls (error unavailable), for the lease TTL (30 s here); past it
// the hub tells its sockets to move (goaway "redis unreachable":
// TestFault_PartitionHubFromRedis). Once Redis is back, the API answers
// again.
func TestProcess_RedisKilledIs503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a hub")
	}
	p, rs, sid, rid := startRedisHub(t, "RUNHUB_LEASE_TTL=30s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tab, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()

	rs.Kill()
	expect503(t, p.URL(), "redis killed", apiCalls(sid, rid))

	// The socket: a control, a watch and a focus each get error unavailable.
	res, err := tab.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: rid})
	if err == nil || res.Accepted {
		t.Fatalf("cancel over the socket while Redis is down: %+v %v", res, err)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnavailable {
		t.Errorf("cancel over the socket: %v, want unavailable", err)
	}
	tab.Watch(ctx, false, sid, "s_other")
	tab.Focus(ctx, sid, "")
	got := map[string]protocol.Code{}
	for len(got) < 2 {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatalf("socket: %v (errors so far %v)", err, got)
		}
		if e, ok := m.(*protocol.ErrorMessage); ok {
			got[e.Ref] = e.Code
			if e.Ref == protocol.MsgWatch && len(e.Sessions) != 2 {
				t.Errorf("watch error lists %v, want both ids", e.Sessions)
			}
		}
	}
	if got["watch"] != protocol.CodeUnavailable || got["focus"] != protocol.CodeUnavailable {
		t.Errorf("socket errors %v, want unavailable for watch and focus", got)
	}

	rs.Restart(t)
	waitAPI(t, p)
	// A graceful stop (SIGTERM, as a restart does) is the same.
	rs.Stop()
	expect503(t, p.URL(), "redis stopped", apiCalls(sid, rid))
	rs.Restart(t)
	waitAPI(t, p)
}

// waitAPI waits until the hub creates a session again.
func waitAPI(t *testing.T, p *hubProcess) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for call(t, "POST", p.URL()+"/v1/sessions", map[string]string{}, nil) != 201 {
		if time.Now().After(deadline) {
			t.Fatalf("the API did not answer after Redis came back:\n%s", p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A Redis that answers reads but refuses writes (READONLY: a replica, as
// during a failover) makes the writes — a new session, queue, goal — answer
// 503 unavailable with Retry-After, not 500: the write paths past the
// reads classify the reply the same way, also when a MULTI/EXEC is
// discarded (EXECABORT) because Redis refused a queued command.
func TestProcess_RedisReadOnlyIs503(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a hub")
	}
	p, rs, sid, _ := startRedisHub(t)
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: rs.Socket()})
	defer rdb.Close()
	ctx := context.Background()
	// A replica of a master that does not exist: reads answer, writes get
	// READONLY.
	if err := rdb.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Do(ctx, "REPLICAOF", "NO", "ONE")
	if err := rdb.Set(ctx, "probe", "1", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("the replica took a write: %v", err)
	}
	writes := []httpCase{
		{"POST", "/v1/sessions", `{"title":"t"}`},
		{"POST", "/v1/sessions/" + sid + "/queue", `{"message":"later"}`},
		{"POST", "/v1/sessions/" + sid + "/goal", `{"action":"set","text":"ship it"}`},
	}
	// (A cancel is still accepted: it reaches the run's executor in this
	// process, which ends the run once the journal takes its terminal.)
	expect503(t, p.URL(), "redis read-only", writes)
	if t.Failed() {
		t.Log(p.out.String())
	}
}
