//go:build fault

package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// A hub child started with RUNHUB_TEST_FSIZE=<bytes> runs under that
// RLIMIT_FSIZE (SIGXFSZ ignored, so a write past it fails with EFBIG):
// the disk-full test's stand-in for a full filesystem where tmpfs cannot be
// mounted.
func init() {
	if os.Getenv("RUNHUB_TEST_AS_HUB") != "1" {
		return
	}
	if v := os.Getenv("RUNHUB_TEST_FSIZE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			panic(err)
		}
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: ^uint64(0)}); err != nil {
			panic(err)
		}
	}
}

// mountTmpfs mounts a tmpfs on dir with opts, unmounted when the test
// ends (after the processes it started are killed, since cleanups run in
// reverse). false when this process may not mount.
func mountTmpfs(t *testing.T, dir, opts string, flags uintptr) bool {
	t.Helper()
	if os.Getenv("RUNHUB_FAULT_NO_MOUNT") != "" {
		return false
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Logf("cannot mount a tmpfs (%v)", err)
		return false
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return true
}

func remount(t *testing.T, dir, opts string, flags uintptr) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|flags, opts); err != nil {
		t.Fatalf("remount %s %s: %v", dir, opts, err)
	}
}

// serveExit runs hub serve on data and returns its output once it exits
// (the test fails if it keeps running past 15 s or exits 0).
func serveExit(t *testing.T, data string) string {
	t.Helper()
	cmd := hubCmd([]string{"serve"}, "RUNHUB_ADDR="+freeAddr(t), "RUNHUB_DATA="+data)
	done := make(chan []byte, 1)
	go func() { out, _ := cmd.CombinedOutput(); done <- out }()
	select {
	case out := <-done:
		if cmd.ProcessState.ExitCode() == 0 {
			t.Fatalf("hub serve on %s exited 0:\n%s", data, out)
		}
		return string(out)
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("hub serve on %s kept running", data)
		return ""
	}
}

// A read-only data directory: hub serve exits at once with an error that
// names the directory and says it is not writable, both when the journal
// does not exist yet and when it does; once the directory is writable
// again the hub starts and the journal is intact.
func TestFault_ReadOnlyDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var readOnly, writable func()
	switch {
	case os.Geteuid() != 0:
		os.MkdirAll(dir, 0o755)
		readOnly = func() { os.Chmod(dir, 0o555) }
		writable = func() { os.Chmod(dir, 0o755) }
		t.Cleanup(writable)
	case mountTmpfs(t, dir, "size=16m", 0):
		readOnly = func() { remount(t, dir, "", syscall.MS_RDONLY) }
		writable = func() { remount(t, dir, "", 0) }
	default:
		t.Skip("root without the right to mount: a read-only directory cannot be made")
	}
	check := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, dir) || !strings.Contains(out, "is not writable") || !strings.Contains(out, "RUNHUB_DATA") {
			t.Fatalf("%s: the error does not say the data directory is not writable:\n%s", what, out)
		}
	}
	readOnly()
	check("an empty read-only directory", serveExit(t, dir))
	check("a read-only directory to create", serveExit(t, filepath.Join(dir, "sub")))

	writable()
	p := startHub(t, dir)
	run := startHTTP(t, p, `{"tokens":30,"token_ms":0,"tools":1}`)
	first := waitTerminal(t, p, run.RunID, 30*time.Second)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	readOnly()
	check("a read-only directory with a journal", serveExit(t, dir))
	writable()
	p = startHub(t, dir)
	sameEvents(t, "the journal after the read-only start", allEvents(t, p.URL(), run.RunID), first)
	checkDone(t, "the run before", first, 30)
}

// prlimitFsize sets a running process's RLIMIT_FSIZE soft limit.
func prlimitFsize(t *testing.T, pid int, n uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: n, Max: ^uint64(0)}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE),
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit: %v", errno)
	}
}

