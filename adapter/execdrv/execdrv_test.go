package execdrv

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ownKey   = "own-key-7c1e5a9b3d"
	otherKey = "other-profile-key-2f8d4e6a"
)

// setup writes script to a file and returns a harness whose profile "cmd"
// runs it with sh; out is a directory the script may write to ($OUT).
func setup(t *testing.T, script string, mod func(*Settings)) (*drivertest.Harness, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := Settings{Command: "/bin/sh", Args: []string{path}, Env: map[string]string{"OUT": out},
		Key: profile.Key{APIKeyEnv: "MY_KEY"}, Instructions: "be brief",
		CancelGrace: profile.Duration(2 * time.Second), KillGrace: profile.Duration(2 * time.Second)}
	if mod != nil {
		mod(&s)
	}
	// The profile as a file has it, parsed and built by the registration.
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	raw = append([]byte(`{"driver":"exec","model":"m-cmd",`), raw[1:]...)
	reg := profile.NewRegistry(Registration())
	p, err := reg.Profile("cmd", raw)
	if err != nil {
		t.Fatal(err)
	}
	log, logs := drivertest.Logger()
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "MY_KEY": ownKey, "OTHER_KEY": otherKey}
	d, err := reg.Build(p, profile.Env{Getenv: func(k string) string { return env[k] }, ClarifyTimeout: 5 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	// The executor refuses what the driver does not declare, as the hub's.
	declared, _ := reg.Capabilities(Kind)
	h := drivertest.New(t, drivertest.Config{Log: log, Logs: logs,
		Profiles:     map[string]driver.Profile{"cmd": {Driver: d, Kind: Kind, Model: p.Model}},
		Capabilities: func(string, string) ([]string, bool) { return declared, true }})
	return h, out
}

func start(h *drivertest.Harness, sid, msg string) string {
	return h.Start(protocol.StartRunRequest{SessionID: sid, Message: msg, Profile: "cmd"}).RunID
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func payload[T any](t *testing.T, e protocol.Envelope) T {
	t.Helper()
	p, err := protocol.DecodePayload[T](&e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// gone reports whether pid no longer exists (a zombie still does: kill 0
// succeeds on it until it is waited for).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

const fullScript = `IFS= read -r start
printf '%s\n' "$start" >> "$OUT/start.json"
env > "$OUT/env.txt"
echo '{"type":"title.updated","payload":{"title":"t","source":"script"}}'
echo '{"type":"reasoning.delta","payload":{"block_id":"b1","text":"hmm"}}'
echo 'not json at all'
echo '{"type":"tool.started","payload":{"tool_call_id":"t1","name":"ls","args":{}}}'
echo '{"type":"tool.done","payload":{"tool_call_id":"t1","status":"ok","duration_ms":1,"error":false,"result":{}}}'
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"Hel"}}'
echo '{"type":"token.delta","payload":{"text":"no message_id: invalid"}}'
echo '{"type":"run.started","payload":{}}'
echo '{"type":"no.such.type","payload":{}}'
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"lo"}}'
echo '{"type":"progress","payload":{"text":"my key is '"$MY_KEY"'"}}'
echo "a diagnostic" >&2
echo '{"type":"usage.final","payload":{"input_tokens":1,"output_tokens":2,"model":"x","provider":"exec","duration_ms":3}}'
echo '{"type":"done","payload":{"status":"completed","usage":{"input_tokens":1,"output_tokens":2,"model":"x","provider":"exec","duration_ms":3}}}'
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"after the end"}}'
`

func TestFullRun_EventByEvent(t *testing.T) {
	h, out := setup(t, fullScript, nil)
	rid := start(h, "", "hello there")
	ev := h.Events(rid, 10*time.Second)
	want := "run.started title.updated reasoning.delta tool.started tool.done token.delta token.delta progress usage.final done"
	if got := drivertest.Types(ev); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	rs := payload[protocol.RunStartedPayload](t, ev[0])
	if rs.Provider != "exec" || rs.Profile != "cmd" || rs.Model != "m-cmd" {
		t.Errorf("run.started = %+v", rs)
	}
	if tok := payload[protocol.TokenDeltaPayload](t, ev[6]); tok.Text != "lo" {
		t.Errorf("token = %+v", tok)
	}
	done := payload[protocol.DonePayload](t, drivertest.Terminal(t, ev, protocol.EventDone))
	if done.Usage == nil || done.Usage.OutputTokens != 2 || done.Usage.Model != "x" {
		t.Errorf("done = %+v", done)
	}
	if pr := payload[protocol.ProgressPayload](t, ev[7]); pr.Text != "my key is [REDACTED]" {
		t.Errorf("progress = %+v: the key was not scrubbed", pr)
	}
	if strings.Contains(string(h.JournalBytes()), ownKey) {
		t.Error("the key is in the journal")
	}
	if !strings.Contains(h.Logs.String(), "lines=4") {
		t.Errorf("skipped lines not logged: %s", h.Logs.String())
	}

	var sl StartLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(read(t, filepath.Join(out, "start.json")))), &sl); err != nil {
		t.Fatal(err)
	}
	if sl.Op != "start" || sl.RunID != rid || sl.Message != "hello there" || sl.Profile != "cmd" || sl.Model != "m-cmd" ||
		sl.Instructions != "be brief" || sl.History == nil || len(sl.History) != 0 {
		t.Errorf("start line = %+v", sl)
	}
	env := read(t, filepath.Join(out, "env.txt"))
	for _, want := range []string{"MY_KEY=" + ownKey, "RUNHUB_RUN_ID=" + rid, "RUNHUB_PROFILE=cmd", "OUT=" + out, "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("the command's environment lacks %s", want)
		}
	}
	if strings.Contains(env, otherKey) || strings.Contains(env, "OTHER_KEY") {
		t.Error("the command can read another profile's key")
	}

	// The next run of the session gets the transcript as history.
	rid2 := start(h, ev[0].SessionID, "again")
	drivertest.Terminal(t, h.Events(rid2, 10*time.Second), protocol.EventDone)
	lines := strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "start.json"))), "\n")
	if err := json.Unmarshal([]byte(lines[1]), &sl); err != nil {
		t.Fatal(err)
	}
	if got := sl.History; len(got) != 2 || got[0].Turn != (driver.Turn{Role: "user", Content: "hello there"}) ||
		got[1].Turn != (driver.Turn{Role: "assistant", Content: "Hello"}) || got[0].Attachments != nil {
		t.Errorf("history = %+v", got)
	}
}

