package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options configures a test server.
type Options struct {
	// AOF turns the append-only file on (appendonly yes, appendfsync
	// always), so every acknowledged write survives Kill and Restart.
	// Default off: no persistence at all (--save "" --appendonly no).
	AOF bool
	// Dir is the server's working directory (where the AOF lives). Default:
	// a fresh directory under /tmp, removed when the Server is closed. A
	// Dir given here is created if missing and never removed.
	Dir string
	// Args are extra redis-server arguments, e.g. "--maxmemory", "64mb".
	Args []string
	// Port is a TCP port to listen on, on 127.0.0.1 (or Bind), besides
	// the unix socket. Default 0: the unix socket only.
	Port int
	// Bind is the address Port listens on (default 127.0.0.1), e.g. a
	// network namespace's.
	Bind string
	// Command, when set, makes the server's command from the binary and
	// its arguments (e.g. to run it in a network namespace:
	// internal/netfault's Node.Command). The unix socket, a file, is
	// reached from any namespace.
	Command func(name string, args ...string) *exec.Cmd
}

// StartTimeout bounds how long New waits for a server to answer PING
// (loading a large AOF counts).
const StartTimeout = 15 * time.Second

// Server is one redis-server process (and its restarts).
type Server struct {
	opts   Options
	bin    string
	tmp    string // the /tmp directory this package created (socket, maybe dir)
	socket string
	dir    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *bytes.Buffer // output of the current process
	closed bool
}

// Start starts a server for the test and stops it (and removes its
// temporary files) when the test ends. It fails the test when redis-server
// is missing or does not come up.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a server outside a test (from TestMain). The caller must Close
// it.
func New(opts Options) (*Server, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("/tmp", "rh")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{opts: opts, bin: bin, tmp: tmp, socket: filepath.Join(tmp, "r.sock"), dir: opts.Dir}
	if s.dir == "" {
		s.dir = tmp
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("redistest: %w", err)
	}
	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// findBinary locates redis-server: $REDIS_SERVER, then PATH, then
// /usr/bin/redis-server.
func findBinary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("redistest: redis-server not found (not on PATH, not at /usr/bin/redis-server, $REDIS_SERVER unset); " +
		"install it (apt-get install redis-server) — tests that need Redis fail rather than skip")
}

// URL is the server's address as a go-redis URL: unix:///tmp/rhNNN/r.sock.
func (s *Server) URL() string { return "unix://" + s.socket }

// Addr is the server's TCP address ("127.0.0.1:<Port>"), "" without a Port.
func (s *Server) Addr() string {
	if s.opts.Port == 0 {
		return ""
	}
	return net.JoinHostPort(s.bind(), strconv.Itoa(s.opts.Port))
}

// PID is the current process's id, 0 when none runs.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Socket is the path of the server's unix socket.
func (s *Server) Socket() string { return s.socket }

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// Log returns what the current (or last) process wrote to stdout/stderr.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

func (s *Server) bind() string {
	if s.opts.Bind != "" {
		return s.opts.Bind
	}
	return "127.0.0.1"
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.opts.Port),
		"--unixsocket", s.socket,
		"--unixsocketperm", "700",
		"--dir", s.dir,
		"--save", "",
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "warning",
	}
	if s.opts.Port != 0 {
		a = append(a, "--bind", s.bind())
	}
	if s.opts.AOF {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	return append(a, s.opts.Args...)
}

func (s *Server) start() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("redistest: server is closed")
	}
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("redistest: server is already running")
	}
	_ = os.Remove(s.socket) // a stale socket from a killed process
	log := &bytes.Buffer{}
	w := &lockedWriter{mu: &s.mu, buf: log}
	var cmd *exec.Cmd
	if s.opts.Command != nil {
		cmd = s.opts.Command(s.bin, s.args()...)
	} else {
		cmd = exec.Command(s.bin, s.args()...)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := waitReady(s.socket, exited, StartTimeout); err != nil {
		s.stop(syscall.SIGKILL)
		return fmt.Errorf("redistest: redis-server (%s) did not come up: %w\n%s", strings.Join(cmd.Args, " "), err, s.Log())
	}
	return nil
}

// waitReady polls the socket until the server answers PING with PONG (not
// LOADING), the process exits, or the timeout passes.
func waitReady(socket string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("the process exited")
		default:
		}
		if last = ping(socket); last == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no PONG within %v: %v", timeout, last)
}

func ping(socket string) error {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// Stop shuts the server down gracefully (SIGTERM: Redis flushes its AOF) and
// waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill kills the server (SIGKILL: no shutdown work) and waits for it to
// exit, as a crash would.
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart stops the server (if running) and starts it again with the same
// socket, directory and options; with AOF on, the data survives. It fails
// the test if the new process does not come up.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
}

// Running reports whether a server process is up (started and not stopped).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Close stops the server and removes the temporary directory this package
// created. A Server cannot be restarted after Close.
func (s *Server) Close() {
	s.Stop()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	_ = os.RemoveAll(s.tmp)
}

// lockedWriter appends process output to the Server's log under its lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() < 1<<20 {
		w.buf.Write(p)
	}
	return len(p), nil
}
