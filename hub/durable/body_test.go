package durable_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
)

// Large bodies are read into pooled buffers: appends of 64 KiB to 1 MiB
// from eight writers at once, each writer's bytes its own, read back
// byte for byte from the embedded journal (a buffer handed back while the
// journal still used it would show another writer's bytes).
func TestLargeBodies_PooledBuffersKeepEachAppend(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	th, _ := serve(t, store, store.Streams(journal.StreamLimits{MaxStreamBytes: 1 << 30}), durable.Options{}, hub.Config{})
	base := th.URL + durable.Prefix
	sizes := []int{64 << 10, 200 << 10, 1 << 20, 64<<10 + 1}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			name := fmt.Sprint("big-", w)
			if a := do(t, http.MethodPut, base+name, "", map[string]string{"Content-Type": "application/octet-stream"}, ""); a.status != http.StatusCreated {
				t.Errorf("create %s: %d %s", name, a.status, a.body)
				return
			}
			for i, n := range sizes {
				data := bytes.Repeat([]byte{byte(w*16 + i)}, n)
				resp, err := http.Post(base+name, "application/octet-stream", bytes.NewReader(data))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
					t.Errorf("append %d to %s: %d", i, name, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range 8 {
		var got []byte
		for off := "-1"; ; {
			resp, err := http.Get(base + fmt.Sprint("big-", w) + "?offset=" + off)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = append(got, b...)
			off = resp.Header.Get("Stream-Next-Offset")
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Stream-Up-To-Date") == "true" || off == "" {
				break
			}
		}
		var want []byte
		for i, n := range sizes {
			want = append(want, bytes.Repeat([]byte{byte(w*16 + i)}, n)...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("stream big-%d reads %d bytes, not the %d its writer appended", w, len(got), len(want))
		}
	}
}
