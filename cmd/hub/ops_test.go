package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// hubCmd runs the test binary as the hub binary with args and env.
func hubCmd(args []string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "RUNHUB_TEST_AS_HUB=1"), env...)
	return cmd
}

// `hub --version`, `hub -version` and `hub version` print the build's
// version and exit 0.
func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		out, err := hubCmd([]string{arg}).CombinedOutput()
		if err != nil {
			t.Fatalf("hub %s: %v\n%s", arg, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "runhub "+version {
			t.Fatalf("hub %s printed %q, want %q", arg, got, "runhub "+version)
		}
	}
}

// The healthcheck's URL defaults to /healthz of RUNHUB_METRICS_ADDR (a
// runner's only HTTP), else of RUNHUB_ADDR, over loopback;
// RUNHUB_HEALTHCHECK_URL and -url override it.
func TestParseHealthcheckConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "http://127.0.0.1:8080/healthz"},
		{nil, map[string]string{"RUNHUB_ADDR": "0.0.0.0:9000"}, "http://127.0.0.1:9000/healthz"},
		{nil, map[string]string{"RUNHUB_ADDR": ":9001"}, "http://127.0.0.1:9001/healthz"},
		{nil, map[string]string{"RUNHUB_ADDR": "[::]:9002"}, "http://[::1]:9002/healthz"},
		{nil, map[string]string{"RUNHUB_ADDR": "10.1.2.3:9003"}, "http://10.1.2.3:9003/healthz"},
		{nil, map[string]string{"RUNHUB_HEALTHCHECK_URL": "http://127.0.0.1:9090/readyz"}, "http://127.0.0.1:9090/readyz"},
		{nil, map[string]string{"RUNHUB_ADDR": "0.0.0.0:8080", "RUNHUB_METRICS_ADDR": "0.0.0.0:9090"}, "http://127.0.0.1:9090/healthz"},
		{[]string{"-url", "http://x/healthz"}, map[string]string{"RUNHUB_HEALTHCHECK_URL": "http://y/"}, "http://x/healthz"},
	} {
		cfg, err := parseHealthcheckConfig(c.args, envOf(c.env))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.URL != c.want || cfg.Timeout != 3*time.Second {
			t.Errorf("%v %v: %+v, want %s", c.args, c.env, cfg, c.want)
		}
	}
	if _, err := parseHealthcheckConfig([]string{"-timeout", "0s"}, envOf(nil)); err == nil {
		t.Error("a zero timeout was accepted")
	}
}

