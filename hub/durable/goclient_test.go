package durable_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/redis"
)

// goClient makes the requests the protocol's Go client
// (packages/client-go of durable-streams) makes, and reads the answers as
// it reads them. The Go module proxy does not serve that module (403 for
// it and for the repository's root module), so it cannot be a dependency;
// this is its calls, written from its source: Stream.Create, Stream.Head,
// Stream.Close, IdempotentProducer's batch send, and ChunkIterator in its
// three modes (catch-up, long-poll, SSE).
type goClient struct {
	url         string
	contentType string // cached by create, as Stream does
}

// create is Stream.Create: PUT with the content type, 201/200/204 success.
func (s *goClient) create(ctx context.Context, contentType string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, s.url, nil)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case 201, 200, 204:
		s.contentType = contentType
		return nil
	}
	return fmt.Errorf("create: status %d", resp.StatusCode)
}

// sent is what IdempotentProducer.doSendBatch makes of an answer.
type sent struct {
	status      int
	offset      string // 200
	duplicate   bool   // 204
	epoch       int    // 403: the server's epoch
	expectedSeq int    // 409
}

// sendBatch is IdempotentProducer.doSendBatch on a JSON stream: the batch
// always as one array, the producer's three headers.
func (s *goClient) sendBatch(ctx context.Context, producer string, epoch, seq int, values ...any) (sent, error) {
	raws := make([]json.RawMessage, len(values))
	for i, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			return sent{}, err
		}
		raws[i] = b
	}
	body, _ := json.Marshal(raws)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", s.contentType)
	req.Header.Set("Producer-Id", producer)
	req.Header.Set("Producer-Epoch", strconv.Itoa(epoch))
	req.Header.Set("Producer-Seq", strconv.Itoa(seq))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sent{}, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	r := sent{status: resp.StatusCode}
	switch resp.StatusCode {
	case 204:
		r.duplicate = true
	case 200:
		r.offset = resp.Header.Get("Stream-Next-Offset")
	case 403:
		r.epoch, _ = strconv.Atoi(resp.Header.Get("Producer-Epoch"))
	case 409:
		r.expectedSeq, _ = strconv.Atoi(resp.Header.Get("Producer-Expected-Seq"))
	}
	return r, nil
}