func TestPromptsAndSteerRoundTrip(t *testing.T) {
	h, out := setup(t, `IFS= read -r start
echo '{"type":"approval.requested","payload":{"approval_id":"a1","summary":"rm -rf build","risk":"high","choices":["once","deny"]}}'
IFS= read -r ans; printf '%s\n' "$ans" >> "$OUT/controls"
echo '{"type":"clarify.requested","payload":{"clarify_id":"c1","question":"which?","choices":[],"input_mode":"text"}}'
IFS= read -r ans; printf '%s\n' "$ans" >> "$OUT/controls"
echo '{"type":"progress","payload":{"text":"ready for guidance"}}'
IFS= read -r ans; printf '%s\n' "$ans" >> "$OUT/controls"
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`, nil)
	rid := start(h, "", "go")
	ctx := context.Background()
	h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventApprovalReq })
	if res, err := h.Control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: rid, ApprovalID: "a1", Choice: "deny"}); err != nil || !res.Accepted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventClarifyReq })
	if res, err := h.Control(ctx, protocol.Control{Op: protocol.OpClarify, RunID: rid, ClarifyID: "c1", Response: "the small one"}); err != nil || !res.Accepted {
		t.Fatalf("clarify: %+v %v", res, err)
	}
	first := h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventProgress })
	if res, err := h.Control(ctx, protocol.Control{Op: protocol.OpQueue, SessionID: first.SessionID, Message: "go left", Mode: protocol.ModeSteer}); err != nil || !res.Accepted {
		t.Fatalf("steer: %+v %v", res, err)
	}
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	// The second progress is the runtime's record of the steer.
	want := "run.started approval.requested approval.resolved clarify.requested clarify.resolved progress progress done"
	if got := drivertest.Types(ev); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	controls := strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "controls"))), "\n")
	wantC := []string{`{"op":"approve","approval_id":"a1","choice":"deny"}`,
		`{"op":"clarify","clarify_id":"c1","response":"the small one","status":"resolved"}`,
		`{"op":"steer","text":"go left"}`}
	if strings.Join(controls, "\n") != strings.Join(wantC, "\n") {
		t.Errorf("controls\n got %s\nwant %s", controls, wantC)
	}
}

