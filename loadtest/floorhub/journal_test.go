package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// record is submitter i's bytes: unique, of varied length, delimited.
func record(i int) []byte { return fmt.Appendf(nil, "<%d %s>", i, strings.Repeat("x", i%37)) }

// checkConcat fails unless file is records 0..n-1 back to back, each once,
// in some order.
func checkConcat(t *testing.T, file []byte, n int) {
	t.Helper()
	seen := map[string]bool{}
	for len(file) > 0 {
		i := bytes.IndexByte(file, '>')
		if i < 0 || file[0] != '<' {
			t.Fatalf("the journal holds something else: %.100q", file)
		}
		rec := string(file[:i+1])
		var k int
		if _, err := fmt.Sscanf(rec, "<%d ", &k); err != nil || k < 0 || k >= n || rec != string(record(k)) || seen[rec] {
			t.Fatalf("the journal holds %q: not one of the %d records, or twice", rec, n)
		}
		seen[rec] = true
		file = file[i+1:]
	}
	if len(seen) != n {
		t.Fatalf("the journal holds %d of the %d records", len(seen), n)
	}
}

func openTestJournal(t *testing.T) (*os.File, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return f, filepath.Join(dir, journalFile)
}

// Concurrent submitters are each answered once their bytes are in the
// file; the file is all of them back to back, nothing else; the commits
// are batched: no more fdatasyncs than submissions, and no submission
// without one.
func TestCommitterDurableBeforeAnswer(t *testing.T) {
	const n = 200
	f, path := openTestJournal(t)
	c := newCommitter(f)
	defer c.close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			rec := record(i)
			b := bytes.Clone(rec) // the producer's buffer, reused once answered
			if err := c.submit(b, make(chan error, 1)); err != nil {
				errs <- err
				return
			}
			clear(b)
			file, err := os.ReadFile(path)
			if err != nil {
				errs <- err
			} else if !bytes.Contains(file, rec) {
				errs <- fmt.Errorf("%s answered before the file held it", rec)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	closeAndCheck(t, c, path, n)
	if s := c.syncs.Load(); s < 1 || s > n {
		t.Fatalf("%d fdatasyncs for %d submissions", s, n)
	}
	t.Logf("%d submissions, %d fdatasyncs", n, c.syncs.Load())
}

// A batch is the request taken and every one queued behind it, at most max:
// with the first commit held until the other n-1 are queued, they go in
// ceil((n-1)/max) more commits, one write and one fdatasync each.
func TestCommitterGroupCommit(t *testing.T) {
	const n, max = 10, 4
	f, path := openTestJournal(t)
	c := &committer{f: f, reqs: make(chan commitReq, maxBatch), max: max, log: os.Stderr}
	var calls int
	var sizes []int // the file's size at each fdatasync
	c.sync = func(f *os.File) error {
		calls++
		if calls == 1 {
			for deadline := time.Now().Add(10 * time.Second); len(c.reqs) < n-1; {
				if time.Now().After(deadline) {
					return errors.New("the submitters did not queue")
				}
				time.Sleep(time.Millisecond)
			}
		}
		st, err := f.Stat()
		if err != nil {
			return err
		}
		sizes = append(sizes, int(st.Size()))
		return fdatasync(f)
	}
	c.start()
	defer c.close()
	first := make(chan error, 1)
	go func() { first <- c.submit(record(0), make(chan error, 1)) }()
	for c.syncs.Load() == 0 { // the first batch is being committed, alone
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() {
			if err := c.submit(record(i), make(chan error, 1)); err != nil {
				t.Error(err)
			}
		})
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	file := closeAndCheck(t, c, path, n)
	if want := 1 + (n-1+max-1)/max; calls != want || c.syncs.Load() != int64(want) {
		t.Fatalf("%d fdatasyncs (%d counted), want %d: file sizes at each %v", calls, c.syncs.Load(), want, sizes)
	}
	// Batches of 1, then max, max, the rest: one write each.
	if want := []int{len(record(0))}; len(sizes) < 2 || sizes[0] != want[0] || sizes[len(sizes)-1] != len(file) {
		t.Fatalf("file sizes at each fdatasync %v", sizes)
	}
}

// A failed fdatasync answers every request of the batch with the error and
// is told once.
func TestCommitterFailure(t *testing.T) {
	f, _ := openTestJournal(t)
	var log bytes.Buffer
	c := &committer{f: f, reqs: make(chan commitReq, maxBatch), max: maxBatch, log: &log,
		sync: func(*os.File) error { return errors.New("disk on fire") }}
	c.start()
	done := make(chan error, 1)
	for i := range 3 {
		if err := c.submit(record(i), done); err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	c.close()
	if strings.Count(log.String(), "\n") != 1 || !strings.Contains(log.String(), "disk on fire") {
		t.Fatalf("told %q", log.String())
	}
}

// An event whose commit fails is not sent; the run goes on to its end and
// its status.
func TestJournalFailureSkipsEvents(t *testing.T) {
	f, err := newFloor(writeRaw, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.journal.log = &bytes.Buffer{}
	f.journal.sync = func(*os.File) error { return errors.New("disk on fire") } // before any submission
	hs := httptest.NewServer(f.routes())
	defer hs.Close()
	defer f.stop()
	srv := hs.URL
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sess struct {
		SessionID string `json:"session_id"`
	}
	post(t, srv+"/v1/sessions", `{"title":"t"}`, &sess)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv, "http")+"/v1/ws",
		&websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, v := range []any{
		protocol.Hello{Type: protocol.MsgHello},
		protocol.Watch{Type: protocol.MsgWatch, Sessions: []string{sess.SessionID}},
		protocol.Focus{Type: protocol.MsgFocus, SessionID: &sess.SessionID},
	} {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	for { // focused and watching once replayed is back
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"type":"replayed"`)) {
			break
		}
	}
	var run struct {
		RunID string `json:"run_id"`
	}
	post(t, srv+"/v1/sessions/"+sess.SessionID+"/runs", `{"message":"m","metadata":{"sim":{"tokens":5,"token_ms":1}}}`, &run)
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Type    string `json:"type"`
			Session struct {
				RunID   string `json:"run_id"`
				LastSeq uint64 `json:"last_seq"`
			} `json:"session"`
		}
		json.Unmarshal(b, &m)
		switch m.Type {
		case protocol.MsgEvent:
			t.Fatalf("an event not journaled was sent: %s", b)
		case protocol.MsgStatus:
			if m.Session.RunID != run.RunID || m.Session.LastSeq != 6 {
				t.Fatalf("status %s", b)
			}
			return
		}
	}
}

// closeAndCheck stops c, checks that its file is the n records and
// returns it.
func closeAndCheck(t *testing.T, c *committer, path string, n int) []byte {
	t.Helper()
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkConcat(t, file, n)
	return file
}
