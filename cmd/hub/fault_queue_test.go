//go:build fault

package main

import (
	"fmt"
	"testing"
)

// The queue hand-off under crashes (docs/security.md): the process that
// executes a session's runs is SIGKILLed at every point between a run's
// terminal event and the run.started of the message queued behind it — a
// hub on the embedded journal (restarted on the same data directory), a
// hub executing its runs on Redis and a runner (each replaced by a new
// one). Every queued message that was answered 200 starts exactly once,
// in order.
func TestFault_QueueCrash(t *testing.T) {
	for _, d := range []struct {
		name string
		new  func() queueCrash
	}{{"embedded", embeddedQueueCrash}, {"redis", redisQueueCrash}, {"runners", runnersQueueCrash}} {
		for _, point := range queueCrashPoints {
			t.Run(fmt.Sprintf("%s/%d", d.name, point), func(t *testing.T) { testQueueCrash(t, d.new(), point) })
		}
	}
}