func TestExitWithoutTerminal(t *testing.T) {
	h, _ := setup(t, `IFS= read -r start
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"part"}}'
i=0; while [ $i -lt 30 ]; do echo "noise $i" >&2; i=$((i+1)); done
echo "Traceback: token=sk-proj-abcdefghijklmnopqrstuvwx and $MY_KEY" >&2
echo "RuntimeError: the model went away" >&2
exit 3
`, nil)
	ev := h.Events(start(h, "", "go"), 10*time.Second)
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "exited without a terminal event (exit status 3)") ||
		!strings.Contains(p.Message, "RuntimeError: the model went away") || !strings.Contains(p.Message, "noise 29") ||
		strings.Contains(p.Message, "noise 5 ") {
		t.Errorf("error = %+v", p)
	}
	for _, secret := range []string{"sk-proj-abcdefghijklmnopqrstuvwx", ownKey} {
		if strings.Contains(p.Message, secret) || strings.Contains(string(h.JournalBytes()), secret) || strings.Contains(h.Logs.String(), secret) {
			t.Errorf("%q leaked: %s", secret, p.Message)
		}
	}
	if got := drivertest.Types(ev); got != "run.started token.delta error" {
		t.Errorf("events %s", got)
	}
}

func TestCancel_CancelLineThenSIGTERMThenSIGKILL(t *testing.T) {
	h, out := setup(t, `trap 'echo term >> "$OUT/log"' TERM
echo $$ > "$OUT/pid"
IFS= read -r start
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"x"}}'
while IFS= read -r line; do
  case "$line" in *'"cancel"'*) echo cancel >> "$OUT/log"; break;; esac
done
while :; do sleep 0.05; done
`, func(p *Settings) {
		p.CancelGrace, p.KillGrace = profile.Duration(300*time.Millisecond), profile.Duration(300*time.Millisecond)
	})
	rid := start(h, "", "go")
	h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventTokenDelta })
	began := time.Now()
	h.Cancel(rid)
	ev := h.Events(rid, 10*time.Second)
	took := time.Since(began)
	c := payload[protocol.CancelledPayload](t, drivertest.Terminal(t, ev, protocol.EventCancelled))
	if !c.Partial {
		t.Errorf("cancelled = %+v, want partial", c)
	}
	if got := read(t, filepath.Join(out, "log")); got != "cancel\nterm\n" {
		t.Errorf("the command saw %q, want the cancel line, then SIGTERM (then SIGKILL)", got)
	}
	if took < 600*time.Millisecond {
		t.Errorf("ended after %s: the graces (300ms + 300ms) were not given", took)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(read(t, filepath.Join(out, "pid"))))
	if pid == 0 || !gone(pid) {
		t.Errorf("the command (pid %d) is still there: killed but not waited for (zombie) or not killed", pid)
	}
	if !strings.Contains(h.Logs.String(), "sending SIGKILL") {
		t.Errorf("logs: %s", h.Logs.String())
	}
}

func TestCancel_CommandExitsOnCancelLine(t *testing.T) {
	h, out := setup(t, `trap 'echo term >> "$OUT/log"' TERM
IFS= read -r start
echo '{"type":"progress","payload":{"text":"working"}}'
while IFS= read -r line; do
  case "$line" in *'"cancel"'*) echo cancel >> "$OUT/log"; exit 0;; esac
done
`, nil)
	rid := start(h, "", "go")
	h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventProgress })
	began := time.Now()
	h.Cancel(rid)
	ev := h.Events(rid, 10*time.Second)
	if c := payload[protocol.CancelledPayload](t, drivertest.Terminal(t, ev, protocol.EventCancelled)); c.Partial {
		t.Errorf("cancelled = %+v: progress is not output", c)
	}
	if got := read(t, filepath.Join(out, "log")); got != "cancel\n" {
		t.Errorf("the command saw %q (after %s), want only the cancel line", got, time.Since(began))
	}
}

func TestGrandchildHoldingStdout_IsKilled(t *testing.T) {
	h, out := setup(t, `IFS= read -r start
sleep 60 &
echo $! > "$OUT/child"
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"x"}}'
exit 2
`, nil)
	began := time.Now()
	ev := h.Events(start(h, "", "go"), 10*time.Second)
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
	if !strings.Contains(p.Message, "exit status 2") {
		t.Errorf("error = %+v", p)
	}
	if took := time.Since(began); took >= drainAfterExit {
		t.Errorf("took %s: the run waited on the grandchild instead of killing the group", took)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(read(t, filepath.Join(out, "child"))))
	deadline := time.Now().Add(2 * time.Second)
	for !stopped(child) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !stopped(child) {
		t.Errorf("the grandchild %d still runs", child)
	}
}

