package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/protocol"
)

// commandUsec returns the server's total microseconds spent in cmd since
// the last CONFIG RESETSTAT, and its calls.
func commandUsec(b *testing.B, c *goredis.Client, cmd string) (usec float64, calls int) {
	v := infoField(b, c, "commandstats", "cmdstat_"+cmd)
	for kv := range strings.SplitSeq(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "calls":
			calls, _ = strconv.Atoi(val)
		case "usec":
			usec, _ = strconv.ParseFloat(val, 64)
		}
	}
	return usec, calls
}

// serverCPU returns the server's user+sys CPU seconds.
func serverCPU(b *testing.B, c *goredis.Client) float64 {
	u, _ := strconv.ParseFloat(infoField(b, c, "cpu", "used_cpu_user"), 64)
	s, _ := strconv.ParseFloat(infoField(b, c, "cpu", "used_cpu_sys"), 64)
	return u + s
}

// BenchmarkAppendLoad is Append100Runs with the server's side of it:
// appends per script run (batch size), server CPU per event and the memory
// the batch reply caches hold at the end.
func BenchmarkAppendLoad(b *testing.B) {
	s := openStore(b, Options{})
	c := admin(b)
	ctx := context.Background()
	const runs = 100
	for i := range runs {
		mkRun(b, s, fmt.Sprint("s", i), fmt.Sprint("r", i))
	}
	c.ConfigResetStat(ctx)
	mem0, _ := strconv.ParseFloat(infoField(b, c, "memory", "used_memory"), 64)
	cpu0 := serverCPU(b, c)
	b.ResetTimer()
	start := time.Now()
	appendAcross(b, s, runs)
	b.StopTimer()
	elapsed := time.Since(start)
	_, scripts := commandUsec(b, c, "evalsha")
	mem1, _ := strconv.ParseFloat(infoField(b, c, "memory", "used_memory"), 64)
	caches, _ := c.Keys(ctx, s.opts.Prefix+"batch:*").Result()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/float64(max(scripts, 1)), "events/batch")
	b.ReportMetric((serverCPU(b, c)-cpu0)*1e6/float64(b.N), "redis-µs/event")
	b.ReportMetric(float64(len(caches)), "reply-caches")
	b.ReportMetric((mem1-mem0)/float64(b.N), "redis-B/event")
}

// BenchmarkRunTailFanout measures the multiplexed run tail: subs runs are
// subscribed on one Store, one writer per run appends, and each event is
// delivered once. It reports the server CPU the XREADs cost per delivered
// event and the XREAD calls per event.
func BenchmarkRunTailFanout(b *testing.B) {
	for _, subs := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint("runs=", subs), func(b *testing.B) {
			s := openStore(b, Options{})
			c := admin(b)
			ctx := context.Background()
			var delivered atomic.Int64
			for i := range subs {
				mkRun(b, s, fmt.Sprint("s", i), fmt.Sprint("r", i))
				cancel := s.SubscribeRun(fmt.Sprint("r", i), func(e protocol.Envelope) { delivered.Add(1) })
				b.Cleanup(cancel)
			}
			writers := min(subs, 100)
			c.ConfigResetStat(ctx)
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
						i := (int(n)*writers + w) % subs
						if _, err := s.Append(ctx, token(fmt.Sprint("s", i), fmt.Sprint("r", i), "x"), ""); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			for delivered.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			usec, calls := commandUsec(b, c, "xread")
			b.ReportMetric(usec/float64(b.N), "xread-µs/event")
			b.ReportMetric(float64(calls)/float64(b.N), "xreads/event")
		})
	}
}

// appendAcross appends b.N token deltas in all to runs r0…r<runs-1> (of
// sessions s0…), one writer goroutine per run, and returns when all are
// appended.
func appendAcross(b *testing.B, s *Store, runs int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			sid, rid := fmt.Sprint("s", i), fmt.Sprint("r", i)
			for next.Add(1) <= int64(b.N) {
				if _, err := s.Append(ctx, token(sid, rid, " the quick brown fox jumps"), ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