// close is Stream.Close without a final message.
func (s *goClient) close(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, nil)
	req.Header.Set("Stream-Closed", "true")
	if s.contentType != "" {
		req.Header.Set("Content-Type", s.contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 && resp.StatusCode != 204 {
		return "", fmt.Errorf("close: status %d", resp.StatusCode)
	}
	return resp.Header.Get("Stream-Next-Offset"), nil
}

type metadata struct {
	contentType, nextOffset string
	closed                  bool
}

// head is Stream.Head.
func (s *goClient) head(ctx context.Context) (metadata, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, s.url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return metadata{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return metadata{}, fmt.Errorf("head: status %d", resp.StatusCode)
	}
	return metadata{resp.Header.Get("Content-Type"), resp.Header.Get("Stream-Next-Offset"),
		resp.Header.Get("Stream-Closed") == "true"}, nil
}

// readURL is Stream.buildReadURL: the offset always (-1 from the start),
// live and cursor when set, in url.Values' (sorted) order.
func (s *goClient) readURL(offset, live, cursor string) string {
	u, _ := url.Parse(s.url)
	q := u.Query()
	q.Set("offset", offset)
	if live != "" {
		q.Set("live", live)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// chunk is the client's Chunk.
type chunk struct {
	data             []byte
	next, cursor     string
	upToDate, closed bool
	status           int
}

// errDone is the iterator's Done.
var errDone = errors.New("done")

// iterator is ChunkIterator: live "" (catch-up), "long-poll" or "sse".
type iterator struct {
	s              *goClient
	ctx            context.Context
	live           string
	offset, cursor string
	done           bool
	sseBody        io.ReadCloser
	sse            *bufio.Reader
	pending        *chunk
}

func (s *goClient) read(ctx context.Context, live string) *iterator {
	return &iterator{s: s, ctx: ctx, live: live, offset: "-1"}
}

func (it *iterator) close() {
	if it.sseBody != nil {
		it.sseBody.Close()
	}
}

func (it *iterator) next() (*chunk, error) {
	if it.done {
		return nil, errDone
	}
	if it.live == "sse" {
		return it.nextSSE()
	}
	req, _ := http.NewRequestWithContext(it.ctx, http.MethodGet, it.s.readURL(it.offset, it.live, it.cursor), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	c := &chunk{status: resp.StatusCode, next: resp.Header.Get("Stream-Next-Offset"),
		cursor: resp.Header.Get("Stream-Cursor"), upToDate: resp.Header.Get("Stream-Up-To-Date") == "true",
		closed: resp.Header.Get("Stream-Closed") == "true"}
	switch resp.StatusCode {
	case 200:
		if c.data, err = io.ReadAll(resp.Body); err != nil {
			return nil, err
		}
		it.offset, it.cursor = c.next, c.cursor
		if c.upToDate && it.live == "" {
			it.done = true
		}
		return c, nil
	case 204:
		if c.next != "" {
			it.offset = c.next
		}
		if c.cursor != "" {
			it.cursor = c.cursor
		}
		if it.live == "" {
			it.done = true
			return nil, errDone
		}
		return c, nil
	}
	b, _ := io.ReadAll(resp.Body)
	return nil, fmt.Errorf("read: status %d: %s", resp.StatusCode, b)
}

// nextSSE is ChunkIterator.nextSSE: data events gather until a control
// event gives their offset; a control event without data is a chunk only
// when it says up-to-date or closed; the connection's end reconnects from
// the last offset.
func (it *iterator) nextSSE() (*chunk, error) {
	for {
		if it.sse == nil {
			req, _ := http.NewRequestWithContext(it.ctx, http.MethodGet, it.s.readURL(it.offset, "sse", it.cursor), nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				resp.Body.Close()
				return nil, fmt.Errorf("sse: status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if enc := resp.Header.Get("Stream-SSE-Data-Encoding"); enc != "" {
				resp.Body.Close()
				return nil, fmt.Errorf("sse: a JSON stream came with encoding %q", enc)
			}
			it.sseBody, it.sse = resp.Body, bufio.NewReader(resp.Body)
		}
		kind, data, err := it.sseEvent()
		if err != nil {
			it.sseBody.Close()
			it.sse = nil
			if err == io.EOF && it.ctx.Err() == nil {
				continue
			}
			return nil, err
		}
		switch kind {
		case "data":
			if it.pending == nil {
				it.pending = &chunk{}
			}
			it.pending.data = append(it.pending.data, data...)
		case "control":
			var ctl struct {
				StreamNextOffset string `json:"streamNextOffset"`
				StreamCursor     string `json:"streamCursor"`
				UpToDate         bool   `json:"upToDate"`
				StreamClosed     bool   `json:"streamClosed"`
			}
			if err := json.Unmarshal([]byte(data), &ctl); err != nil {
				return nil, fmt.Errorf("sse: control event %q: %v", data, err)
			}
			it.offset = ctl.StreamNextOffset
			if ctl.StreamCursor != "" {
				it.cursor = ctl.StreamCursor
			}
			c := it.pending
			it.pending = nil
			if c == nil {
				if !ctl.UpToDate && !ctl.StreamClosed {
					continue
				}
				c = &chunk{}
			}
			c.next, c.cursor, c.upToDate, c.closed, c.status = ctl.StreamNextOffset, ctl.StreamCursor, ctl.UpToDate, ctl.StreamClosed, 200
			return c, nil
		}
	}
}

// sseEvent is the client's sse.Parser.Next: "event:" and "data:" lines
// (one optional space stripped, lines joined by "\n"), others ignored, a
// blank line ends an event; events without a type are skipped.
func (it *iterator) sseEvent() (kind, data string, err error) {
	var lines []string
	for {
		line, err := it.sse.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if kind == "" || (kind == "data" && len(lines) == 0) {
				kind, lines = "", nil
				continue
			}
			return kind, strings.Join(lines, "\n"), nil
		case strings.HasPrefix(line, "event:"):
			kind = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, strings.TrimPrefix(line[5:], " "))
		}
	}
}

// messages drains an iterator until the stream is closed and returns the
// JSON messages its chunks carried, in order (a chunk's data is one JSON
// array per response or SSE data event).
func messages(it *iterator) ([]string, string, error) {
	var out []string
	for {
		c, err := it.next()
		if err == errDone {
			return out, it.offset, nil
		}
		if err != nil {
			return out, it.offset, err
		}
		dec := json.NewDecoder(bytes.NewReader(c.data))
		for dec.More() {
			var arr []json.RawMessage
			if err := dec.Decode(&arr); err != nil {
				return out, it.offset, fmt.Errorf("chunk %q: %v", c.data, err)
			}
			for _, m := range arr {
				out = append(out, string(m))
			}
		}
		if c.closed {
			return out, c.next, nil
		}
	}
}

// The Go client's calls against runhub on Redis with two hubs: its
// idempotent producer appends through one (a retried batch answered as a
// duplicate, a batch ahead of its sequence refused with the expected
// one, a stale epoch fenced), and its iterator reads through the other,
// catch-up, long-poll and SSE, every message once and in order, to the
// close.
func TestGoClient_TwoHubsOnRedis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	replica := func() string {
		store, err := redis.Open(context.Background(), redis.Options{URL: rs.URL(), Prefix: "goclient:"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), edgeOptions(), hub.Config{})
		return th.URL + "/v1/stream/"
	}
	a, b := replica(), replica()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	writer := &goClient{url: a + "orders"}
	if err := writer.create(ctx, "application/json"); err != nil {
		t.Fatal(err)
	}
	reader := &goClient{url: b + "orders"}

	// Live readers on B, started before the first append.
	type result struct {
		msgs []string
		last string
		err  error
	}
	var wg sync.WaitGroup
	live := map[string]*result{"long-poll": {}, "sse": {}}
	for mode, r := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := reader.read(ctx, mode)
			defer it.close()
			r.msgs, r.last, r.err = messages(it)
		}()
	}
	time.Sleep(300 * time.Millisecond)

	msg := func(i int) map[string]any { return map[string]any{"order": i, "item": fmt.Sprintf("item-%d", i)} }
	step := func(name string, got sent, err error, want int) sent {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.status != want {
			t.Fatalf("%s: status %d, want %d (%+v)", name, got.status, want, got)
		}
		return got
	}
	r, err := writer.sendBatch(ctx, "p1", 0, 0, msg(0), msg(1))
	first := step("seq 0", r, err, 200)
	if first.offset == "" {
		t.Fatal("seq 0: no Stream-Next-Offset")
	}
	r, err = writer.sendBatch(ctx, "p1", 0, 1, msg(2))
	step("seq 1", r, err, 200)
	// The client's retry of a batch whose answer it lost.
	r, err = writer.sendBatch(ctx, "p1", 0, 1, msg(2))
	if step("seq 1 again", r, err, 204); !r.duplicate {
		t.Fatal("the retried batch is not a duplicate")
	}
	// A pipelined batch that overtook seq 2: the client waits for the
	// expected seq and sends again.
	r, err = writer.sendBatch(ctx, "p1", 0, 3, msg(4))
	if step("seq 3 early", r, err, 409); r.expectedSeq != 2 {
		t.Fatalf("Producer-Expected-Seq %d, want 2", r.expectedSeq)
	}
	r, err = writer.sendBatch(ctx, "p1", 0, 2, msg(3))
	step("seq 2", r, err, 200)
	r, err = writer.sendBatch(ctx, "p1", 0, 3, msg(4))
	step("seq 3", r, err, 200)
	// Restart: epoch 1 from seq 0; the old epoch is then fenced.
	r, err = writer.sendBatch(ctx, "p1", 1, 0, msg(5))
	step("epoch 1 seq 0", r, err, 200)
	r, err = writer.sendBatch(ctx, "p1", 0, 4, msg(99))
	if step("stale epoch", r, err, 403); r.epoch != 1 {
		t.Fatalf("403 names epoch %d, want 1", r.epoch)
	}
	final, err := writer.close(ctx)
	if err != nil || final == "" {
		t.Fatalf("close: %q %v", final, err)
	}

	want := make([]string, 6)
	for i := range want {
		b, _ := json.Marshal(msg(i))
		want[i] = string(b)
	}
	check := func(mode string, got []string, last string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s on B: %v", mode, err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s on B read\n%s\nwant\n%s", mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if last != final {
			t.Errorf("%s on B ended at offset %q, the close's is %q", mode, last, final)
		}
	}
	wg.Wait()
	for mode, r := range live {
		check(mode, r.msgs, r.last, r.err)
	}
	got, last, err := messages(reader.read(ctx, ""))
	check("catch-up", got, last, err)

	meta, err := reader.head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if meta.contentType != "application/json" || meta.nextOffset != final || !meta.closed {
		t.Errorf("head on B: %+v, want application/json at %q, closed", meta, final)
	}
}
