package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// 50 concurrent appenders on one run, some retrying keyed appends: the
// script keeps the stream, the meta and the feed record in step. Every seq
// is taken once, the stream holds exactly 1..last_seq, and the session's
// feed shard holds one record per event, in seq order.
func TestAppend_ScriptAtomicUnder50Appenders(t *testing.T) {
	s := openStore(t, Options{})
	c := admin(t)
	ctx := context.Background()
	mkRun(t, s, "s1", "r1")
	const writers, each = 50, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := ""
				if i%4 == 0 {
					key = fmt.Sprintf("k%d", i) // the same keys from every writer
				}
				if _, err := s.Append(ctx, token("s1", "r1", fmt.Sprint(w, "-", i)), key); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	keyed := each / 4
	want := writers*(each-keyed) + keyed
	m, err := s.Run(ctx, "r1")
	if err != nil || m.LastSeq != uint64(want) {
		t.Fatalf("Run = %+v, %v; want last_seq %d", m, err, want)
	}
	msgs, err := c.XRange(ctx, s.k.events("r1"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range msgs {
		if msg.ID != strconv.Itoa(i+1)+"-0" {
			t.Fatalf("stream entry %d has id %s, want %d-0", i, msg.ID, i+1)
		}
	}
	if len(msgs) != want {
		t.Fatalf("stream holds %d entries, want %d", len(msgs), want)
	}
	feed, err := c.XRange(ctx, s.k.feedOf("s1"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, f := range feed {
		if f.Values["r"] == "r1" {
			q, _ := strconv.ParseUint(f.Values["q"].(string), 10, 64)
			seqs = append(seqs, q)
		}
	}
	wantSeqs(t, "feed records", seqs, 1, uint64(want))
	if n, _ := c.HLen(ctx, s.k.idem("r1")).Result(); n != int64(keyed) {
		t.Fatalf("idempotency hash has %d keys, want %d", n, keyed)
	}
}

// Concurrent appends are batched: far fewer script runs than events.
func TestAppend_BatchesUnderLoad(t *testing.T) {
	s := openStore(t, Options{})
	c := admin(t)
	ctx := context.Background()
	const runs, each = 100, 20
	for i := range runs {
		mkRun(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i))
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() { appendN(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i), each) })
	}
	wg.Wait()
	if n := evalshaCalls(t, c); n <= 0 || n > runs*each/2 {
		t.Fatalf("%d appends took %d script runs, want batching (at most half)", runs*each, n)
	}
	for i := range runs {
		if m, _ := s.Run(ctx, fmt.Sprint("r", i)); m.LastSeq != each {
			t.Fatalf("r%d: last_seq %d, want %d", i, m.LastSeq, each)
		}
	}
}

// busy runs a Lua busy loop of d on the server from another connection:
// the server executes nothing else meanwhile, but commands sent to it
// wait in their sockets and run afterwards, even when their client has
// given up and closed the connection. It returns once the loop runs; wait
// waits for its end.
func busy(t *testing.T, d time.Duration) (wait func()) {
	t.Helper()
	c := admin(t)
	const spin = `local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1])
return 1`
	errc := make(chan error, 1)
	go func() { errc <- c.Eval(context.Background(), spin, nil, d.Microseconds()).Err() }()
	admin2 := admin(t)
	waitFor(t, 5*time.Second, "the busy script", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return admin2.WithTimeout(20*time.Millisecond).Ping(ctx).Err() != nil
	})
	return func() {
		if err := <-errc; err != nil {
			t.Fatalf("busy script: %v", err)
		}
	}
}

