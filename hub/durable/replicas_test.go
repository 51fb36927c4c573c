package durable_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/redis"
)

// Two hubs sharing a Redis: an append acknowledged by one is read, and
// woken live tails (long-poll and SSE) on the other see it at once.
func TestTwoReplicas_Redis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	replica := func() string {
		store, err := redis.Open(context.Background(), redis.Options{URL: rs.URL(), Prefix: "two:"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), edgeOptions(), hub.Config{})
		return th.URL + "/v1/stream/"
	}
	a, b := replica(), replica()
	text := map[string]string{"Content-Type": "text/plain"}
	created := do(t, "PUT", a+"shared", "", text, "one ")
	if created.status != 201 {
		t.Fatalf("create on A: %d %s", created.status, created.body)
	}
	if got := do(t, "GET", b+"shared", "", nil, ""); got.status != 200 || got.body != "one " {
		t.Fatalf("read on B: %d %q", got.status, got.body)
	}
	tail := created.header.Get("Stream-Next-Offset")

	// An SSE tail on B, from the tail.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b+"shared?offset="+tail+"&live=sse", nil)
	sse, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(sse.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	// A long-poll on B, waiting at the tail.
	type result struct {
		a       answer
		elapsed time.Duration
	}
	polled := make(chan result, 1)
	go func() {
		start := time.Now()
		r := do(t, "GET", b+"shared?offset="+tail+"&live=long-poll", "", nil, "")
		polled <- result{r, time.Since(start)}
	}()
	// Both wait, their re-check (every 3 s) well ahead: an answer within
	// 300 ms of the append is the notification's.
	time.Sleep(1500 * time.Millisecond)
	appended := time.Now()
	if r := do(t, "POST", a+"shared", "", text, "two"); r.status != 204 {
		t.Fatalf("append on A: %d %s", r.status, r.body)
	}
	p := <-polled
	if p.a.status != 200 || p.a.body != "two" {
		t.Fatalf("long-poll on B: %d %q", p.a.status, p.a.body)
	}
	if late := time.Since(appended); late > 300*time.Millisecond {
		t.Errorf("the long-poll on B answered %v after the append on A: not woken by the notification", late)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the SSE tail on B ended before the append reached it")
			}
			if strings.HasPrefix(l, "data:two") {
				return
			}
		case <-deadline:
			t.Fatal("the SSE tail on B never saw the append on A")
		}
	}
}
