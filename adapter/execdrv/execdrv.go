// Package execdrv is the exec driver: it runs a configured command once per
// run and speaks runhub's JSONL convention with it (docs/exec-driver.md).
//
// runhub writes a start line, then controls, as JSON lines on the command's
// stdin; the command writes one event per line on stdout ({"type",
// "payload"} as in protocol.md §1); stderr is kept as diagnostics (its last
// lines explain a failure). The command ends the run with a done, error or
// cancelled line. A command that exits without one ends the run with error
// provider_error ("exit status N" and the last stderr lines, redacted).
//
// A cancel writes {"op":"cancel"}, then after cancel_grace sends SIGTERM to
// the command's process group, then after kill_grace SIGKILL. The command
// is always waited for (no zombie), and whatever is left of its process
// group when the run ends is killed. The command gets a minimal
// environment: never the hub's whole environment, so never another
// profile's key.
package execdrv

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Defaults and bounds.
const (
	DefaultCancelGrace = 5 * time.Second
	DefaultKillGrace   = 5 * time.Second
	maxLineBytes       = 1 << 20 // one stdout line
	stderrLines        = 10      // stderr lines kept for an error message
	maxStderrLine      = 300     // bytes kept of one stderr line
	maxMessage         = 2000    // bytes of an error message
	writeTimeout       = 5 * time.Second
	drainAfterExit     = 2 * time.Second // reading stdout after the command exited
)

// InheritedEnv are the variables of the hub's environment every command
// gets (when set); a profile's inherit_env adds names.
var InheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER"}

// Config is one profile's driver settings.
type Config struct {
	Command      string
	Args         []string
	Dir          string
	Env          []string       // the command's environment ("NAME=value"), without the key
	APIKeyEnv    string         // the key is passed under this name
	APIKey       profile.Secret // the profile's key (empty: none)
	Profile      string         // the profile's name (RUNHUB_PROFILE)
	Model        string         // the start line's model unless a start names one
	Instructions string         // the start line's instructions
	CancelGrace  time.Duration  // after the cancel line, before SIGTERM (default 5s)
	KillGrace    time.Duration  // after SIGTERM, before SIGKILL (default 5s)
	Timeout      time.Duration  // bound on a whole run (0: none)
	// ClarifyTimeout is how long a clarify prompt waits (0: until the run
	// ends).
	ClarifyTimeout time.Duration
	Logger         *slog.Logger
}

// Driver runs one command per run.
type Driver struct {
	cfg   Config
	hello helloCaps // what the command's last hello line said it can do
}

// New returns a driver for cfg.
func New(cfg Config) (*Driver, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return nil, errors.New("exec: command is required")
	}
	cfg.CancelGrace = cmp.Or(cfg.CancelGrace, DefaultCancelGrace)
	cfg.KillGrace = cmp.Or(cfg.KillGrace, DefaultKillGrace)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Driver{cfg: cfg}, nil
}

// Steers reports that guidance reaches the command as steer lines.
func (d *Driver) Steers() bool { return true }

// StartLine is the first line on the command's stdin.
type StartLine struct {
	Op           string          `json:"op"` // "start"
	RunID        string          `json:"run_id"`
	SessionID    string          `json:"session_id"`
	Message      string          `json:"message"`
	Profile      string          `json:"profile"`
	Model        string          `json:"model,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	Workspace    string          `json:"workspace,omitempty"`
	Toolsets     []string        `json:"toolsets,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	// Attachments are the start's, as the client gave them (the journal
	// stores them redacted): references, never file contents. A URL,
	// file:// ones included, is the client's word, not checked: runhub
	// reads nothing on the client's behalf.
	Attachments []protocol.Attachment `json:"attachments,omitempty"`
	// History is the session's earlier turns, each user turn with the
	// attachments of its start, and each run's tool calls with their ends
	// (tool_calls: what its tool.started and tool.done lines said) on its
	// assistant turn, or its user turn when it streamed no text. Fields
	// are only ever added to a turn: a command that reads role and content
	// alone sees what it always did.
	History []driver.AttachedTurn `json:"history"`
}