// `hub healthcheck` exits 0 on 200 and 1 otherwise (another status, no
// answer in time, nothing listening).
func TestHealthcheck(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	slow := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-slow
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	defer close(slow) // before Close, which waits for the hung handler
	ctx := context.Background()
	if err := Healthcheck(ctx, HealthcheckConfig{URL: srv.URL + "/healthz", Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := Healthcheck(ctx, HealthcheckConfig{URL: srv.URL + "/slow", Timeout: 100 * time.Millisecond}); err == nil {
		t.Fatal("a hung server was healthy")
	}
	status.Store(503)
	if err := Healthcheck(ctx, HealthcheckConfig{URL: srv.URL + "/healthz", Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503: %v", err)
	}

	// As a process against a real hub: exit 0, then 1 once it is gone.
	p := startHub(t, t.TempDir())
	if out, err := hubCmd([]string{"healthcheck"}, "RUNHUB_ADDR="+p.addr).CombinedOutput(); err != nil {
		t.Fatalf("healthcheck of a serving hub: %v\n%s", err, out)
	}
	if out, err := hubCmd([]string{"healthcheck", "-url", p.URL() + "/readyz"}).CombinedOutput(); err != nil {
		t.Fatalf("healthcheck -url …/readyz: %v\n%s", err, out)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	out, err := hubCmd([]string{"healthcheck"}, "RUNHUB_ADDR="+p.addr).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "healthcheck") {
		t.Fatalf("healthcheck of a stopped hub: %v\n%s", err, out)
	}
}

// get answers a request to an echo server: status and body.
func get(e http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// /healthz answers 200 while the process serves; /readyz answers 200 while
// the embedded journal reads, 503 draining once draining, and 503 journal
// unreachable once the journal is closed.
func TestReadyz_Embedded(t *testing.T) {
	var cfg RuntimeConfig
	if err := runnerFlags(&cfg, envOf(nil)).Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg.Data = t.TempDir()
	rt, err := openRuntime(context.Background(), cfg, quietLog(), "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	var draining atomic.Bool
	e := newEcho(quietLog(), nil)
	routeHealth(e, rt, draining.Load)
	if code, body := get(e, "/readyz"); code != 200 || !strings.Contains(body, `"ready"`) {
		t.Fatalf("readyz: %d %s", code, body)
	}
	draining.Store(true)
	if code, body := get(e, "/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("readyz while draining: %d %s", code, body)
	}
	draining.Store(false)
	rt.exec.Close()
	rt.store.Close()
	if code, body := get(e, "/readyz"); code != 503 || !strings.Contains(body, "journal unreachable") {
		t.Fatalf("readyz with the journal closed: %d %s", code, body)
	}
	if code, body := get(e, "/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz: %d %s", code, body)
	}
}

// In Redis mode /readyz answers 503 redis unreachable while Redis is down
// and 200 again once it is back; the Redis hook counts the failures and
// the reconnect.
func TestReadyz_Redis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	var cfg RuntimeConfig
	if err := runnerFlags(&cfg, envOf(nil)).Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg.RedisURL = rs.URL()
	m := metrics.New("test")
	rt, err := openRuntime(context.Background(), cfg, quietLog(), RuntimeInProcess, false, m)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	e := newEcho(quietLog(), m)
	routeHealth(e, rt, func() bool { return false })
	routeMetrics(e, m)
	if code, body := get(e, "/readyz"); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	rs.Stop()
	if code, body := get(e, "/readyz"); code != 503 || !strings.Contains(body, "redis unreachable") {
		t.Fatalf("readyz with Redis down: %d %s", code, body)
	}
	rs.Restart(t)
	waitFor(t, 20*time.Second, "readyz after Redis is back", func() bool { code, _ := get(e, "/readyz"); return code == 200 })
	_, body := get(e, "/metrics")
	if v := seriesValue(body, `runhub_redis_errors_total{kind="network"}`); v < 1 {
		t.Errorf("redis network errors %v, want at least 1", v)
	}
	if v := seriesValue(body, `runhub_redis_reconnects_total`); v < 1 {
		t.Errorf("redis reconnects %v, want at least 1", v)
	}
	if v := seriesValue(body, `runhub_redis_pool_connections`); v < 1 {
		t.Errorf("redis pool connections %v", v)
	}
}

// seriesValue finds a series (name{labels sorted by name}) in an
// exposition; -1 when absent.
func seriesValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

func scrapeURL(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// A hub process serves /metrics: what it journaled, delivered and
// answered, its sockets, and journal latencies — and never a run, session
// or socket id. Every response carries an X-Request-ID (the caller's when
// sane), and debug request logs carry it as request_id.
func TestProcess_Metrics(t *testing.T) {
	p := startHub(t, t.TempDir(), "RUNHUB_LOG_LEVEL=debug", "RUNHUB_LOG_FORMAT=json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tab, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	tab.Watch(ctx, false, sess.SessionID)
	tab.Focus(ctx, sess.SessionID, "")
	var run protocol.RunStartResult
	body := map[string]any{"message": "count me", "metadata": map[string]any{"sim": map[string]any{"tokens": 30, "token_ms": 1, "tools": 0}}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	delivered := 0
	for done := false; !done; {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if em, ok := m.(*protocol.EventMessage); ok {
			delivered++
			done = em.Event.Terminal
		}
	}
	events := allEvents(t, p.URL(), run.RunID)

	metricsText := scrapeURL(t, p.URL()+"/metrics")
	for _, id := range []string{run.RunID, sess.SessionID} {
		if strings.Contains(metricsText, id) {
			t.Fatalf("/metrics holds the id %s", id)
		}
	}
	want := map[string]float64{
		`runhub_events_appended_total{type="token.delta"}`:    30,
		`runhub_events_appended_total{type="done"}`:           1,
		`runhub_runs_ended_total{state="completed"}`:          1,
		`runhub_sockets_open`:                                 1,
		`runhub_watched_sessions`:                             1,
		`runhub_focused_sockets`:                              1,
		`runhub_focused_runs`:                                 1,
		`runhub_replay_requests_total`:                        1,
		`runhub_controls_total{op="start",status="accepted"}`: 1,
		`runhub_http_requests_total{code="202",method="POST",route="/v1/sessions/:sid/runs"}`: 1,
		`runhub_runs_executing`: 0,
		`runhub_build_info{goversion="` + runtime.Version() + `",version="` + version + `"}`: 1,
	}
	for series, v := range want {
		if got := seriesValue(metricsText, series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	sumDelivered := 0.0
	for _, typ := range protocol.EventTypes() {
		sumDelivered += max(0, seriesValue(metricsText, `runhub_events_delivered_total{type="`+string(typ)+`"}`))
	}
	if sumDelivered != float64(delivered) || delivered != len(events) {
		t.Errorf("delivered: metric %v, the tab got %d of %d events", sumDelivered, delivered, len(events))
	}
	for _, series := range []string{`runhub_journal_append_duration_seconds_count`, `runhub_journal_read_duration_seconds_count{op="read"}`,
		`runhub_journal_read_duration_seconds_count{op="session"}`, `runhub_socket_frames_written_total`, `runhub_socket_written_bytes_total`} {
		if got := seriesValue(metricsText, series); got < 1 {
			t.Errorf("%s = %v, want > 0", series, got)
		}
	}

	// Request ids: echoed when sane, made up otherwise, logged at debug.
	for _, c := range []struct{ sent, want string }{{"req-abc.123", "req-abc.123"}, {"bad id", ""}, {strings.Repeat("x", 200), ""}} {
		req, _ := http.NewRequest(http.MethodGet, p.URL()+"/v1/sessions", nil)
		req.Header.Set("X-Request-ID", c.sent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-ID")
		if (c.want != "" && got != c.want) || got == "" || (c.want == "" && got == c.sent) {
			t.Errorf("sent X-Request-ID %q, got %q", c.sent, got)
		}
	}
	waitFor(t, 5*time.Second, "the request log", func() bool {
		return strings.Contains(p.out.String(), `"request_id":"req-abc.123"`)
	})
	for _, line := range strings.Split(p.out.String(), "\n") {
		if strings.Contains(line, `"request_id":"req-abc.123"`) &&
			(!strings.Contains(line, `"msg":"http request"`) || !strings.Contains(line, `"route":"/v1/sessions"`) || !strings.Contains(line, `"status":200`)) {
			t.Errorf("request log line: %s", line)
		}
	}
}

// The scaled deployment's processes each serve their metrics: a runner on
// RUNHUB_METRICS_ADDR (with /healthz and /readyz), a hub on its own
// address. A killed runner's run is reaped and counted as a lease expiry
// exactly once over all processes.
func TestProcess_MetricsScaled(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	common := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=1s", "RUNHUB_LOG_LEVEL=warn"}
	h := startHub(t, t.TempDir(), append(common, "RUNHUB_RUNTIME=runners", "RUNHUB_NODE_ID=hub-a")...)
	runnerAddr := freeAddr(t)
	r := startRunner(t, append(common, "RUNHUB_NODE_ID=runner-1", "RUNHUB_METRICS_ADDR="+runnerAddr)...)
	waitFor(t, 20*time.Second, "the runner's health endpoint", func() bool {
		return hubCmd([]string{"healthcheck", "-url", "http://" + runnerAddr + "/readyz", "-timeout", "1s"}).Run() == nil
	})

	var run protocol.RunStartResult
	body := map[string]any{"message": "on a runner", "metadata": map[string]any{"sim": map[string]any{"tokens": 5, "token_ms": 1}}}
	var sess protocol.CreateSessionResult
	call(t, "POST", h.URL()+"/v1/sessions", map[string]string{}, &sess)
	if code := call(t, "POST", h.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	waitFor(t, 20*time.Second, "the run to end", func() bool {
		ev := allEvents(t, h.URL(), run.RunID)
		return len(ev) > 0 && ev[len(ev)-1].Terminal
	})
	rm := scrapeURL(t, "http://"+runnerAddr+"/metrics")
	hm := scrapeURL(t, h.URL()+"/metrics")
	if v := seriesValue(rm, `runhub_runs_ended_total{state="completed"}`); v != 1 {
		t.Errorf("runner: runs ended completed %v, want 1", v)
	}
	if v := seriesValue(rm, `runhub_events_appended_total{type="token.delta"}`); v != 5 {
		t.Errorf("runner: token.delta appended %v, want 5", v)
	}
	if v := seriesValue(hm, `runhub_events_appended_total{type="token.delta"}`); v != 0 {
		t.Errorf("hub: token.delta appended %v, want 0 (the runner executes)", v)
	}
	if v := seriesValue(hm, `runhub_controls_total{op="start",status="accepted"}`); v != 1 {
		t.Errorf("hub: starts accepted %v, want 1", v)
	}

	// Kill the runner mid-run: the hub's reaper ends the run interrupted.
	body["metadata"] = map[string]any{"sim": map[string]any{"tokens": 100000, "token_ms": 5}}
	if code := call(t, "POST", h.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	waitFor(t, 20*time.Second, "tokens of the long run", func() bool { return len(allEvents(t, h.URL(), run.RunID)) > 5 })
	r.kill()
	waitFor(t, 20*time.Second, "the long run to be reaped", func() bool {
		ev := allEvents(t, h.URL(), run.RunID)
		return len(ev) > 0 && ev[len(ev)-1].Terminal
	})
	hm = scrapeURL(t, h.URL()+"/metrics")
	if v := seriesValue(hm, `runhub_lease_expiries_total`); v != 1 {
		t.Errorf("hub: lease expiries %v, want 1", v)
	}
	if v := seriesValue(hm, `runhub_runs_ended_total{state="interrupted"}`); v != 1 {
		t.Errorf("hub: runs ended interrupted %v, want 1", v)
	}
}

// Duplicates are not counted: an idempotent retry of a stored event, and
// a second reaper that loses the race to end the same run.
func TestObservedStore_CountsOnce(t *testing.T) {
	b := mem.New(mem.Options{})
	defer b.Close()
	m := metrics.New("test")
	s := observe(b, m)
	ctx := context.Background()
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: "s_1", Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: "r_1", SessionID: "s_1", Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	e, _ := protocol.NewEvent("r_1", "s_1", protocol.EventRunStarted, protocol.RunStartedPayload{Message: "x"})
	for i := 0; i < 2; i++ {
		if _, err := s.Append(ctx, e, "start"); err != nil {
			t.Fatal(err)
		}
	}
	reapers := []journal.Store{reaped(s, m), reaped(s, m)}
	term, _ := protocol.NewEvent("r_1", "s_1", protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted, Message: "lease", Terminal: true, LastSeq: 1})
	for _, r := range reapers {
		if _, err := r.Append(ctx, term, "r_1/interrupted"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Read(ctx, "r_nope", 0, 10); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("read of an unknown run: %v", err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for series, want := range map[string]float64{
		`runhub_events_appended_total{type="run.started"}`: 1,
		`runhub_events_appended_total{type="error"}`:       1,
		`runhub_runs_ended_total{state="interrupted"}`:     1,
		`runhub_lease_expiries_total`:                      1,
		`runhub_journal_append_duration_seconds_count`:     4,
		`runhub_journal_errors_total{op="read"}`:           0,
	} {
		if got := seriesValue(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

func TestRedisErrorKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{goredis.Nil, ""},
		{context.Canceled, ""},
		{goredis.ErrClosed, ""},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), metrics.RedisTimeout},
		{goredis.ErrPoolTimeout, metrics.RedisTimeout},
		{io.EOF, metrics.RedisNetwork},
		{&netErr{timeout: true}, metrics.RedisTimeout},
		{&netErr{}, metrics.RedisNetwork},
		{goredis.ErrNoScript, ""},
		{redisReply("UNBLOCKED client unblocked via CLIENT UNBLOCK"), ""},
		{redisReply("READONLY You can't write against a read only replica."), metrics.RedisReply},
	} {
		if got := redisErrorKind(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}

type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

type netErr struct{ timeout bool }

func (e *netErr) Error() string   { return "dial unix /x: connect: connection refused" }
func (e *netErr) Timeout() bool   { return e.timeout }
func (e *netErr) Temporary() bool { return false }

// Logs never carry secrets: a string attribute named like a credential is
// replaced whole, and secret-looking substrings of strings and errors are
// redacted; other values (booleans, counts) stay.
func TestLogScrubsSecrets(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log := newLoggerTo(&buf, format, "debug")
		log.Info("auth failed", "token", "s3cr3t-value", "api_key", "plainkey", "auth", true, "tokens", 12,
			"err", errors.New("upstream said: Authorization: Bearer abcdefghijklmnop0123"),
			"detail", "called with password=hunter2hunter2 and sk-proj-ABCDEFGHIJKLMNOPQRSTUV")
		log.With("request_id", "rq1").Debug("debug line", "err", errors.New("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"))
		out := buf.String()
		for _, secret := range []string{"s3cr3t-value", "plainkey", "abcdefghijklmnop0123", "hunter2hunter2", "sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "eyJhbGciOiJIUzI1NiJ9"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: the log holds %q:\n%s", format, secret, out)
			}
		}
		for _, kept := range []string{"auth", "true", "12", "rq1", "debug line"} {
			if !strings.Contains(out, kept) {
				t.Errorf("%s: the log lost %q:\n%s", format, kept, out)
			}
		}
	}
	var buf bytes.Buffer
	newLoggerTo(&buf, "json", "warn").Info("hidden")
	if buf.Len() != 0 {
		t.Fatalf("an info line at level warn: %s", buf.String())
	}
}

// The request middleware puts the request id in the request's context, so
// log calls with that context carry request_id.
func TestRequestIDInContextLogs(t *testing.T) {
	var buf bytes.Buffer
	log := newLoggerTo(&buf, "json", "debug")
	e := newEcho(log, nil)
	e.GET("/x/:id", func(c echo.Context) error {
		log.InfoContext(c.Request().Context(), "handler", "session_id", c.Param("id"))
		return c.String(200, "ok")
	})
	req := httptest.NewRequest(http.MethodGet, "/x/s_1?token=abc", nil)
	req.Header.Set("X-Request-ID", "from-lb-1")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Header().Get("X-Request-ID") != "from-lb-1" {
		t.Fatalf("X-Request-ID %q", rec.Header().Get("X-Request-ID"))
	}
	out := buf.String()
	if strings.Count(out, `"request_id":"from-lb-1"`) != 2 || !strings.Contains(out, `"session_id":"s_1"`) {
		t.Fatalf("logs:\n%s", out)
	}
	if strings.Contains(out, "token=abc") {
		t.Fatalf("the request log holds the query:\n%s", out)
	}
}

// envOf is a getenv over a map.
func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