// stopped reports whether pid is gone or a zombie (an orphan is reaped by
// init, which a container may not run).
func stopped(pid int) bool {
	if gone(pid) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

func TestTerminalLines(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		h, _ := setup(t, `IFS= read -r start
echo '{"type":"error","payload":{"code":"provider_error","message":"warming up","terminal":false}}'
echo '{"type":"error","payload":{"code":"rate_limited","message":"slow down"}}'
`, nil)
		ev := h.Events(start(h, "", "go"), 10*time.Second)
		if got := drivertest.Types(ev); got != "run.started error error" {
			t.Errorf("events %s", got)
		}
		p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
		if p.Code != "rate_limited" || p.Message != "slow down" {
			t.Errorf("error = %+v", p)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		h, _ := setup(t, `IFS= read -r start
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"x"}}'
echo '{"type":"cancelled","payload":{"reason":"the agent gave up"}}'
`, nil)
		ev := h.Events(start(h, "", "go"), 10*time.Second)
		c := payload[protocol.CancelledPayload](t, drivertest.Terminal(t, ev, protocol.EventCancelled))
		if c.Reason != "the agent gave up" || !c.Partial {
			t.Errorf("cancelled = %+v", c)
		}
	})
	t.Run("stays after done", func(t *testing.T) {
		h, _ := setup(t, `IFS= read -r start
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
exec sleep 60
`, func(p *Settings) { p.CancelGrace = profile.Duration(200 * time.Millisecond) })
		ev := h.Events(start(h, "", "go"), 10*time.Second)
		d := payload[protocol.DonePayload](t, drivertest.Terminal(t, ev, protocol.EventDone))
		if d.Usage == nil || d.Usage.Provider != "exec" || d.Usage.Model != "m-cmd" {
			t.Errorf("done = %+v", d)
		}
	})
}

func TestTimeout(t *testing.T) {
	h, _ := setup(t, `IFS= read -r start
echo '{"type":"progress","payload":{"text":"thinking"}}'
exec sleep 60
`, func(p *Settings) {
		p.Timeout, p.CancelGrace = profile.Duration(300*time.Millisecond), profile.Duration(100*time.Millisecond)
	})
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, h.Events(start(h, "", "go"), 10*time.Second), protocol.EventError))
	if p.Code != protocol.ErrorTimeout || !strings.Contains(p.Message, "300ms") {
		t.Errorf("error = %+v", p)
	}
}

func TestCommandNotFound(t *testing.T) {
	h, _ := setup(t, "", func(p *Settings) { p.Command, p.Args = "/nonexistent/agent", nil })
	p := drivertest.ErrorOf(t, drivertest.Terminal(t, h.Events(start(h, "", "go"), 10*time.Second), protocol.EventError))
	if p.Code != protocol.ErrorProviderError || !strings.Contains(p.Message, "could not start the command") {
		t.Errorf("error = %+v", p)
	}
}

// The documented example agent works as documented.
func TestExampleAgent(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	root, _ := filepath.Abs("../..")
	h, _ := setup(t, "", func(p *Settings) {
		p.Command, p.Args, p.Dir = py, []string{"docs/examples/echo_agent.py"}, root
		p.Env["AGENT_TOKEN_MS"] = "1"
		p.InheritEnv = []string{"PYENV_ROOT", "PYENV_VERSION"}
	})
	rid := start(h, "", "hello world")
	ev := h.Events(rid, 20*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	if got := tokens(t, ev); got != "You said: hello world (turn 1)" {
		t.Errorf("text %q (events %s)", got, drivertest.Types(ev))
	}

	rid = start(h, ev[0].SessionID, "please approve this")
	h.WaitFor(rid, 20*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventApprovalReq })
	if res, err := h.Control(context.Background(), protocol.Control{Op: protocol.OpApprove, RunID: rid, ApprovalID: "a1", Choice: "once"}); err != nil || !res.Accepted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	ev = h.Events(rid, 20*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	if got := tokens(t, ev); got != "You said: please approve this (turn 2)" {
		t.Errorf("text %q (events %s)", got, drivertest.Types(ev))
	}
}

func tokens(t *testing.T, ev []protocol.Envelope) string {
	var b strings.Builder
	for _, e := range ev {
		if e.Type == protocol.EventTokenDelta {
			b.WriteString(payload[protocol.TokenDeltaPayload](t, e).Text)
		}
	}
	return b.String()
}
