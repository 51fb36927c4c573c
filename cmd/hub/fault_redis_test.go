//go:build fault

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// Redis unavailable at start: hub serve (runners mode) and hub runner both
// wait for it, saying so in their logs, while the hub's /healthz is 200,
// its /readyz 503 "redis unreachable" and its API 503 unavailable; once
// Redis is up they start, and a run executes in the runner and streams to
// a tab. A process stopped while it waits exits cleanly; a Redis that
// refuses the credentials ends the process at once with that error.
func TestFault_RedisDownAtStart(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	rs.Stop()
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s", "RUNHUB_RUNTIME=runners"}
	p := startHub(t, t.TempDir(), env...)
	r := startRunner(t, env...)
	waitFor(t, 10*time.Second, "the hub and the runner to log the outage", func() bool {
		return strings.Contains(p.out.String(), "redis unreachable at start; retrying") &&
			strings.Contains(r.out.String(), "redis unreachable at start; retrying")
	})
	code, body := httpBody(t, "GET", p.URL()+"/readyz", "")
	if code != 503 || !strings.Contains(string(body), "redis unreachable") {
		t.Fatalf("/readyz while Redis is down: %d %s", code, body)
	}
	code, body = httpBody(t, "POST", p.URL()+"/v1/sessions", `{"title":"x"}`)
	if code != 503 || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("the API while Redis is down: %d %s", code, body)
	}
	time.Sleep(time.Second) // a few more attempts
	if p.exited() || r.exited() {
		t.Fatal("a process exited while Redis was down")
	}

	rs.Restart(t)
	waitFor(t, 20*time.Second, "/readyz 200 once Redis is up", func() bool { return readyz(p) == 200 })
	waitFor(t, 20*time.Second, "the runner to start", func() bool { return strings.Contains(r.out.String(), "runhub runner started") })
	normalRun(t, p)

	// Stopped while waiting: a clean exit.
	rs.Stop()
	q := startHub(t, t.TempDir(), env...)
	waitFor(t, 10*time.Second, "the second hub to wait", func() bool { return strings.Contains(q.out.String(), "redis unreachable at start") })
	if err := q.term(10 * time.Second); err != nil {
		t.Fatalf("a hub stopped while waiting for Redis: %v\n%s", err, q.out.String())
	}

	// Refused: exit at once with the reason.
	// (Redis answers AUTH of a user it does not know with WRONGPASS.)
	rs.Restart(t)
	u := strings.Replace(rs.URL(), "unix://", "unix://nobody:wrong-password@", 1)
	cmd := hubCmd([]string{"serve"}, "RUNHUB_REDIS_URL="+u, "RUNHUB_ADDR="+freeAddr(t), "RUNHUB_DATA="+t.TempDir())
	done := make(chan []byte, 1)
	start := time.Now()
	go func() { out, _ := cmd.CombinedOutput(); done <- out }()
	select {
	case out := <-done:
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "refused the connection") ||
			strings.Contains(string(out), "wrong-password") {
			t.Fatalf("hub serve with a wrong Redis password: exit %d after %v:\n%s", cmd.ProcessState.ExitCode(), time.Since(start), out)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("hub serve with a wrong Redis password did not exit")
	}
}

// Redis killed (SIGKILL, AOF with fsync always) in the middle of a run
// and started again 6 s later: no journaled event is lost or duplicated,
// the run completes, the focused tab gets every event once, and /readyz
// is 503 while Redis is away.
func TestFault_RedisKilledMidRun(t *testing.T) {
	redisOutageMidRun(t, (*redistest.Server).Kill)
}

// Redis refuses writes in the middle of a run (maxmemory reached under
// noeviction: every write answers -OOM, as Redis answers -MISCONF when it
// cannot persist) on a hub with the Redis journal executing its runs
// in-process. The failures are logged, /readyz says 503 "journal not
// writable", the hub stays up and what was journaled stays readable. Held
// past the append retry (the lease TTL), the executor gives the run up and
// keeps trying its terminal event. Once Redis takes writes again /readyz
// is 200, the run ends with exactly one
// terminal error (no Redis text in it) that the focused tab gets as the
// journal has it, nothing journaled is lost or duplicated, and a new run
// completes.
func TestFault_RedisRefusesWrites(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: rs.Socket(), ClientName: "test"})
	defer rdb.Close()
	ctx := context.Background()
	p := startHub(t, t.TempDir(), "RUNHUB_REDIS_URL="+rs.URL(), "RUNHUB_RUNTIME=inprocess", "RUNHUB_LEASE_TTL=3s")
	before, beforeEvents, ta, big := runThenStream(t, p, `{"tokens":200000,"token_ms":2,"tools":0}`)
	ta.until(20*time.Second, "100 tokens", func() bool { return count(ta.run(big.RunID), protocol.EventTokenDelta) >= 100 })
	// One byte: whatever Redis holds already is over it, so every write is
	// refused from now on; reads go on.
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the hub to log Redis refusing a write", func() bool { return strings.Contains(p.out.String(), "OOM") })
	waitFor(t, 10*time.Second, "/readyz 503", func() bool { return readyz(p) == 503 })
	if code, body := httpBody(t, "GET", p.URL()+"/readyz", ""); code != 503 || !strings.Contains(string(body), "journal not writable") {
		t.Fatalf("/readyz while Redis refuses writes: %d %s", code, body)
	}
	healthy(t, p, 5*time.Second)
	sameEvents(t, "the earlier run while Redis refuses writes", allEvents(t, p.URL(), before.RunID), beforeEvents)
	if code, body := httpBody(t, "POST", p.URL()+"/v1/sessions", `{"title":"x"}`); code < 500 || strings.Contains(string(body), "OOM") {
		t.Fatalf("creating a session while Redis refuses writes: %d %s", code, body)
	}
	st := runStatus(t, p, big.RunID)
	if st.Terminal {
		t.Fatalf("the run ended while Redis refused writes: %+v", st)
	}
	t.Logf("Redis refused writes from seq %d; the run is %s", st.LastSeq, st.Status)
	// Appends are retried for the lease TTL (3 s): a shorter refusal is
	// ridden out. Hold it until the executor has given the run up.
	waitFor(t, 30*time.Second, "the executor to give the run up", func() bool {
		return strings.Contains(p.out.String(), "terminal event not journaled; retrying until the journal takes it")
	})

	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "/readyz 200 once Redis takes writes", func() bool { return readyz(p) == 200 })
	ta.until(60*time.Second, "the run's terminal event", func() bool { return endsWith(ta, big.RunID) })
	events := allEvents(t, p.URL(), big.RunID)
	checkTerminal(t, "the run Redis refused", events, protocol.EventError)
	sameEvents(t, "the tab vs. the journal", ta.run(big.RunID), events)
	if ep := lastError(t, events); ep.Code != protocol.ErrorInternal && ep.Code != protocol.ErrorInterrupted || strings.Contains(ep.Message, "OOM") {
		t.Fatalf("the run's terminal error: %+v", ep)
	}
	normalRun(t, p)
	noPanic(t, p)
}
