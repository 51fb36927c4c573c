package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// admin is a client of the shared server for inspecting it.
func admin(t testing.TB) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// infoField returns one field of INFO (e.g. "blocked_clients").
func infoField(t testing.TB, c *goredis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// evalshaCalls returns how many EVALSHA the server has run since the last
// CONFIG RESETSTAT.
func evalshaCalls(t testing.TB, c *goredis.Client) int {
	t.Helper()
	v := infoField(t, c, "commandstats", "cmdstat_evalsha")
	calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
	n, _ := strconv.Atoi(calls)
	return n
}

// clientsRunning counts the server's connections whose last command is cmd.
func clientsRunning(t testing.TB, c *goredis.Client, cmd string) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " cmd="+cmd+" ")
}

// mkRun creates session sid (owner alice) with active run rid.
func mkRun(t testing.TB, s *Store, sid, rid string) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "alice"}); err != nil {
		t.Fatalf("CreateSession(%s): %v", sid, err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid}); err != nil {
		t.Fatalf("BeginRun(%s): %v", rid, err)
	}
}

func token(sid, rid, text string) protocol.Envelope {
	e, err := protocol.NewEvent(rid, sid, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: text})
	if err != nil {
		panic(err)
	}
	return e
}

func status(sid, rid string) protocol.Envelope {
	e, err := protocol.NewEvent(rid, sid, protocol.EventStatus, protocol.StatusPayload{Status: protocol.StatusRunning, Controls: []string{}})
	if err != nil {
		panic(err)
	}
	return e
}

func done(sid, rid string) protocol.Envelope {
	e, err := protocol.NewEvent(rid, sid, protocol.EventDone, protocol.DonePayload{Status: "completed", Usage: &protocol.Usage{}})
	if err != nil {
		panic(err)
	}
	return e
}

// appendN appends n token deltas and fails the test on error.
func appendN(t testing.TB, s *Store, sid, rid string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Append(context.Background(), token(sid, rid, fmt.Sprint(i)), ""); err != nil {
			t.Fatalf("Append(%s #%d): %v", rid, i, err)
		}
	}
}

// events records what a subscriber receives.
type events struct {
	mu sync.Mutex
	l  []protocol.Envelope
}

// add collects an event; the feed's session change records are not events
// (the conformance suite checks them).
func (c *events) add(e protocol.Envelope) {
	if e.Type == journal.SessionChanged {
		return
	}
	c.mu.Lock()
	c.l = append(c.l, e)
	c.mu.Unlock()
}

func (c *events) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.l)
}

func (c *events) seqs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uint64, len(c.l))
	for i, e := range c.l {
		out[i] = e.Seq
	}
	return out
}

// waitFor polls cond for up to limit.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// wantSeqs fails unless got is from, from+1, …, to.
func wantSeqs(t testing.TB, what string, got []uint64, from, to uint64) {
	t.Helper()
	if uint64(len(got)) != to-from+1 {
		t.Fatalf("%s: got %d events %v, want seqs %d..%d", what, len(got), got, from, to)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("%s: event %d has seq %d, want %d (all: %v)", what, i, s, from+uint64(i), got)
		}
	}
}
