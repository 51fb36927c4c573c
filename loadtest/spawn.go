package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runhub/runhub/internal/redistest"
)

// child is a process the generator started (hub, runner, redis-server).
type child struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	addr string // hubs: the HTTP address
	data string // hubs: the data directory (RUNHUB_DATA)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// tailBuffer keeps the last 64 KiB a child wrote (for error reports).
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 64<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-(64<<10):]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// cluster is what -spawn or -spawn-redis started.
type cluster struct {
	dir      string
	children []*child
	hubs     []*child
	dataEnv  string             // another variable a hub's data directory goes in (floorhub's FLOORHUB_JOURNAL), or ""
	redis    *redistest.Cluster // -redis-cluster: stopped after the children
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// hubBinary returns -hub-bin, or builds pkg (./cmd/hub, or
// ./loadtest/floorhub with -floor) of the module the generator runs in.
func hubBinary(path, dir, pkg string) (string, error) {
	if path != "" {
		return path, nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locate the module to build %s (or pass -hub-bin): %v", pkg, err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the runhub module: pass -hub-bin")
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(mod)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return bin, nil
}

func (cl *cluster) start(name string, env []string, bin string, args ...string) (*child, error) {
	c := &child{name: name, out: &tailBuffer{}}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the generator
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", name, err)
	}
	cl.children = append(cl.children, c)
	return c, nil
}

func (cl *cluster) startHub(bin string, env ...string) (*child, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("hub%d", len(cl.hubs)+1)
	data := filepath.Join(cl.dir, name)
	pre := []string{"RUNHUB_ADDR=" + addr, "RUNHUB_DATA=" + data, "RUNHUB_LOG_LEVEL=warn", "RUNHUB_PPROF=1", "RUNHUB_SHUTDOWN_GRACE=2s"}
	if cl.dataEnv != "" {
		pre = append(pre, cl.dataEnv+"="+data)
	}
	c, err := cl.start(name, append(pre, env...), bin, "serve")
	if err != nil {
		return nil, err
	}
	c.addr, c.data = addr, data
	cl.hubs = append(cl.hubs, c)
	return c, waitHealthy(c)
}

func waitHealthy(c *child) error { return waitReady(c, "/readyz") }

// waitReady polls GET path on the child's address until it answers 200.
func waitReady(c *child, path string) error {
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		resp, err := hc.Get("http://" + c.addr + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if c.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become ready; output:\n%s", c.name, c.out.String())
}

// spawnEmbedded starts one hub with the embedded journal in a temp dir
// under base. dataEnv, if not "", is set to the hub's data directory too.
func spawnEmbedded(bin, base string, extraEnv []string, dataEnv string) (*cluster, error) {
	dir, err := os.MkdirTemp(base, "runhub-loadtest-")
	if err != nil {
		return nil, err
	}
	cl := &cluster{dir: dir, dataEnv: dataEnv}
	if _, err := cl.startHub(bin, extraEnv...); err != nil {
		cl.stop()
		return nil, err
	}
	return cl, nil
}

// spawnRedis starts redis-server (no persistence) on a free loopback port,
// or with inCluster a Redis Cluster of 3 masters and 3 replicas, nHubs hubs
// in runners mode and one runner allowed maxRuns runs.
func spawnRedis(bin string, nHubs, maxRuns int, extraEnv []string, inCluster bool) (*cluster, error) {
	dir, err := os.MkdirTemp("", "runhub-loadtest-")
	if err != nil {
		return nil, err
	}
	cl := &cluster{dir: dir}
	fail := func(err error) (*cluster, error) {
		cl.stop()
		return nil, err
	}
	var url string
	if inCluster {
		rc, err := redistest.NewCluster(redistest.ClusterOptions{Args: []string{"--maxclients", "10000"}})
		if err != nil {
			return fail(fmt.Errorf("-redis-cluster: %v", err))
		}
		cl.redis, url = rc, rc.URL()
	} else {
		rbin, err := exec.LookPath("redis-server")
		if err != nil {
			return fail(fmt.Errorf("-spawn-redis needs redis-server on PATH (apt-get install redis-server): %v", err))
		}
		raddr, err := freeLoopbackAddr()
		if err != nil {
			return fail(err)
		}
		_, port, _ := net.SplitHostPort(raddr)
		r, err := cl.start("redis", nil, rbin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no", "--loglevel", "warning", "--maxclients", "10000")
		if err != nil {
			return fail(err)
		}
		r.addr = raddr
		if err := waitTCP(raddr, 10*time.Second); err != nil {
			return fail(fmt.Errorf("redis-server: %v\n%s", err, r.out.String()))
		}
		url = "redis://" + raddr + "/0"
	}
	env := append([]string{"RUNHUB_REDIS_URL=" + url, "RUNHUB_RUNTIME=runners"}, extraEnv...)
	if _, err := cl.start("runner", append([]string{"RUNHUB_REDIS_URL=" + url, "RUNHUB_LOG_LEVEL=warn",
		fmt.Sprintf("RUNHUB_MAX_RUNS=%d", maxRuns), "RUNHUB_SHUTDOWN_GRACE=2s"}, extraEnv...), bin, "runner"); err != nil {
		return fail(err)
	}
	for range nHubs {
		if _, err := cl.startHub(bin, env...); err != nil {
			return fail(err)
		}
	}
	return cl, nil
}

func waitTCP(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends every child (SIGTERM, then SIGKILL after 5 s; hubs first, redis
// last) and removes the temp dir.
func (cl *cluster) stop() {
	for i := len(cl.children) - 1; i >= 0; i-- {
		c := cl.children[i]
		if c.cmd.Process == nil || c.cmd.ProcessState != nil {
			continue
		}
		c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
	}
	if cl.redis != nil {
		cl.redis.Close()
	}
	if cl.dir != "" {
		os.RemoveAll(cl.dir)
	}
}

// pids lists the processes whose CPU and memory the report sums.
func (cl *cluster) pids() []namedPID {
	var out []namedPID
	for _, c := range cl.children {
		p := namedPID{Name: c.name, PID: c.pid()}
		if slices.Contains(cl.hubs, c) {
			p.Addr = c.addr // its /metrics
		}
		out = append(out, p)
	}
	if cl.redis != nil {
		for i, n := range cl.redis.Nodes {
			out = append(out, namedPID{Name: fmt.Sprintf("redis%d", i+1), PID: n.PID()})
		}
	}
	return out
}

type namedPID struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Addr string `json:"addr,omitempty"` // a spawned hub's address
}