// timeoutClient is a client with a short read timeout, for appends whose
// reply does not come in time.
func timeoutClient(t *testing.T, maxRetries int) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.ReadTimeout = 200 * time.Millisecond
	opt.MaxRetries = maxRetries
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// An append that times out is journaled when the server gets to it; the
// caller's retry with the same key returns that event instead of a second.
func TestAppend_KeyedRetryAfterTimeoutNeverDuplicates(t *testing.T) {
	s := openStore(t, Options{Client: timeoutClient(t, -1)})
	ctx := context.Background()
	mkRun(t, s, "s1", "r1")
	appendN(t, s, "s1", "r1", 2)
	wait := busy(t, 500*time.Millisecond)
	_, err := s.Append(ctx, token("s1", "r1", "once"), "k-once")
	if err == nil {
		t.Fatal("Append succeeded while the server was busy past the read timeout")
	}
	wait()
	var stored uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e, err := s.Append(ctx, token("s1", "r1", "once, retried"), "k-once")
		if err == nil {
			stored = e.Seq
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retry: %v", err)
		}
	}
	if stored != 3 {
		t.Fatalf("retry returned seq %d, want 3 (the timed-out append)", stored)
	}
	page, err := s.Read(ctx, "r1", 0, 10)
	if err != nil || len(page) != 3 || string(page[2].Payload) != `{"message_id":"m","text":"once"}` {
		t.Fatalf("run holds %d events (%v), want 3 ending with the first attempt's", len(page), err)
	}
}

// A keyless append whose reply is lost is resent by go-redis; the batch's
// reply cache answers the resend, so the event is journaled once.
func TestAppend_TransportRetryNeverDuplicates(t *testing.T) {
	s := openStore(t, Options{Client: timeoutClient(t, 3)})
	c := admin(t)
	ctx := context.Background()
	mkRun(t, s, "s1", "r1")
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	wait := busy(t, 300*time.Millisecond)
	e, err := s.Append(ctx, token("s1", "r1", "x"), "")
	if err != nil {
		t.Fatalf("Append: %v (go-redis should have resent it past the busy server)", err)
	}
	wait()
	if n := evalshaCalls(t, c); n < 2 {
		t.Fatalf("the script ran %d times: the retry path was not exercised", n)
	}
	if e.Seq != 1 {
		t.Fatalf("Append returned seq %d, want 1", e.Seq)
	}
	if m, _ := s.Run(ctx, "r1"); m.LastSeq != 1 {
		t.Fatalf("last_seq %d after one append resent by go-redis, want 1", m.LastSeq)
	}
}

// The keys of a journal are the documented layout (doc.go), and nothing
// else.
func TestKeyLayout(t *testing.T) {
	p := fmt.Sprintf("layout%d:", prefixes.Add(1))
	s := openStore(t, Options{Prefix: p, Shards: 1})
	c := admin(t)
	ctx := context.Background()
	mkRun(t, s, "s1", "r1")
	if _, err := s.Append(ctx, token("s1", "r1", "a"), "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, done("s1", "r1"), ""); err != nil {
		t.Fatal(err)
	}
	defer s.SubscribeRun("r1", func(protocol.Envelope) {})()
	keys, err := c.Keys(ctx, p+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, p+"batch:"):
			if ttl, _ := c.TTL(ctx, k).Result(); ttl <= 0 || ttl > s.opts.ReplyCacheTTL {
				t.Errorf("reply cache %s has TTL %v", k, ttl)
			}
			continue
		case k == s.runs.wakeKey:
			continue
		}
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{p + "bus:0", p + "owner:alice", p + "run:{r1}", p + "run:{r1}:ev",
		p + "run:{r1}:idem", p + "runs:ended", p + "sess:{s1}", p + "sess:{s1}:runs"}
	if !slices.Equal(got, want) {
		t.Fatalf("keys\n%v\nwant\n%v", got, want)
	}
	if ids, _ := c.XRange(ctx, p+"run:{r1}:ev", "-", "+").Result(); len(ids) != 2 || ids[0].ID != "1-0" || ids[1].ID != "2-0" {
		t.Fatalf("event stream entries %v, want ids 1-0 and 2-0", ids)
	}
	if _, err := s.Read(ctx, "r1", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, token("s1", "other-run", "x"), ""); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("append to a missing run: %v", err)
	}
}

func TestRetryWindow_DefaultsTo48s(t *testing.T) {
	opt, _ := goredis.ParseURL(srv.URL())
	c := goredis.NewClient(opt)
	defer c.Close()
	if got := retryWindow(c.Options()); got != 48*time.Second {
		t.Fatalf("reply cache TTL with go-redis defaults = %v, want 48s", got)
	}
	opt.MaxRetries, opt.ReadTimeout = -1, 100*time.Millisecond
	c2 := goredis.NewClient(opt)
	defer c2.Close()
	if got := retryWindow(c2.Options()); got != 10*time.Second {
		t.Fatalf("reply cache TTL without retries = %v, want the 10s floor", got)
	}
}
