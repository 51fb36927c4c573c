//go:build fault

package bolt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// The durability of durable streams in the embedded journal, with the
// process killed (SIGKILL) while it appends (IMPLEMENTATION_TESTING.md's
// crash checks). The test binary doubles as the writer: started with
// RUNHUB_TEST_DS_CHILD=<journal path> it appends, as an idempotent
// producer, "[0]", "[1]", ... to the stream "fault" and token events to a
// run, printing each append once it is acknowledged, until it is killed.
func init() {
	path := os.Getenv("RUNHUB_TEST_DS_CHILD")
	if path == "" {
		return
	}
	os.Exit(streamChild(path))
}

func streamChild(path string) int {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	ctx := context.Background()
	ss := s.Streams(journal.StreamLimits{})
	if _, _, err := ss.CreateStream(ctx, "fault", journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
		fmt.Println("create:", err)
		return 1
	}
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: "fs", Owner: "o"}); err != nil {
		fmt.Println("session:", err)
		return 1
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: "fr", SessionID: "fs"}); err != nil {
		fmt.Println("run:", err)
		return 1
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	go func() {
		for i := 1; ; i++ {
			e, err := protocol.NewEvent("fr", "fs", protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: "t" + strconv.Itoa(i)})
			if err == nil {
				_, err = s.Append(ctx, e, "fr/"+strconv.Itoa(i))
			}
			if err != nil {
				say("error %v", err)
				return
			}
			say("e %d", i)
		}
	}()
	for seq := uint64(0); ; seq++ {
		_, err := ss.AppendStream(ctx, "fault", journal.StreamAppend{ContentType: "text/plain",
			Data: []byte(fmt.Sprintf("[%d]", seq)), Producer: &journal.ProducerTuple{ID: "p", Seq: seq}})
		if err != nil {
			say("error %v", err)
			return 1
		}
		say("s %d", seq)
	}
}

// faultState is what a recovered journal holds of the writer's work.
type faultState struct {
	Stream  string
	Records uint64
	LastSeq uint64 // the producer's
	Events  int
	Segs    map[string]int64 // segment file sizes
}

func readFaultState(t *testing.T, path string) faultState {
	t.Helper()
	s := mustOpen(t, path, Options{})
	defer s.Close()
	ctx := context.Background()
	ss := s.Streams(journal.StreamLimits{})
	var st faultState
	var m journal.StreamMeta
	st.Stream, m = streamText(t, ss)
	st.Records = m.Records
	if p := m.Producers["p"]; p != nil {
		st.LastSeq = p.LastSeq
	}
	evs, err := s.Read(ctx, "fr", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		var p protocol.TokenDeltaPayload
		if e.Seq != uint64(i+1) || json.Unmarshal(e.Payload, &p) != nil || p.Text != "t"+strconv.Itoa(i+1) {
			t.Fatalf("run event %d: seq %d %s", i, e.Seq, e.Payload)
		}
	}
	st.Events = len(evs)
	st.Segs = map[string]int64{}
	for _, f := range segFiles(t, path) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		st.Segs[f] = fi.Size()
	}
	return st
}

// streamText is the stream "fault" whole, and its meta.
func streamText(t *testing.T, ss journal.Streams) (string, journal.StreamMeta) {
	t.Helper()
	var b bytes.Buffer
	var after uint64
	for {
		r, err := ss.ReadStream(context.Background(), "fault", after, 0, false)
		if err != nil {
			t.Fatalf("read the stream: %v", err)
		}
		if len(r.Records) == 0 {
			return b.String(), r.Meta
		}
		for _, rec := range r.Records {
			b.Write(rec.Data)
			after = rec.Index
		}
	}
}

// expected is the stream of seqs 0..n.
func expected(n uint64) string {
	var b strings.Builder
	for i := uint64(0); i <= n; i++ {
		fmt.Fprintf(&b, "[%d]", i)
	}
	return b.String()
}

// SIGKILL during appends loses no acknowledged append; a torn write at the
// segment log's end is cut back to the last whole record; recovery is
// idempotent over five restarts; a producer's retry after the crash is a
// duplicate, never appended twice.
func TestFaultStreams_KillTornRecoverRetry(t *testing.T) {
	path := t.TempDir() + "/journal.db"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RUNHUB_TEST_DS_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ackedS, ackedE := int64(-1), 0
	deadline := time.Now().Add(30 * time.Second)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || (f[0] != "s" && f[0] != "e") {
			t.Fatalf("the writer said %q", sc.Text())
		}
		n, _ := strconv.Atoi(f[1])
		if f[0] == "s" {
			ackedS = int64(n)
		} else {
			ackedE = n
		}
		if (ackedS >= 300 && ackedE >= 300) || time.Now().After(deadline) {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if ackedS < 50 || ackedE < 50 {
		t.Fatalf("the writer acknowledged only %d stream appends and %d events before the kill", ackedS+1, ackedE)
	}

	// A torn write: half of a record after the log's last whole one.
	segs := segFiles(t, path)
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	// The kill may have torn the last write already: the whole records
	// end at size.
	// The half written is of the last stream record there.
	size, lastStart, lastEnd := 0, -1, 0
	for size < len(b) {
		body, n, ok := frame(b[size:])
		if !ok {
			break
		}
		if body[0] == recStream {
			lastStart, lastEnd = size, size+n
		}
		size += n
	}
	if lastStart < 0 {
		t.Fatal("the last segment holds no whole stream record")
	}
	rec := b[lastStart:lastEnd]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(rec[:len(rec)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	first := readFaultState(t, path)
	if first.Segs[last] != int64(size) {
		t.Fatalf("the torn tail was not cut back: %s is %d bytes, its whole records %d", last, first.Segs[last], size)
	}
	if first.Records < uint64(ackedS+1) || first.LastSeq+1 != first.Records || first.Stream != expected(first.LastSeq) {
		t.Fatalf("after the kill the stream holds %d records (producer at %d), %q…; %d were acknowledged",
			first.Records, first.LastSeq, truncateStr(first.Stream, 80), ackedS+1)
	}
	if first.Events < ackedE {
		t.Fatalf("after the kill the run holds %d events; %d were acknowledged", first.Events, ackedE)
	}
	for i := range 5 {
		again := readFaultState(t, path)
		if again.Stream != first.Stream || again.Records != first.Records || again.LastSeq != first.LastSeq ||
			again.Events != first.Events || fmt.Sprint(again.Segs) != fmt.Sprint(first.Segs) {
			t.Fatalf("restart %d recovered something else: %+v, first %+v", i+2, again, first)
		}
	}

	// The producer retries everything from 0, and one more.
	s := mustOpen(t, path, Options{})
	defer s.Close()
	ss := s.Streams(journal.StreamLimits{})
	for seq := uint64(0); seq <= first.LastSeq+1; seq++ {
		res, err := ss.AppendStream(context.Background(), "fault", journal.StreamAppend{ContentType: "text/plain",
			Data: []byte(fmt.Sprintf("[%d]", seq)), Producer: &journal.ProducerTuple{ID: "p", Seq: seq}})
		if err != nil {
			t.Fatalf("retry of seq %d: %v", seq, err)
		}
		if res.Duplicate != (seq <= first.LastSeq) {
			t.Fatalf("retry of seq %d after the crash: duplicate %v (the producer was at %d)", seq, res.Duplicate, first.LastSeq)
		}
	}
	if got, _ := streamText(t, ss); got != expected(first.LastSeq+1) {
		t.Fatalf("after the retries the stream is %q…, want each seq once", truncateStr(got, 120))
	}
}

func truncateStr(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
