package durable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/npmtest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// runHub is a real core with the simulator, the HTTP API (its
// /v1/runs/{id}/events) and the edge on one server.
type runHub struct {
	th *hubtest.Hub
}

func newRunHub(t *testing.T) *runHub {
	t.Helper()
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), durable.Options{LongPollTimeout: shortPoll}, hub.Config{})
	return &runHub{th: th}
}

// start starts a simulated run of the open mode's subject and returns its
// id.
func (rh *runHub) start(t *testing.T, sim string) string {
	t.Helper()
	res, err := rh.th.Hub.Control(context.Background(), hub.OpenSubject, &protocol.Control{Op: protocol.OpStart, Message: "hello",
		Metadata: []byte(`{"sim":` + sim + `}`)}, "")
	if err != nil || res.RunID == "" {
		t.Fatalf("start: %+v, %v", res, err)
	}
	return res.RunID
}

// events is what GET /v1/runs/{id}/events returns, each event as JSON.
func (rh *runHub) events(t *testing.T, rid string) []any {
	t.Helper()
	resp, err := http.Get(rh.th.URL + "/v1/runs/" + rid + "/events?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Events []any `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %d %v", resp.StatusCode, err)
	}
	return page.Events
}

// clientRead is what web/durable-test/client.mjs printed.
type clientRead struct {
	Items  []any  `json:"items"`
	Offset string `json:"offset"`
	Closed bool   `json:"closed"`
}

func readWithClient(t *testing.T, node, dir, mode, url string) clientRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", mode, url)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs %s: %v\n%s", mode, err, tail(stderr.String(), 2000))
	}
	var got clientRead
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client.mjs printed %q: %v", tail(stdout.String(), 500), err)
	}
	return got
}

// The official client reads a finished run whole and tails a live one over
// SSE until the stream closes, with exactly the events of
// /v1/runs/{id}/events, the offset after the last its seq.
func TestOfficialClient(t *testing.T) {
	node, dir := npmtest.Install(t, "the Durable Streams client", "../../web/durable-test",
		"package.json", "package-lock.json", "client.mjs")
	t.Run("RunStream", func(t *testing.T) { runStreamWithClient(t, node, dir) })
	t.Run("IdempotentProducer", func(t *testing.T) { producerWithClient(t, node, dir) })
}

func runStreamWithClient(t *testing.T, node, dir string) {
	rh := newRunHub(t)

	done := rh.start(t, `{"tokens":5,"token_ms":1,"tools":1}`)
	hubtest.WaitTerminal(t, rh.th, done)
	whole := readWithClient(t, node, dir, "whole", rh.th.URL+"/v1/stream/runs/"+done)
	want := rh.events(t, done)
	if !reflect.DeepEqual(whole.Items, want) {
		t.Fatalf("the client read %d events, /v1/runs/{id}/events has %d:\n%v\nwant\n%v", len(whole.Items), len(want), whole.Items, want)
	}
	if !whole.Closed || whole.Offset != runOffset(len(want)) {
		t.Fatalf("finished run: closed %v, offset %s; want closed at %s", whole.Closed, whole.Offset, runOffset(len(want)))
	}

	live := rh.start(t, `{"tokens":40,"token_ms":20,"tools":1}`)
	tailed := readWithClient(t, node, dir, "tail", rh.th.URL+"/v1/stream/runs/"+live)
	want = rh.events(t, live)
	if !reflect.DeepEqual(tailed.Items, want) {
		t.Fatalf("the client tailed %d events, /v1/runs/{id}/events has %d", len(tailed.Items), len(want))
	}
	if !tailed.Closed || len(want) < 40 {
		t.Fatalf("live run: closed %v after %d events", tailed.Closed, len(want))
	}
}

func runOffset(seq int) string { return fmt.Sprintf("%016d_%016d", seq, seq) }

// The official client's IdempotentProducer (batches in flight at once)
// writes every item once, in order, and closes the stream.
func producerWithClient(t *testing.T, node, dir string) {
	rh := newRunHub(t)
	got := readWithClient(t, node, dir, "produce", rh.th.URL+"/v1/stream/produced")
	if len(got.Items) != 200 || !got.Closed {
		t.Fatalf("read back %d items, closed %v; want 200, closed", len(got.Items), got.Closed)
	}
	for i, it := range got.Items {
		if m, ok := it.(map[string]any); !ok || m["i"] != float64(i) {
			t.Fatalf("item %d is %v", i, it)
		}
	}
}

// A live run's stream tailed over long-poll, each read from the last
// answer's Stream-Next-Offset, gives every event of /v1/runs/{id}/events
// once and in order, the offset after each its seq, and ends with
// Stream-Closed once the terminal event is in.
func TestRunStream_LongPollTailsToTheClose(t *testing.T) {
	rh := newRunHub(t)
	rid := rh.start(t, `{"tokens":20,"token_ms":20,"tools":1}`)
	url := rh.th.URL + durable.Prefix + "runs/" + rid
	var got []protocol.Envelope
	var gotJSON []any
	offset, polls := "-1", 0
	for deadline := time.Now().Add(30 * time.Second); ; polls++ {
		if time.Now().After(deadline) {
			t.Fatalf("the run's stream did not close after %d polls (%d events)", polls, len(got))
		}
		a := do(t, "GET", url+"?live=long-poll&offset="+offset, "", nil, "")
		if a.status != 200 && a.status != 204 {
			t.Fatalf("poll %d: %d %s", polls, a.status, a.body)
		}
		if a.status == 200 {
			var evs []protocol.Envelope
			if err := json.Unmarshal([]byte(a.body), &evs); err != nil || len(evs) == 0 {
				t.Fatalf("poll %d: %q (%v)", polls, a.body, err)
			}
			var raw []any
			json.Unmarshal([]byte(a.body), &raw)
			got, gotJSON = append(got, evs...), append(gotJSON, raw...)
			if want := runOffset(int(evs[len(evs)-1].Seq)); a.header.Get("Stream-Next-Offset") != want {
				t.Fatalf("poll %d: Stream-Next-Offset %q after seq %d, want %q", polls, a.header.Get("Stream-Next-Offset"),
					evs[len(evs)-1].Seq, want)
			}
		}
		offset = a.header.Get("Stream-Next-Offset")
		if a.header.Get("Stream-Closed") == "true" {
			break
		}
		if a.header.Get("Stream-Cursor") == "" {
			t.Fatalf("poll %d of a live run: no Stream-Cursor (%v)", polls, a.header)
		}
	}
	want := rh.events(t, rid)
	if len(got) != len(want) || len(got) < 20 || !got[len(got)-1].Terminal {
		t.Fatalf("long-poll read %d events, /v1/runs/{id}/events has %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) || !reflect.DeepEqual(gotJSON[i], want[i]) {
			t.Fatalf("event %d: %v, want %v", i, gotJSON[i], want[i])
		}
	}
	if polls < 3 {
		t.Fatalf("the run was read in %d polls: not tailed live", polls+1)
	}
	began := time.Now()
	if a := do(t, "GET", url+"?live=long-poll&offset="+offset, "", nil, ""); a.status != 204 ||
		a.header.Get("Stream-Closed") != "true" || a.header.Get("Stream-Next-Offset") != offset || time.Since(began) > shortPoll/2 {
		t.Fatalf("a poll at the closed run's tail: %d %v after %v, want 204 closed at once", a.status, a.header, time.Since(began))
	}
}