// checkJournal opens the embedded journal in data (the hub stopped) and
// fails the test unless every run of every session reads back whole: seqs
// 1…last without a gap, one terminal event and only as the last one for an
// ended run, none for a run still active. It returns the runs read.
func checkJournal(t *testing.T, data string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := bolt.Open(filepath.Join(data, "journal.db"), bolt.Options{})
	if err != nil {
		t.Fatalf("reopen the journal: %v", err)
	}
	defer store.Close()
	sessions, err := store.Sessions(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, s := range sessions {
		for _, rid := range s.Runs {
			meta, err := store.Run(ctx, rid)
			if err != nil {
				t.Fatalf("run %s of %s: %v", rid, s.ID, err)
			}
			var events []protocol.Envelope
			for after := uint64(0); ; {
				page, err := store.Read(ctx, rid, after, 1000)
				if err != nil {
					t.Fatalf("read %s: %v", rid, err)
				}
				events = append(events, page...)
				if len(page) < 1000 {
					break
				}
				after = page[len(page)-1].Seq
			}
			contiguous(t, "run "+rid, events, 1)
			if uint64(len(events)) != meta.LastSeq {
				t.Fatalf("run %s: %d events, meta last seq %d", rid, len(events), meta.LastSeq)
			}
			if k := terminals(events); meta.Terminal && (k != 1 || !events[len(events)-1].Terminal) || !meta.Terminal && k != 0 {
				t.Fatalf("run %s: %d terminal events, meta terminal %v", rid, k, meta.Terminal)
			}
			runs++
		}
	}
	return runs
}

// The embedded journal's disk fills up mid-run (a 1 MiB tmpfs, or where
// mounting is not allowed a 1 MiB RLIMIT_FSIZE): appends fail with "no
// space left on device" (or "file too large") in the log, /readyz says
// 503 "journal not writable", the runs already journaled stay readable and
// the hub stays up. When space returns the run ends with exactly one
// terminal error (the tab focused on it gets it), /readyz is 200, a new
// run completes, and the journal reopened after the hub stops reads back
// whole.
func TestFault_DiskFull(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	var env []string
	var grow func(p *hubProcess)
	noSpace := "no space left on device"
	if mountTmpfs(t, data, "size=1m", 0) {
		grow = func(*hubProcess) { remount(t, data, "size=64m", 0) }
	} else {
		t.Log("emulating a full disk with RLIMIT_FSIZE")
		os.MkdirAll(data, 0o755)
		env = append(env, "RUNHUB_TEST_FSIZE="+strconv.Itoa(1<<20))
		grow = func(p *hubProcess) { prlimitFsize(t, p.cmd.Process.Pid, ^uint64(0)) }
		noSpace = "file too large"
	}
	p := startHub(t, data, env...)
	before, beforeEvents, ta, big := runThenStream(t, p, `{"tokens":200000,"token_ms":0,"tools":0}`)
	waitFor(t, 60*time.Second, "the journal to fail with "+noSpace, func() bool { return strings.Contains(p.out.String(), noSpace) })
	waitFor(t, 10*time.Second, "/readyz 503", func() bool { return readyz(p) == 503 })
	code, body := httpBody(t, "GET", p.URL()+"/readyz", "")
	if code != 503 || !strings.Contains(string(body), "journal not writable") {
		t.Fatalf("/readyz with a full disk: %d %s", code, body)
	}
	healthy(t, p, 5*time.Second)
	sameEvents(t, "the earlier run while the disk is full", allEvents(t, p.URL(), before.RunID), beforeEvents)
	// A small write may still fit in pages the journal freed: either it
	// does or it fails cleanly, without the system's error.
	if code, body := httpBody(t, "POST", p.URL()+"/v1/sessions", `{"title":"x"}`); code != 201 && code < 500 || strings.Contains(string(body), noSpace) {
		t.Fatalf("creating a session with a full disk: %d %s", code, body)
	}
	st := runStatus(t, p, big.RunID)
	if st.Terminal {
		t.Fatalf("the run ended while the disk was full: %+v", st)
	}
	t.Logf("the disk filled at seq %d; the run is %s", st.LastSeq, st.Status)

	grow(p)
	waitFor(t, 30*time.Second, "/readyz 200 once space returns", func() bool { return readyz(p) == 200 })
	ta.until(60*time.Second, "the run's terminal event", func() bool { return endsWith(ta, big.RunID) })
	journal := allEvents(t, p.URL(), big.RunID)
	checkTerminal(t, "the run the full disk ended", journal, protocol.EventError)
	sameEvents(t, "the tab vs. the journal", ta.run(big.RunID), journal)
	// A run whose appends the journal refuses past the executor's retries
	// ends interrupted ("the journal was unavailable for longer than the
	// run could wait", protocol.md §3); a failure of another kind, internal.
	if ep := lastError(t, journal); ep.Code != protocol.ErrorInternal && ep.Code != protocol.ErrorInterrupted || strings.Contains(ep.Message, noSpace) {
		t.Fatalf("the run's terminal error: %+v", ep)
	}
	normalRun(t, p)
	noPanic(t, p)
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, tail(p.out.String(), 4000))
	}
	n := checkJournal(t, data)
	t.Logf("the journal reopened: %d runs read back whole", n)
	if n < 3 {
		t.Fatalf("%d runs in the journal, want at least 3", n)
	}
}
