package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// -floor-journal's wiring: floorhub spawned as -floor spawns it, with
// FLOORHUB_JOURNAL set to the hub's data directory, journals a run's
// events in data/floor.log there.
func TestSpawnFloorJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns floorhub")
	}
	bin, err := hubBinary("", t.TempDir(), "./loadtest/floorhub")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := spawnEmbedded(bin, t.TempDir(), []string{"FLOORHUB_WRITE=raw"}, "FLOORHUB_JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.stop()
	h := cl.hubs[0]
	if h.data != filepath.Join(cl.dir, "hub1") {
		t.Fatalf("data directory %q", h.data)
	}
	post := func(path, body string, out any) {
		resp, err := http.Post("http://"+h.addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %s, %v", path, resp.Status, err)
		}
	}
	var sess struct {
		SessionID string `json:"session_id"`
	}
	post("/v1/sessions", `{}`, &sess)
	var run struct {
		RunID string `json:"run_id"`
	}
	post("/v1/sessions/"+sess.SessionID+"/runs", `{"metadata":{"sim":{"tokens":3,"token_ms":0}}}`, &run)
	path := filepath.Join(h.data, "floor.log")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if n := bytes.Count(b, []byte(`"run_id":"`+run.RunID+`"`)); n == 4 { // 3 tokens, done
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%s holds %d events of the run, want 4:\n%s", path, n, h.out.String())
		}
	}
}
