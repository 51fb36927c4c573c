package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hermesFeatures018 are the features Hermes Agent 0.18.x reports on GET
// /v1/capabilities (gateway/platforms/api_server.py, _handle_capabilities).
func hermesFeatures018() map[string]any {
	return map[string]any{
		"chat_completions": true, "chat_completions_streaming": true, "responses_api": true, "responses_streaming": true,
		"run_submission": true, "run_status": true, "run_events_sse": true, "run_stop": true,
		"run_approval_response": true, "tool_progress_events": true, "approval_events": true,
		"session_resources": true, "session_chat": true, "session_chat_streaming": true, "session_fork": true,
		"admin_config_rw": false, "jobs_admin": false, "memory_write_api": false, "skills_api": true,
		"audio_api": false, "realtime_voice": false,
		"session_continuity_header": "X-Hermes-Session-Id", "session_key_header": "X-Hermes-Session-Key", "cors": false,
	}
}

// serveHermesCapabilities answers GET /v1/capabilities on mux as Hermes
// 0.18.x does, behind its bearer key; features (nil: 0.18.x's) is asked
// at each request, so a test may change what the server reports.
func serveHermesCapabilities(mux *http.ServeMux, key string, features func() map[string]any) {
	mux.HandleFunc("GET /v1/capabilities", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Invalid API key","code":"invalid_api_key"}}`))
			return
		}
		f := hermesFeatures018()
		if features != nil {
			f = features()
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "hermes.api_server.capabilities", "platform": "hermes-agent",
			"model": "hermes-agent", "auth": map[string]any{"type": "bearer", "required": true}, "features": f})
	})
}

// GET /v1/profiles on a Hermes profile says what its server reports on
// GET /v1/capabilities, and changes with it: 0.18.x's features give
// cancel, approval, queue, reasoning, usage and tools (no clarify: the
// runs API has none); with approval and stop turned off the next read
// after the refresh interval drops approval and cancel.
func TestProcess_HermesProfilesFollowTheServer(t *testing.T) {
	var mu sync.Mutex
	features := hermesFeatures018()
	mux := http.NewServeMux()
	serveHermesCapabilities(mux, hermesKey, func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]any{}
		for k, v := range features {
			out[k] = v
		}
		return out
	})
	upstream := httptest.NewServer(mux)
	t.Cleanup(upstream.Close)
	file := filepath.Join(t.TempDir(), "profiles.json")
	body := fmt.Sprintf(`{"default": "hermes", "profiles": {"hermes": {"driver": "hermes", "base_url": %q,
		"api_key_env": "RUNHUB_TEST_HERMES_KEY", "options": {"capabilities_refresh": "100ms"}}}}`, upstream.URL)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startHub(t, t.TempDir(), "RUNHUB_PROFILES="+file, "RUNHUB_TEST_HERMES_KEY="+hermesKey)
	caps := func() string {
		code, body := httpBody(t, "GET", p.URL()+"/v1/profiles", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/profiles: %d %s", code, body)
		}
		var ans struct {
			Profiles []struct {
				Name         string   `json:"name"`
				Capabilities []string `json:"capabilities"`
			} `json:"profiles"`
		}
		json.Unmarshal(body, &ans)
		for _, pr := range ans.Profiles {
			if pr.Name == "hermes" {
				return strings.Join(pr.Capabilities, " ")
			}
		}
		t.Fatalf("no hermes profile in %s", body)
		return ""
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := caps(); got != want; got = caps() {
			if time.Now().After(deadline) {
				t.Fatalf("hermes capabilities %q, want %q", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("cancel approval queue reasoning usage tools")
	mu.Lock()
	features["run_approval_response"], features["run_stop"] = false, false
	mu.Unlock()
	waitFor("queue reasoning usage tools")
}
