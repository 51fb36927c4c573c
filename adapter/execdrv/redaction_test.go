package execdrv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// catScript plays the lines the test wrote to $OUT/stdout.jsonl, writes
// $OUT/stderr.txt to stderr and exits with $OUT/status (0 when absent).
const catScript = `IFS= read -r start
cat "$OUT/stdout.jsonl"
[ -f "$OUT/stderr.txt" ] && cat "$OUT/stderr.txt" >&2
exit "$(cat "$OUT/status" 2>/dev/null || echo 0)"
`

// jsonl encodes events as the command's JSONL lines.
func jsonl(t *testing.T, lines ...map[string]any) []byte {
	t.Helper()
	var b []byte
	for _, l := range lines {
		j, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, j...), '\n')
	}
	return b
}

func line(typ string, payload map[string]any) map[string]any {
	return map[string]any{"type": typ, "payload": payload}
}

// A command whose agent spills real-looking secrets everywhere — its
// answer, reasoning and tool output streamed in pieces of a few bytes, tool
// arguments with an Authorization header and password fields, a tool
// result, progress, an approval summary — gets none of them into the
// journal file, the logs or the events a tab is sent; the streamed text is
// otherwise kept.
func TestRedaction_Secrets(t *testing.T) {
	text := drivertest.SecretText()
	for seed := range uint64(4) {
		h, out := setup(t, catScript, nil)
		chunks := drivertest.Chunks(text, 4, seed)
		var lines []map[string]any
		for _, c := range chunks {
			lines = append(lines, line("reasoning.delta", map[string]any{"block_id": "b1", "text": c}))
		}
		lines = append(lines, line("reasoning.done", map[string]any{"block_id": "b1", "text": ""}))
		args := map[string]any{"url": "https://api.example.com", "password": drivertest.Secrets[5].Value,
			"headers": map[string]string{"Authorization": "Bearer " + drivertest.Secrets[4].Value, "X-Api-Key": drivertest.Secrets[6].Value},
			"cmd":     drivertest.Secrets[1].Context}
		lines = append(lines, line("tool.started", map[string]any{"tool_call_id": "t1", "name": "http", "args": args}))
		for _, c := range chunks {
			lines = append(lines, line("tool.updated", map[string]any{"tool_call_id": "t1", "stream": "stdout", "text": c}))
		}
		lines = append(lines, line("tool.done", map[string]any{"tool_call_id": "t1", "status": "ok", "duration_ms": 1, "error": false,
			"result": map[string]any{"token": drivertest.Secrets[3].Value, "note": drivertest.Secrets[2].Context}}))
		lines = append(lines, line("progress", map[string]any{"text": drivertest.Secrets[0].Context}))
		for _, c := range chunks {
			lines = append(lines, line("token.delta", map[string]any{"message_id": "m1", "text": c}))
		}
		lines = append(lines, line("done", map[string]any{"status": "completed", "usage": nil}))
		if err := os.WriteFile(filepath.Join(out, "stdout.jsonl"), jsonl(t, lines...), 0o644); err != nil {
			t.Fatal(err)
		}
		ev := h.Events(start(h, "", "show me the config"), 10*time.Second)
		drivertest.Terminal(t, ev, protocol.EventDone)
		drivertest.NoLeak(t, h, ev, true)
		want := journal.RedactString(text)
		for _, typ := range []protocol.EventType{protocol.EventTokenDelta, protocol.EventReasoningDelta, protocol.EventToolUpdated} {
			if got := drivertest.StreamText(t, ev, typ); got != want {
				t.Fatalf("seed %d: %s text\n got %q\nwant %q", seed, typ, got, want)
			}
		}
	}
}

// Secrets in the command's failure — its terminal error's message, or the
// stderr lines of a command that died without one — are redacted from the
// run's error and appear nowhere.
func TestRedaction_FailureText(t *testing.T) {
	for _, sec := range drivertest.Secrets {
		msg := drivertest.Marker + " " + sec.Context
		t.Run(sec.Name+"/error line", func(t *testing.T) {
			h, out := setup(t, catScript, nil)
			os.WriteFile(filepath.Join(out, "stdout.jsonl"), jsonl(t,
				line("error", map[string]any{"code": "provider_error", "message": msg, "terminal": true})), 0o644)
			ev := h.Events(start(h, "", "go"), 10*time.Second)
			drivertest.Terminal(t, ev, protocol.EventError)
			drivertest.NoLeak(t, h, ev, true)
		})
		t.Run(sec.Name+"/stderr", func(t *testing.T) {
			h, out := setup(t, catScript, nil)
			os.WriteFile(filepath.Join(out, "stdout.jsonl"), nil, 0o644)
			os.WriteFile(filepath.Join(out, "stderr.txt"), []byte("Traceback (most recent call last):\n"+strings.ReplaceAll(msg, "\n", " ")+"\n"), 0o644)
			os.WriteFile(filepath.Join(out, "status"), []byte("3"), 0o644)
			ev := h.Events(start(h, "", "go"), 10*time.Second)
			p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
			if !strings.Contains(p.Message, "exit status 3") {
				t.Fatalf("error %+v", p)
			}
			drivertest.NoLeak(t, h, ev, true)
		})
	}
}
