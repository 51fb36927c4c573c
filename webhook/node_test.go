package webhook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/runhub/runhub/internal/npmtest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/webhook"
)

// installStandardWebhooks installs the pinned standardwebhooks package of
// web/webhook-test with npm ci into a temporary directory, with the
// receiver beside it. A missing node or npm fails the test.
func installStandardWebhooks(t *testing.T) (node, dir string) {
	return npmtest.Install(t, "the Standard Webhooks package", "../web/webhook-test", "package.json", "package-lock.json", "receiver.mjs")
}

// nodeLine is one line of receiver.mjs.
type nodeLine struct {
	Port  int    `json:"port"`
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Type  string `json:"type"`
	RunID string `json:"run_id"`
	Error string `json:"error"`
}

// The official Standard Webhooks package (npm standardwebhooks 1.1.1)
// verifies every notification the sender delivers, and refuses one whose
// body was changed.
func TestNode_StandardWebhooksVerifies(t *testing.T) {
	node, dir := installStandardWebhooks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "receiver.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+testSecret)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	lines := make(chan nodeLine, 100)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l nodeLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("receiver line %q: %v", sc.Text(), err)
				continue
			}
			lines <- l
		}
		close(lines)
	})
	next := func() nodeLine {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the receiver exited")
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("no line from the receiver")
		}
		return nodeLine{}
	}
	url := "http://127.0.0.1:" + itoa(next().Port) + "/hooks"

	s := openBolt(t, t.TempDir())
	defer s.Close()
	newRun(t, s, "s1", "r1")
	approval(t, s, "s1", "r1")
	appendEv(t, s, "s1", "r1", protocol.EventClarifyReq, protocol.ClarifyRequestedPayload{ClarifyID: "c1",
		Question: "which branch? ✓ \u2028 \"quoted\" <tag> &", Choices: []string{"main", "dev"}, InputMode: "choice"})
	appendEv(t, s, "s1", "r1", protocol.EventCancelled, protocol.CancelledPayload{Reason: "user"})
	_, _, _, reg := startSender(t, s, webhook.Options{}, endpoint(url, webhook.Types...))
	got := map[string]bool{}
	for range 3 {
		l := next()
		if !l.OK || l.RunID != "r1" {
			t.Fatalf("the official package refused a notification: %+v", l)
		}
		got[l.Type] = true
	}
	if !got[webhook.TypeNeedsApproval] || !got[webhook.TypeNeedsInput] || !got[webhook.TypeFinished] {
		t.Fatalf("verified types %v", got)
	}
	eventually(t, "three acknowledged deliveries", func() bool {
		return metric(t, reg, "runhub_webhook_notifications_total", webhook.Delivered) == 3
	})

	// A changed body, a wrong secret: refused by the package.
	key, _ := webhook.ParseSecret(testSecret)
	body := []byte(`{"type":"run.finished","timestamp":"2026-01-01T00:00:00Z","data":{}}`)
	ts := time.Now().Unix()
	for name, sig := range map[string]string{
		"changed body": webhook.Sign(key, "msg_x", ts, append(body, ' ')),
		"other secret": webhook.Sign([]byte("another-secret-of-enough-bytes!!"), "msg_x", ts, body),
	} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(string(body)))
		req.Header.Set(webhook.HeaderID, "msg_x")
		req.Header.Set(webhook.HeaderTimestamp, itoa(int(ts)))
		req.Header.Set(webhook.HeaderSignature, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if l := next(); l.OK || resp.StatusCode != 400 {
			t.Fatalf("%s: accepted (%d %+v)", name, resp.StatusCode, l)
		}
	}
	cancel()
	wg.Wait()
}
