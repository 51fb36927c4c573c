package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
	"go.yaml.in/yaml/v3"
)

// The deployment files: deploy/compose.yaml (with deploy/nginx.conf,
// deploy/prometheus.yml, Grafana provisioning), the Dockerfile and
// deploy/grafana-dashboard.json. No Docker engine is needed by these
// tests: compose is validated by `docker compose config` when the client
// and its compose plugin are installed, nginx runs for real in front of
// hub processes when nginx is installed.

const deployDir = "../../deploy"

// `docker compose config -q` validates the compose file (it needs the
// docker client and its compose plugin, not an engine).
func TestCompose_ConfigValidates(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("the docker client is not installed: docker compose config cannot run")
	}
	if out, err := exec.Command("docker", "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("the docker compose plugin is not installed (docker compose version: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	for _, profile := range []string{"", "monitoring"} {
		args := []string{"compose", "-f", filepath.Join(deployDir, "compose.yaml")}
		if profile != "" {
			args = append(args, "--profile", profile)
		}
		out, err := exec.Command("docker", append(args, "config", "-q")...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s config -q: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		Profiles    []string          `yaml:"profiles"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// The compose stack is what the README promises: Redis with AOF on a
// volume, two hub replicas queueing runs for two runners, every runhub
// process with its own node id and Redis client name and a health check,
// nginx in front of the hubs with deploy/nginx.conf, published on
// loopback; every file it mounts exists; every variable it sets is one
// the binary reads.
func TestCompose_Structure(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	redis := c.Services["redis"]
	if !strings.Contains(strings.Join(redis.Command, " "), "--appendonly yes") || len(redis.Volumes) == 0 || !strings.HasSuffix(redis.Volumes[0], ":/data") {
		t.Errorf("redis: want AOF on a volume at /data, got command %v volumes %v", redis.Command, redis.Volumes)
	}
	known := knownVariables(t)
	roles := map[string][]string{}
	nodes := map[string]bool{}
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "runhub:") {
			continue
		}
		if s.Build == nil {
			t.Errorf("%s: no build (the image comes from the Dockerfile)", name)
		}
		roles[s.Command[0]] = append(roles[s.Command[0]], name)
		env := s.Environment
		for k := range env {
			if strings.HasPrefix(k, "RUNHUB_") && !known[k] {
				t.Errorf("%s: %s is not a variable hub reads", name, k)
			}
		}
		if !strings.HasPrefix(env["RUNHUB_REDIS_URL"], "redis://redis:6379/") || !strings.Contains(env["RUNHUB_REDIS_URL"], "client_name="+name) {
			t.Errorf("%s: RUNHUB_REDIS_URL %q", name, env["RUNHUB_REDIS_URL"])
		}
		if nodes[env["RUNHUB_NODE_ID"]] || env["RUNHUB_NODE_ID"] != name {
			t.Errorf("%s: node id %q (want its own, unique)", name, env["RUNHUB_NODE_ID"])
		}
		nodes[env["RUNHUB_NODE_ID"]] = true
		if env["RUNHUB_METRICS_ADDR"] != "0.0.0.0:9090" || env["RUNHUB_LOG_FORMAT"] != "json" {
			t.Errorf("%s: metrics address %q, log format %q", name, env["RUNHUB_METRICS_ADDR"], env["RUNHUB_LOG_FORMAT"])
		}
		if hc := strings.Join(s.Healthcheck.Test, " "); !strings.HasPrefix(hc, "CMD /hub healthcheck") {
			t.Errorf("%s: health check %q", name, hc)
		}
		if s.DependsOn["redis"].Condition != "service_healthy" {
			t.Errorf("%s: does not wait for a healthy Redis", name)
		}
		if s.Command[0] == "serve" && (env["RUNHUB_RUNTIME"] != "runners" || env["RUNHUB_ADDR"] != "0.0.0.0:8080") {
			t.Errorf("%s: runtime %q, addr %q", name, env["RUNHUB_RUNTIME"], env["RUNHUB_ADDR"])
		}
	}
	sort.Strings(roles["serve"])
	sort.Strings(roles["runner"])
	if strings.Join(roles["serve"], ",") != "hub1,hub2" || strings.Join(roles["runner"], ",") != "runner1,runner2" {
		t.Fatalf("want hubs hub1,hub2 and runners runner1,runner2; got %v", roles)
	}
	lb := c.Services["lb"]
	if !strings.HasPrefix(lb.Image, "nginx:") || len(lb.Ports) != 1 || !strings.Contains(lb.Ports[0], "127.0.0.1:8080}:8080") {
		t.Errorf("lb: image %q ports %v", lb.Image, lb.Ports)
	}
	for _, hub := range []string{"hub1", "hub2"} {
		if lb.DependsOn[hub].Condition != "service_healthy" {
			t.Errorf("lb: does not wait for %s", hub)
		}
	}
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s: volume %s is not declared", name, src)
			}
		}
	}
	for _, m := range []string{"prometheus", "grafana"} {
		if p := c.Services[m].Profiles; len(p) != 1 || p[0] != "monitoring" {
			t.Errorf("%s: profiles %v, want [monitoring]", m, p)
		}
	}

	// Prometheus scrapes every runhub process on its metrics address.
	prom, err := os.ReadFile(filepath.Join(deployDir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{`"hub1:9090"`, `"hub2:9090"`, `"runner1:9090"`, `"runner2:9090"`} {
		if !strings.Contains(string(prom), target) {
			t.Errorf("prometheus.yml does not scrape %s", target)
		}
	}
}

// knownVariables are the RUNHUB_ variables the binary reads (the
// configuration reference's).
func knownVariables(t testing.TB) map[string]bool {
	known := map[string]bool{}
	for _, s := range referenceSections() {
		for _, env := range s.flags.envOf {
			known[env] = true
		}
		for _, e := range s.flags.envOnly {
			known[e.name] = true
		}
	}
	return known
}

// The Dockerfile builds one static binary with the version stamped and the
// web UI embedded, and runs it as nonroot on distroless with a health
// check that needs no shell; .dockerignore keeps what the build needs.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	for _, want := range []string{
		"CGO_ENABLED=0",
		`-X main.version=${VERSION}`,
		"./cmd/hub",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER 65532:65532",
		`HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/hub", "healthcheck"]`,
		`ENTRYPOINT ["/hub"]`,
		`CMD ["serve"]`,
		"RUNHUB_LOG_FORMAT=json",
		"--chown=65532:65532 /out/data /data",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if strings.Count(df, "\nFROM ") != 2 {
		t.Errorf("Dockerfile: want a build stage and a runtime stage")
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum", "cmd/hub/main.go", "web/static/index.html", "web/embed.go", "journal/redis/lua/append.lua", "hub/metrics/metrics.go"}
	sc := bufio.NewScanner(strings.NewReader(string(ignore)))
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		for _, f := range needed {
			if ignored(p, f) {
				t.Errorf(".dockerignore %q excludes %s, which the build needs", p, f)
			}
		}
	}
	for _, f := range needed {
		if _, err := os.Stat(filepath.Join("../..", f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// ignored reports whether a .dockerignore pattern excludes file (the
// pattern, "**/" patterns and parent directories).
func ignored(pattern, file string) bool {
	pattern = strings.TrimPrefix(pattern, "**/")
	for p := file; p != "." && p != "/"; p = path.Dir(p) {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
		if ok, _ := path.Match(pattern, path.Base(p)); ok {
			return true
		}
	}
	return false
}

// processRegistry builds a process's metrics the way hub serve wires them
// in Redis mode (every gauge registered) and returns each metric's label
// names.
func processRegistry(t *testing.T) map[string]map[string]bool {
	rs := redistest.Start(t, redistest.Options{})
	var cfg RuntimeConfig
	if err := runnerFlags(&cfg, envOf(nil)).Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg.RedisURL = rs.URL()
	m := metrics.New(version)
	rt, err := openRuntime(context.Background(), cfg, quietLog(), RuntimeRunners, false, m)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	h := hub.New(hub.Config{Logger: quietLog(), Metrics: m}, rt.store, rt.router)
	defer h.Shutdown(context.Background())
	hubGauges(m, h)
	m.HTTPRequest(http.MethodGet, "/healthz", 200) // a labelled counter shows once it has a child
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		name := mf.GetName()
		out[name] = labels
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				out[name+suf] = labels
			}
			out[name+"_bucket"] = map[string]bool{"le": true}
			for l := range labels {
				out[name+"_bucket"][l] = true
			}
		}
	}
	return out
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promCall     = regexp.MustCompile(`^\s*\(`)
)

// promKeywords are PromQL words that are neither functions nor metrics.
var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"group_left": true, "group_right": true}

// queryMetrics returns the metric names and the grouping labels a PromQL
// expression uses.
func queryMetrics(expr string) (names, labels []string) {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	for _, g := range promGrouping.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	e = promGrouping.ReplaceAllString(e, " ")
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		word := e[loc[0]:loc[1]]
		if promCall.MatchString(e[loc[1]:]) || promKeywords[word] || (loc[0] > 0 && e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9') {
			continue // a function call, a keyword, or part of a number (1e3)
		}
		names = append(names, word)
	}
	return names, labels
}

func TestQueryMetrics(t *testing.T) {
	names, labels := queryMetrics(`histogram_quantile(0.99, sum by (le, op) (rate(runhub_journal_read_duration_seconds_bucket{instance=~"$instance",op!="x"}[$__rate_interval]))) / on (instance) group_left up`)
	if strings.Join(names, ",") != "runhub_journal_read_duration_seconds_bucket,up" || strings.Join(labels, ",") != "le,op,instance" {
		t.Fatalf("names %v labels %v", names, labels)
	}
}

// Every metric deploy/grafana-dashboard.json queries exists in a hub
// process's registry, with the labels the panels group by; and every
// runhub metric has a panel.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if e, ok := x["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(dash["panels"])
	if len(exprs) < 20 {
		t.Fatalf("only %d queries in the dashboard", len(exprs))
	}
	reg := processRegistry(t)
	// Labels Prometheus adds to every scraped series.
	targetLabels := map[string]bool{"instance": true, "job": true, "role": true}
	used := map[string]bool{}
	for _, e := range exprs {
		names, labels := queryMetrics(e)
		if len(names) == 0 {
			t.Errorf("query %q names no metric", e)
		}
		for _, n := range names {
			used[n] = true
			if _, ok := reg[n]; !ok {
				t.Errorf("query %q: metric %s does not exist", e, n)
			}
		}
		for _, l := range labels {
			found := targetLabels[l]
			for _, n := range names {
				found = found || reg[n][l]
			}
			if !found {
				t.Errorf("query %q groups by %s, a label none of its metrics has", e, l)
			}
		}
	}
	for name := range reg {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !strings.HasPrefix(name, "runhub_") || used[name] || used[base+"_bucket"] || used[base+"_count"] || used[base] {
			continue
		}
		t.Errorf("runhub metric %s has no panel", name)
	}
}

// deploy/nginx.conf, run by a real nginx in front of two hub replicas and
// a runner on Redis: a tab's WebSocket passes through it and streams a run
// focused through the other replica's journal; SSE streams unbuffered; the
// caller's X-Request-ID reaches the hub and comes back; /metrics is not
// reachable through the load balancer.
func TestNginx_FrontsTheHubs(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed (apt-get install nginx-light)")
	}
	rs := redistest.Start(t, redistest.Options{})
	common := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LOG_LEVEL=warn", "RUNHUB_LEASE_TTL=2s"}
	h1 := startHub(t, t.TempDir(), append(common, "RUNHUB_RUNTIME=runners", "RUNHUB_NODE_ID=hub1")...)
	h2 := startHub(t, t.TempDir(), append(common, "RUNHUB_RUNTIME=runners", "RUNHUB_NODE_ID=hub2")...)
	startRunner(t, append(common, "RUNHUB_NODE_ID=runner1")...)

	raw, err := os.ReadFile(filepath.Join(deployDir, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	lb := freeAddr(t)
	conf := string(raw)
	for old, repl := range map[string]string{"server hub1:8080": "server " + h1.addr, "server hub2:8080": "server " + h2.addr, "listen 8080;": "listen " + lb + ";"} {
		if !strings.Contains(conf, old) {
			t.Fatalf("nginx.conf lacks %q", old)
		}
		conf = strings.Replace(conf, old, repl, 1)
	}
	dir := t.TempDir()
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	temp := "client_body_temp_path " + dir + "/client_body; proxy_temp_path " + dir + "/proxy; fastcgi_temp_path " + dir + "/fastcgi; uwsgi_temp_path " + dir + "/uwsgi; scgi_temp_path " + dir + "/scgi;"
	conf = strings.Replace(conf, "http {", "http {\n    "+temp, 1)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(nginx, "-e", "stderr", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off; pid "+dir+"/nginx.pid;")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("nginx:\n%s", out.String())
		}
	})
	base := "http://" + lb
	waitFor(t, 10*time.Second, "nginx to answer", func() bool {
		resp, err := http.Get(base + "/lb-healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tab, err := client.Dial(ctx, "ws://"+lb+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatalf("WebSocket through nginx: %v", err)
	}
	defer tab.Close()
	res, err := tab.Control(ctx, protocol.Control{Op: protocol.OpStart, Message: "through nginx", Metadata: []byte(`{"sim":{"tokens":40,"token_ms":5}}`)})
	if err != nil || !res.Accepted {
		t.Fatalf("start through nginx: %+v %v", res, err)
	}
	if err := tab.Focus(ctx, res.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	var events []protocol.Envelope
	for len(events) == 0 || !events[len(events)-1].Terminal {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		if em, ok := m.(*protocol.EventMessage); ok {
			events = append(events, *em.Event)
		}
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}

	// SSE through nginx: the whole run, then the stream ends.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+res.RunID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Request-ID", "lb-test-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sse := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "id: ") {
			sse++
		}
	}
	resp.Body.Close()
	if sse != len(events) || resp.Header.Get("X-Request-ID") != "lb-test-42" {
		t.Fatalf("SSE through nginx: %d of %d events, X-Request-ID %q", sse, len(events), resp.Header.Get("X-Request-ID"))
	}
	// Without one, nginx makes up the request id the hub answers with.
	resp, err = http.Get(base + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := resp.Header.Get("X-Request-ID"); resp.StatusCode != 200 || len(id) != 32 {
		t.Fatalf("GET /v1/sessions through nginx: %d, X-Request-ID %q", resp.StatusCode, id)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics through nginx: %d, want 404", resp.StatusCode)
	}

	// A stopped hub: new sockets go to the other one.
	if err := h1.stop(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		c, err := client.Dial(ctx, "ws://"+lb+"/v1/ws", client.Options{})
		if err != nil {
			t.Fatalf("socket %d after a hub stopped: %v", i, err)
		}
		c.Close()
	}
}
