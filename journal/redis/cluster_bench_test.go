package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// topologies are the deployments the benchmarks compare: one Redis, a
// Cluster, and a Cluster whose batches wait for one replica.
var topologies = []struct {
	name string
	url  func(testing.TB) string
	wait int
}{
	{"single", single, 0},
	{"cluster", clusterURL, 0},
	{"cluster-wait=1", clusterURL, 1},
}

// BenchmarkTopology compares one Redis with a Redis Cluster of 3 masters
// (and 3 replicas), on the same machine: 100 runs of 100 sessions (spread
// over the shards), one writer goroutine per run appending b.N events in
// all, each run subscribed on the Store (run tail) and the Store's feed
// subscribed too. It reports appends/s (until the last Append returns) and
// delivered/s (run-tail deliveries, until the last one arrives); with
// wait=1 every batch also waits for one replica (WaitReplicas).
func BenchmarkTopology(b *testing.B) {
	for _, tc := range topologies {
		b.Run(tc.name, func(b *testing.B) {
			s := openStore(b, Options{URL: tc.url(b), WaitReplicas: tc.wait})
			const runs = 100
			var delivered, fed atomic.Int64
			for i := range runs {
				mkRun(b, s, fmt.Sprint("s", i), fmt.Sprint("r", i))
				b.Cleanup(s.SubscribeRun(fmt.Sprint("r", i), func(protocol.Envelope) { delivered.Add(1) }))
			}
			b.Cleanup(s.SubscribeFeed(func(e protocol.Envelope) {
				if e.RunID != "" {
					fed.Add(1)
				}
			}))
			b.ResetTimer()
			start := time.Now()
			appendAcross(b, s, runs)
			appended := time.Since(start)
			for delivered.Load() < int64(b.N) || fed.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			all := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/appended.Seconds(), "appends/s")
			b.ReportMetric(float64(b.N)/all.Seconds(), "delivered/s")
		})
	}
}

// BenchmarkTopologyLoneAppend is one writer appending to one run, each
// append waiting for its reply: the latency of an append on one Redis, on
// a Cluster, and on a Cluster with WaitReplicas 1 (a replica round trip
// more).
func BenchmarkTopologyLoneAppend(b *testing.B) {
	for _, tc := range topologies {
		b.Run(tc.name, func(b *testing.B) {
			s := openStore(b, Options{URL: tc.url(b), WaitReplicas: tc.wait})
			mkRun(b, s, "s1", "r1")
			ctx := context.Background()
			e := token("s1", "r1", " the quick brown fox jumps")
			for b.Loop() {
				if _, err := s.Append(ctx, e, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
