package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
)

func tiny() sizes {
	return sizes{Latency: 5, SmallIters: 2, SmallCount: 40, SmallConc: 7, SmallBytes: 100,
		LargeIters: 1, LargeCount: 6, LargeConc: 4, LargeBytes: 64 << 10, PollTimeout: 5 * time.Second}
}

// Every scenario runs against the hub's Durable Streams edge, and each
// figure is there: one latency per iteration, one rate per throughput
// iteration, each positive.
func TestRun_AgainstTheHub(t *testing.T) {
	store := mem.New(mem.Options{})
	t.Cleanup(func() { store.Close() })
	edge := durable.New(durable.Options{Streams: store.Streams(journal.StreamLimits{})})
	t.Cleanup(edge.Close)
	th := hubtest.Serve(t, hub.Config{}, hubtest.Options{Shared: store, Edges: []hub.Edge{edge}})
	sz := tiny()
	r, err := newClient(th.URL+"/v1/stream").run(context.Background(), sz)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.LatencyMS) != sz.Latency || len(r.SmallMsgPerS) != sz.SmallIters || len(r.LargeMsgPerS) != sz.LargeIters {
		t.Fatalf("figures: %+v", r)
	}
	for _, v := range append(append(r.LatencyMS, r.SmallMsgPerS...), r.LargeMsgPerS...) {
		if v <= 0 {
			t.Fatalf("a figure is %v: %+v", v, r)
		}
	}
	var buf bytes.Buffer
	writeTable(&buf, []round{{N: 1, Server: "runhub", Result: r}})
	if !strings.Contains(buf.String(), "| 1 | runhub |") || strings.Count(buf.String(), "\n") != 4 {
		t.Fatalf("table:\n%s", buf.String())
	}
}

// A server that acknowledges an append it then loses fails the run: the
// figures of a server that drops data are not figures.
func TestRun_LostAppendFails(t *testing.T) {
	var mu sync.Mutex
	streams := map[string][]byte{}
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodPut:
			streams[r.URL.Path] = nil
			w.WriteHeader(http.StatusCreated)
		case http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			posts++
			if posts != 30 { // the 30th append is acknowledged and lost
				streams[r.URL.Path] = append(streams[r.URL.Path], b...)
			}
			w.Header().Set("Stream-Next-Offset", strconv.Itoa(len(streams[r.URL.Path])))
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			w.Header().Set("Stream-Next-Offset", strconv.Itoa(len(streams[r.URL.Path])))
			w.Header().Set("Stream-Up-To-Date", "true")
			w.Write(streams[r.URL.Path])
		case http.MethodDelete:
			delete(streams, r.URL.Path)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	sz := tiny()
	sz.Latency = 0
	_, err := newClient(srv.URL+"/v1/stream").run(context.Background(), sz)
	if err == nil || !strings.Contains(err.Error(), "after 40 acknowledged appends") {
		t.Fatalf("a lost append: err %v", err)
	}
}

func TestQuantile(t *testing.T) {
	vs := []float64{5, 1, 4, 2, 3}
	for q, want := range map[float64]float64{0: 1, 0.5: 3, 0.99: 5, 1: 5} {
		if got := quantile(vs, q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if quantile(nil, 0.5) != 0 || mean(nil) != 0 || mean(vs) != 3 {
		t.Error("empty or mean")
	}
}
