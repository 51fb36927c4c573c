//go:build unix

package bolt_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// benchManyRuns is the shape of Centrifugo's workload in issue 25: 200 runs
// streaming tokens at once, each append keyed as the executor keys it.
const benchManyRuns = 200

// BenchmarkAppendManyRuns measures the journal's cost per token while 200
// runs append at once, each token keyed (the executor's appends) and
// acknowledged durable (fsync'd), as `hub serve` journals them. ns/op is
// wall time per token over all writers; cpu-µs/token is the process CPU
// per token, fsync amortisation included, which stays meaningful on a busy
// machine.
func BenchmarkAppendManyRuns(b *testing.B) {
	for _, c := range []struct {
		name string
		opts bolt.Options
	}{
		{"Sync", bolt.Options{}},
		{"NoSync", bolt.Options{NoSync: true}},
	} {
		b.Run(c.name, func(b *testing.B) { appendManyRuns(b, c.opts) })
	}
}

func appendManyRuns(b *testing.B, opts bolt.Options) {
	s := open(b, opts)
	events := make([]protocol.Envelope, benchManyRuns)
	for i := range events {
		sid, rid := fmt.Sprint("bench-s", i), fmt.Sprint("bench-r", i)
		begin(b, s, sid, rid)
		events[i] = protocol.Envelope{RunID: rid, SessionID: sid, Type: protocol.EventTokenDelta,
			Payload: []byte(`{"message_id":"msg-1","text":" the quick brown fox jumps"}`)}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	wall, cpu0 := time.Now(), processCPU()
	var wg sync.WaitGroup
	for i, e := range events {
		n := b.N / benchManyRuns
		if i < b.N%benchManyRuns {
			n++
		}
		wg.Go(func() {
			for k := range n {
				if _, err := s.Append(ctx, e, e.RunID+"/"+strconv.Itoa(k)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(wall).Seconds(), "tokens/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/token")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
