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
	msgs, err := c.XRange(ctx, s.k.events(s.k.shardOf("s1"), "r1"), "-", "+").Result()
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
	feed, err := c.XRange(ctx, s.k.feed(s.k.shardOf("s1")), "-", "+").Result()
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
	if n, _ := c.HLen(ctx, s.k.idem(s.k.shardOf("s1"), "r1")).Result(); n != int64(keyed) {
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
	// A resend must find an open connection: a new one cannot say HELLO to
	// a busy server, and go-redis does not retry that.
	opt.MinIdleConns = 6
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	waitFor(t, 5*time.Second, "idle connections", func() bool { return c.PoolStats().IdleConns >= 6 })
	return c
}

// An append that times out is journaled when the server gets to it; the
// caller's retry with the same key returns that event instead of a second.
func TestAppend_KeyedRetryAfterTimeoutNeverDuplicates(t *testing.T) {
	s := openStore(t, Options{Client: timeoutClient(t, -1)})
	ctx := context.Background()
	mkRun(t, s, "s1", "r1")
	appendN(t, s, "s1", "r1", 2)
	wait := busy(t, time.Second)
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
		t.Fatalf("retry returned seq %d, want 3", stored)
	}
	// The first attempt ran when the server got to it (then the retry got
	// its event), or never reached it (then the retry stored its own).
	page, err := s.Read(ctx, "r1", 0, 10)
	if err != nil || len(page) != 3 {
		t.Fatalf("run holds %d events (%v), want 3", len(page), err)
	}
}

// A batch whose reply is lost is resent by go-redis as the same command:
// the batch's reply cache answers the resend with the first replies and
// journals nothing again, keyless appends included.
func TestAppend_ResentBatchNeverDuplicates(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	mkRun(t, s, "s1", "r1")
	mkRun(t, s, "s2", "r2")
	prep := func(e protocol.Envelope) protocol.Envelope {
		p, err := journal.Prepare(e, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	batch := []*appendReq{
		{e: prep(token("s1", "r1", "a"))},
		{e: prep(token("s1", "r1", "b"))},
		{e: prep(token("s2", "r2", "c")), key: "k"},
		{e: prep(done("s2", "r2"))},
		{e: prep(token("s2", "r2", "late"))},
		{e: prep(token("s1", "no-such-run", "x"))},
	}
	keys, args := s.appendCommand(batch)
	first, err := appendScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	resent, err := appendScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first) != fmt.Sprint(resent) {
		t.Fatalf("the resent batch was answered\n%v\nthe first time\n%v", resent, first)
	}
	want := "[[ok 1] [ok 2] [ok 1] [ok 2] [terminal 2 "
	if got := fmt.Sprint(first); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "[notfound]]") {
		t.Fatalf("replies %v, want %s… [notfound]]", got, want)
	}
	for rid, n := range map[string]uint64{"r1": 2, "r2": 2} {
		if m, _ := s.Run(ctx, rid); m.LastSeq != n {
			t.Fatalf("%s: last_seq %d after a resent batch, want %d", rid, m.LastSeq, n)
		}
	}
	// A new batch with the same events is new: it journals them.
	keys, args = s.appendCommand(batch[:1])
	if r, err := appendScript.Run(ctx, s.rdb, keys, args...).Slice(); err != nil || fmt.Sprint(r) != "[[ok 3]]" {
		t.Fatalf("a new batch: %v, %v; want [[ok 3]]", r, err)
	}
}

// An append whose reply is lost to go-redis's read timeout and resent is
// journaled once. Whether go-redis resends depends on timing (the server
// may leave its busy loop before the read timeout, or after go-redis gave
// up), so each try uses a fresh run and only a try that was resent and
// succeeded counts.
func TestAppend_TransportRetryNeverDuplicates(t *testing.T) {
	s := openStore(t, Options{Client: timeoutClient(t, 3)})
	c := admin(t)
	ctx := context.Background()
	for try := 0; ; try++ {
		sid, rid := fmt.Sprint("s", try), fmt.Sprint("r", try)
		mkRun(t, s, sid, rid)
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		wait := busy(t, 300*time.Millisecond)
		e, err := s.Append(ctx, token(sid, rid, "x"), "")
		wait()
		if err != nil || evalshaCalls(t, c) < 2 {
			if try == 10 {
				t.Fatalf("go-redis never resent an append in %d tries (last: %v)", try+1, err)
			}
			continue
		}
		if m, _ := s.Run(ctx, rid); e.Seq != 1 || m.LastSeq != 1 {
			t.Fatalf("an append resent by go-redis returned seq %d and left last_seq %d, want 1 and 1", e.Seq, m.LastSeq)
		}
		return
	}
}

// The keys of a journal are the documented layout (doc.go), and nothing
// else.
func TestKeyLayout(t *testing.T) {
	p := fmt.Sprintf("layout%d:", prefixes.Add(1))
	s := openStore(t, Options{Prefix: p, Shards: 1})
	b := p + "{s0}:" // the one shard's hash tag
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
		case strings.HasPrefix(k, b+"batch:"):
			if ttl, _ := c.TTL(ctx, k).Result(); ttl <= 0 || ttl > s.opts.ReplyCacheTTL {
				t.Errorf("reply cache %s has TTL %v", k, ttl)
			}
			continue
		case k == s.wakeKey(0):
			continue
		}
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{p + "loc:r1", b + "bus", b + "owner:alice", b + "run:r1", b + "run:r1:ev",
		b + "run:r1:idem", b + "runs:ended", b + "sess:s1", b + "sess:s1:runs"}
	if !slices.Equal(got, want) {
		t.Fatalf("keys\n%v\nwant\n%v", got, want)
	}
	if ids, _ := c.XRange(ctx, b+"run:r1:ev", "-", "+").Result(); len(ids) != 2 || ids[0].ID != "1-0" || ids[1].ID != "2-0" {
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
	if got := retryWindow(clientTimings(c)); got != 48*time.Second {
		t.Fatalf("reply cache TTL with go-redis defaults = %v, want 48s", got)
	}
	opt.MaxRetries, opt.ReadTimeout = -1, 100*time.Millisecond
	c2 := goredis.NewClient(opt)
	defer c2.Close()
	if got := retryWindow(clientTimings(c2)); got != 10*time.Second {
		t.Fatalf("reply cache TTL without retries = %v, want the 10s floor", got)
	}
}
