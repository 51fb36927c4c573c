package durable_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/auth"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// A run's stream is read as the rest of the API reads the run: no token is
// 401, another subject gets 404 in every read mode (as for
// /v1/runs/{id}/events), the owner and an admin read it whole, and it is
// read-only for both.
func TestRunStream_SameAccessAsTheAPI(t *testing.T) {
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), durable.Options{LongPollTimeout: shortPoll},
		hubtest.WithAuth(t, hub.Config{}))
	res, err := th.Hub.Control(context.Background(), "alice", &protocol.Control{Op: protocol.OpStart, Message: "hello",
		Metadata: []byte(`{"sim":{"tokens":3,"token_ms":1,"tools":0}}`)}, "")
	if err != nil || res.RunID == "" {
		t.Fatalf("start: %+v, %v", res, err)
	}
	hubtest.WaitTerminal(t, th, res.RunID)
	stream := th.URL + durable.Prefix + "runs/" + res.RunID
	events := th.URL + "/v1/runs/" + res.RunID + "/events"
	tokens := map[string]string{
		"alice": hubtest.Token(t, "alice", time.Hour, ""),
		"bob":   hubtest.Token(t, "bob", time.Hour, ""),
		"admin": hubtest.Token(t, "root", time.Hour, auth.RoleAdmin),
	}

	if a := do(t, "GET", stream, "", nil, ""); a.status != 401 {
		t.Errorf("no token: %d %s, want 401", a.status, a.body)
	}
	if a := do(t, "GET", events, tokens["bob"], nil, ""); a.status != 404 {
		t.Fatalf("the API gives bob alice's run's events: %d", a.status)
	}
	for _, q := range []string{"", "?offset=-1", "?offset=-1&live=long-poll", "?offset=-1&live=sse"} {
		if a := do(t, "GET", stream+q, tokens["bob"], nil, ""); a.status != 404 || strings.Contains(a.body, "run.started") {
			t.Errorf("bob GET %s: %d %q, want 404 and no event", q, a.status, a.body)
		}
	}
	if a := do(t, "HEAD", stream, tokens["bob"], nil, ""); a.status != 404 || a.header.Get("Stream-Next-Offset") != "" {
		t.Errorf("bob HEAD: %d %v, want 404 without an offset", a.status, a.header)
	}

	var want string
	for _, who := range []string{"alice", "admin"} {
		a := do(t, "GET", stream, tokens[who], nil, "")
		var evs []protocol.Envelope
		if a.status != 200 || json.Unmarshal([]byte(a.body), &evs) != nil || len(evs) < 3 ||
			evs[0].Type != protocol.EventRunStarted || evs[len(evs)-1].Type != protocol.EventDone ||
			a.header.Get("Stream-Closed") != "true" {
			t.Fatalf("%s GET: %d %v %q, want the whole run, closed", who, a.status, a.header, a.body)
		}
		if want == "" {
			want = a.body
		} else if a.body != want {
			t.Errorf("%s read %q, alice %q", who, a.body, want)
		}
		if a := do(t, "POST", stream, tokens[who], map[string]string{"Content-Type": "application/json"}, "[1]"); a.status != 405 {
			t.Errorf("%s POST: %d, want 405", who, a.status)
		}
	}
}

// An append that would take a stream past its bound (RUNHUB_STREAM_MAX_BYTES)
// is 413 with a code and a message and changes nothing; one that reaches the
// bound exactly is taken.
func TestStreamBound_RefusedWhole(t *testing.T) {
	base := memEdge(t, durable.Options{}, hub.Config{}) // streams bounded at 64 bytes
	text := map[string]string{"Content-Type": "text/plain"}
	first := strings.Repeat("a", 60)
	if a := do(t, "PUT", base+"full", "", text, first); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	a := do(t, "POST", base+"full", "", text, "12345")
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if a.status != 413 || json.Unmarshal([]byte(a.body), &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("append past the bound: %d %q, want 413 with a code and a message", a.status, a.body)
	}
	if a := do(t, "GET", base+"full", "", nil, ""); a.body != first {
		t.Fatalf("after the refused append the stream reads %q", a.body)
	}
	if a := do(t, "POST", base+"full", "", text, "1234"); a.status != 204 {
		t.Fatalf("append up to the bound: %d %s", a.status, a.body)
	}
	if a := do(t, "GET", base+"full", "", nil, ""); a.body != first+"1234" {
		t.Fatalf("the stream reads %q", a.body)
	}
}

// reapCounter counts what the edge's reaper deletes.
type reapCounter struct {
	journal.Streams
	reaped atomic.Int64
}

func (r *reapCounter) ReapStreams(ctx context.Context, now time.Time) (int, error) {
	n, err := r.Streams.ReapStreams(ctx, now)
	r.reaped.Add(int64(n))
	return n, err
}

// The edge's reaper deletes an expired stream by itself, with nobody
// reading it, and leaves a stream without expiry.
func TestReaper_DeletesExpiredStreams(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	streams := &reapCounter{Streams: store.Streams(journal.StreamLimits{Now: clock})}
	th, _ := serve(t, store, streams, durable.Options{ReapInterval: 20 * time.Millisecond, Now: clock}, hub.Config{})
	base := th.URL + durable.Prefix
	text := map[string]string{"Content-Type": "text/plain"}
	if a := do(t, "PUT", base+"short", "", map[string]string{"Content-Type": "text/plain", "Stream-TTL": "60"}, "x"); a.status != 201 {
		t.Fatalf("create with a TTL: %d %s", a.status, a.body)
	}
	if a := do(t, "PUT", base+"kept", "", text, "y"); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	time.Sleep(100 * time.Millisecond)
	if n := streams.reaped.Load(); n != 0 {
		t.Fatalf("the reaper deleted %d streams before any expired", n)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	hubtest.WaitFor(t, 5*time.Second, "the reaper to delete the expired stream", func() bool { return streams.reaped.Load() == 1 })
	if a := do(t, "HEAD", base+"short", "", nil, ""); a.status != 404 {
		t.Errorf("the reaped stream: HEAD %d, want 404", a.status)
	}
	if a := do(t, "GET", base+"kept", "", nil, ""); a.status != 200 || a.body != "y" {
		t.Errorf("the stream without expiry: %d %q", a.status, a.body)
	}
	if n := streams.reaped.Load(); n != 1 {
		t.Errorf("the reaper deleted %d streams, want 1", n)
	}
}
