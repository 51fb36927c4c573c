package execdrv

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/internal/lineread"
	"github.com/runhub/runhub/protocol"
)

// proc is one running command.
type proc struct {
	d      *Driver
	cmd    *exec.Cmd
	pid    int
	inW    *os.File
	outR   *os.File
	errR   *os.File
	lines  chan []byte
	exited chan struct{} // closed once Wait returned
	quit   chan struct{} // closed by cleanup: the readers stop

	waitErr error // set before exited closes

	wmu sync.Mutex // one stdin writer at a time

	tmu    sync.Mutex
	tail   []string // last stderr lines
	errEOF chan struct{}

	wg sync.WaitGroup
}

func (d *Driver) start(x *driver.Execution) (*proc, error) {
	cmd := exec.Command(d.cfg.Command, d.cfg.Args...)
	cmd.Dir = d.cfg.Dir
	env := slices.Clone(d.cfg.Env)
	if d.cfg.APIKeyEnv != "" && !d.cfg.APIKey.Empty() {
		env = append(env, d.cfg.APIKeyEnv+"="+d.cfg.APIKey.Reveal())
	}
	cmd.Env = append(env, "RUNHUB_RUN_ID="+x.RunID, "RUNHUB_SESSION_ID="+x.SessionID,
		"RUNHUB_PROFILE="+cmp.Or(x.Request.Profile, d.cfg.Profile))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group: signals reach its children
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	closeAll(inR, outW, errW) // the child holds its ends
	p := &proc{d: d, cmd: cmd, pid: cmd.Process.Pid, inW: inW, outR: outR, errR: errR,
		lines: make(chan []byte, 64), exited: make(chan struct{}), quit: make(chan struct{}), errEOF: make(chan struct{})}
	p.wg.Add(3)
	go func() {
		defer p.wg.Done()
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go p.readStdout()
	go p.readStderr()
	return p, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (p *proc) readStdout() {
	defer p.wg.Done()
	defer close(p.lines)
	br := bufio.NewReaderSize(p.outR, 64<<10)
	for {
		line, tooLong, err := lineread.Read(br, maxLineBytes)
		if tooLong {
			line = []byte("{}") // counted as a skipped line
		}
		if len(line) > 0 {
			select {
			case p.lines <- line:
			case <-p.quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proc) readStderr() {
	defer p.wg.Done()
	defer close(p.errEOF)
	br := bufio.NewReaderSize(p.errR, 4<<10)
	for {
		line, _, err := lineread.Read(br, maxLineBytes)
		if s := strings.TrimSpace(string(line)); s != "" {
			p.tmu.Lock()
			p.tail = append(p.tail, protocol.Truncate(s, maxStderrLine))
			if len(p.tail) > stderrLines {
				p.tail = p.tail[1:]
			}
			p.tmu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// stderrTail waits (briefly) for stderr to end and returns its last lines.
func (p *proc) stderrTail() string {
	select {
	case <-p.errEOF:
	case <-time.After(time.Second):
	}
	p.tmu.Lock()
	defer p.tmu.Unlock()
	return strings.Join(p.tail, " | ")
}

// send writes one JSON line on stdin. A command that does not read its
// stdin cannot block the run: the write gives up after writeTimeout.
func (p *proc) send(log *slog.Logger, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.inW.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := p.inW.Write(append(b, '\n')); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EPIPE) {
		log.Warn("exec: could not write to the command's stdin", "err", err)
	}
}

// steer forwards guidance to the command until cleanup.
func (p *proc) steer(log *slog.Logger, in <-chan string) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case text := <-in:
				p.send(log, Control{Op: "steer", Text: text})
			case <-p.quit:
				return
			}
		}
	}()
}

// whileAlive returns a context that ends with ctx or when the command
// exits, so a prompt does not wait on a command that is gone.
func (p *proc) whileAlive(ctx context.Context) (context.Context, context.CancelFunc) {
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-pctx.Done():
		}
	}()
	return pctx, cancel
}

// promptErr is the error of a prompt that ended without an answer: ctx's
// when the run was cancelled, none when the command exited (the main loop
// reports the exit), else err.
func (p *proc) promptErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-p.exited:
		return nil
	default:
		return err
	}
}

func (p *proc) killGroup(sig syscall.Signal) {
	syscall.Kill(-p.pid, sig) // ESRCH: nothing left
}

func (p *proc) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// stop ends the command: the cancel line (when cancel), its stdin closed,
// cancel_grace to exit on its own, SIGTERM to its group, kill_grace, then
// SIGKILL; it returns once the command has been waited for.
func (p *proc) stop(log *slog.Logger, cancel bool) {
	if cancel {
		p.send(log, Control{Op: protocol.OpCancel})
	}
	p.wmu.Lock()
	p.inW.Close()
	p.wmu.Unlock()
	if p.waitExit(p.d.cfg.CancelGrace) {
		return
	}
	log.Info("exec: the command did not exit; sending SIGTERM", "pid", p.pid)
	p.killGroup(syscall.SIGTERM)
	if p.waitExit(p.d.cfg.KillGrace) {
		return
	}
	log.Warn("exec: the command ignored SIGTERM; sending SIGKILL", "pid", p.pid)
	p.killGroup(syscall.SIGKILL)
	<-p.exited
}

// cleanup makes sure nothing of the run is left: the command waited for,
// its process group killed, the pipes closed, the goroutines ended.
func (p *proc) cleanup() {
	select {
	case <-p.exited:
	default:
		p.killGroup(syscall.SIGKILL)
		<-p.exited
	}
	p.killGroup(syscall.SIGKILL)
	close(p.quit)
	p.wmu.Lock()
	p.inW.Close()
	p.wmu.Unlock()
	p.outR.Close()
	p.errR.Close()
	p.wg.Wait()
}