// Control is a later line on the command's stdin.
type Control struct {
	Op         string `json:"op"` // cancel, approve, clarify, steer
	ApprovalID string `json:"approval_id,omitempty"`
	Choice     string `json:"choice,omitempty"`
	ClarifyID  string `json:"clarify_id,omitempty"`
	Response   string `json:"response,omitempty"`
	Status     string `json:"status,omitempty"` // clarify: resolved or expired
	Text       string `json:"text,omitempty"`
}

// Line is one event line on the command's stdout.
type Line struct {
	Type    protocol.EventType `json:"type"`
	Payload json.RawMessage    `json:"payload"`
}

// Execute implements driver.Driver.
func (d *Driver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	begin := time.Now()
	log := d.cfg.Logger.With("run_id", x.RunID, "session_id", x.SessionID)
	history, err := x.AttachedTranscript(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("exec: transcript: %w", err)
	}
	p, err := d.start(x)
	if err != nil {
		return nil, &driver.Error{Code: protocol.ErrorProviderError, Message: d.safe("could not start the command: " + err.Error())}
	}
	defer p.cleanup()
	model := cmp.Or(x.Request.Model, d.cfg.Model)
	if history == nil {
		history = []driver.AttachedTurn{}
	}
	p.send(log, StartLine{Op: "start", RunID: x.RunID, SessionID: x.SessionID, Message: x.Request.Message,
		Profile: cmp.Or(x.Request.Profile, d.cfg.Profile), Model: model, Instructions: d.cfg.Instructions,
		Workspace: x.Request.Workspace, Toolsets: x.Request.Toolsets, Metadata: x.Request.Metadata,
		Attachments: x.Request.Attachments, History: history})
	p.steer(log, x.Steering())

	var timeout <-chan time.Time
	if d.cfg.Timeout > 0 {
		t := time.NewTimer(d.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	exited := p.exited
	var drain <-chan time.Time
	skipped := 0
	defer func() {
		if skipped > 0 {
			log.Warn("exec: skipped stdout lines that are not valid events", "lines", skipped)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			p.stop(log, true)
			return nil, ctx.Err()
		case <-timeout:
			p.stop(log, true)
			return nil, &driver.Error{Code: protocol.ErrorTimeout, Message: fmt.Sprintf("the run exceeded its %s timeout", d.cfg.Timeout)}
		case <-exited:
			// Whatever it wrote is still in the pipe; stragglers of its
			// process group that hold stdout open are killed.
			exited = nil
			p.killGroup(syscall.SIGKILL)
			t := time.NewTimer(drainAfterExit)
			defer t.Stop()
			drain = t.C
		case <-drain:
			drain = nil
			p.outR.Close() // something outside the group holds stdout
		case line, ok := <-p.lines:
			if !ok {
				return nil, d.ended(log, p)
			}
			u, end, err := d.handle(ctx, log, x, p, line, &skipped)
			switch {
			case err != nil && ctx.Err() != nil:
				p.stop(log, true)
				return nil, ctx.Err()
			case err != nil:
				p.stop(log, false)
				return nil, err
			case end:
				p.stop(log, false) // stdin closes: the command is done
				if u == nil {
					u = &protocol.Usage{}
				}
				u.Model = cmp.Or(u.Model, model)
				u.Provider = cmp.Or(u.Provider, Kind)
				if u.DurationMS == 0 {
					u.DurationMS = time.Since(begin).Milliseconds()
				}
				return u, nil
			}
		}
	}
}

// handle maps one stdout line. end reports the command's done (with its
// usage); a terminal error or cancelled line is returned as err.
func (d *Driver) handle(ctx context.Context, log *slog.Logger, x *driver.Execution, p *proc, raw []byte, skipped *int) (*protocol.Usage, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false, nil
	}
	raw = d.scrubLine(raw)
	var l Line
	if err := json.Unmarshal(raw, &l); err != nil || l.Type == "" {
		*skipped++
		log.Debug("exec: stdout line is not a JSON event", "line", d.safe(protocol.Truncate(string(raw), 200)))
		return nil, false, nil
	}
	if len(l.Payload) == 0 || string(l.Payload) == "null" {
		l.Payload = json.RawMessage("{}")
	}
	switch l.Type {
	case protocol.EventDone:
		var dp struct {
			Usage *protocol.Usage `json:"usage"`
		}
		json.Unmarshal(l.Payload, &dp)
		return dp.Usage, true, nil
	case protocol.EventCancelled:
		var cp protocol.CancelledPayload
		json.Unmarshal(l.Payload, &cp)
		return nil, false, &driver.Cancelled{Reason: d.safe(cmp.Or(cp.Reason, "cancelled by the command"))}
	case protocol.EventError:
		if protocol.IsTerminal(l.Type, l.Payload) {
			var ep protocol.ErrorPayload
			json.Unmarshal(l.Payload, &ep)
			return nil, false, &driver.Error{Code: cmp.Or(ep.Code, protocol.ErrorProviderError),
				Message: d.safe(cmp.Or(ep.Message, "the command reported an error"))}
		}
	case lineHello:
		d.hello.set(log, raw, l.Payload)
		return nil, false, nil
	case protocol.EventRunStarted, protocol.EventApprovalRes, protocol.EventClarifyRes:
		*skipped++ // runhub writes these itself
		log.Debug("exec: the command may not emit this event type", "type", l.Type)
		return nil, false, nil
	case protocol.EventApprovalReq:
		var req protocol.ApprovalRequestedPayload
		if err := json.Unmarshal(l.Payload, &req); err != nil || req.ApprovalID == "" {
			*skipped++
			return nil, false, nil
		}
		pctx, cancel := p.whileAlive(ctx)
		defer cancel()
		choice, err := x.Approval(pctx, req)
		if err != nil {
			return nil, false, p.promptErr(ctx, err)
		}
		p.send(log, Control{Op: protocol.OpApprove, ApprovalID: req.ApprovalID, Choice: choice})
		return nil, false, nil
	case protocol.EventClarifyReq:
		var req protocol.ClarifyRequestedPayload
		if err := json.Unmarshal(l.Payload, &req); err != nil || req.ClarifyID == "" {
			*skipped++
			return nil, false, nil
		}
		pctx, cancel := p.whileAlive(ctx)
		defer cancel()
		resp, ok, err := x.Clarify(pctx, req, d.cfg.ClarifyTimeout)
		if err != nil {
			return nil, false, p.promptErr(ctx, err)
		}
		status := "resolved"
		if !ok {
			status = "expired"
		}
		p.send(log, Control{Op: protocol.OpClarify, ClarifyID: req.ClarifyID, Response: resp, Status: status})
		return nil, false, nil
	}
	if _, err := x.Emit(ctx, l.Type, l.Payload); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) { // not a valid event: skipped, the run goes on
			*skipped++
			log.Debug("exec: invalid event from the command", "type", protocol.Truncate(string(l.Type), 40), "err", pe.Message)
			return nil, false, nil
		}
		return nil, false, err
	}
	return nil, false, nil
}

// scrubLine replaces the profile's key in a stdout line (as it appears
// inside a JSON string), so a command that prints its key never gets it
// journaled.
func (d *Driver) scrubLine(line []byte) []byte {
	key := d.cfg.APIKey.Reveal()
	if len(key) < 4 {
		return line
	}
	enc, _ := json.Marshal(key)
	enc = enc[1 : len(enc)-1]
	if !bytes.Contains(line, enc) {
		return line
	}
	return bytes.ReplaceAll(line, enc, []byte(journal.Redacted))
}

// ended reports a command whose stdout closed without a terminal event.
func (d *Driver) ended(log *slog.Logger, p *proc) error {
	p.stop(log, false)
	msg := "the command exited without a terminal event (" + exitStatus(p.waitErr) + ")"
	if tail := p.stderrTail(); tail != "" {
		msg += "; stderr: " + tail
	}
	return &driver.Error{Code: protocol.ErrorProviderError, Message: d.safe(msg)}
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.Error()
	}
	return err.Error()
}

// safe makes command output fit for an event: the key scrubbed, secrets
// redacted, valid UTF-8, bounded.
func (d *Driver) safe(s string) string {
	s = journal.RedactString(d.cfg.APIKey.Scrub(s))
	return protocol.Truncate(strings.ToValidUTF8(s, "?"), maxMessage)
}
