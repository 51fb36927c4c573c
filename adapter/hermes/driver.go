package hermes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// Error codes of the driver's terminal errors besides the protocol's own
// (provider_error, timeout, interrupted, internal).
const (
	CodeAuth        = "auth"
	CodeRateLimited = "rate_limited"
)

// Provider is the usage.final provider of Hermes runs.
const Provider = "hermes"

// maxChunk bounds the text of one token.delta or reasoning.delta event;
// longer upstream text is split.
const maxChunk = 64 << 10

// maxAnswer bounds the streamed answer kept to reconcile it with the final
// output.
const maxAnswer = 4 << 20

// Driver runs each runhub run as one Hermes Agent run (POST /v1/runs) and
// translates its event stream into runhub events. It is safe for
// concurrent use; every run holds exactly one subscriber on its upstream
// event stream.
type Driver struct {
	cfg Config
	c   *client

	capsCache capsCache // what the server says it can do (capabilities.go)
}

// New returns a driver for the Hermes API server cfg describes.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Driver{cfg: cfg, c: &client{cfg: cfg}}, nil
}

// Steers reports that guidance for a running run (queue mode steer) is
// forwarded to Hermes (POST /v1/runs/{id}/steer).
func (d *Driver) Steers() bool { return true }

// errRunTimeout is the cause of a run's context when Config.Timeout ends it.
var errRunTimeout = errors.New("run timeout")

// Execute implements driver.Driver.
func (d *Driver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	if d.cfg.APIKeyEnv != "" && d.cfg.APIKey.Empty() {
		return nil, &driver.Error{Code: CodeAuth,
			Message: "the API key variable " + d.cfg.APIKeyEnv + " is not set where this run executes"}
	}
	return d.timed(ctx, func(ctx context.Context) (*protocol.Usage, error) { return d.execute(ctx, x) })
}

// timed runs f under the run's timeout (Config.Timeout), when there is
// one: over it, the Hermes run is stopped (f's context ends) and the run
// ends with error timeout.
func (d *Driver) timed(ctx context.Context, f func(context.Context) (*protocol.Usage, error)) (*protocol.Usage, error) {
	outer := ctx
	if d.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d.cfg.Timeout, errRunTimeout)
		defer cancel()
	}
	u, err := f(ctx)
	if err != nil && outer.Err() == nil && errors.Is(context.Cause(ctx), errRunTimeout) {
		return nil, &driver.Error{Code: protocol.ErrorTimeout,
			Message: fmt.Sprintf("the run exceeded its %v timeout; the Hermes run was stopped", d.cfg.Timeout)}
	}
	return u, err
}

func (d *Driver) execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	r := d.newRun(ctx, x)
	defer r.end()
	return r.execute(ctx)
}

// newRun is the state of one execution of x; end it with end.
func (d *Driver) newRun(ctx context.Context, x *driver.Execution) *run {
	r := &run{d: d, c: d.c, cfg: d.cfg, x: x, begin: time.Now(),
		log:     d.cfg.Logger.With("driver", "hermes", "run_id", x.RunID),
		tools:   map[string][]openTool{},
		results: make(chan promptResult, 4)}
	r.bgCtx, r.bgCancel = context.WithCancel(ctx)
	return r
}

// end ends the run's background work: prompts and steer deliveries end
// before the executor writes the terminal event, so nothing is journaled
// after it.
func (r *run) end() {
	r.bgCancel()
	r.bg.Wait()
}

// run is one execution: the upstream run and the mapping state. Its fields
// are owned by the goroutine running Execute, except where noted.
type run struct {
	d     *Driver
	c     *client
	cfg   Config
	x     *driver.Execution
	log   *slog.Logger
	begin time.Time
	id    string // the upstream run id
	model string
	// reattached: the run was re-attached after a hub restart (reattach.go);
	// the text Hermes streams is not journaled, the final output is.
	reattached bool

	// mapping state
	msgN, blockN, toolN, promptN int
	newMessage                   bool // the next message.delta starts a new message id
	blockOpen                    bool // a reasoning block awaits its reasoning.done
	answer                       strings.Builder
	answerFull                   bool            // answer outgrew maxAnswer
	msgText                      strings.Builder // the journaled text of message msgN
	msgFull                      bool            // msgText outgrew maxAnswer
	thought                      string          // a reasoning.available text not yet mapped (flushThought)
	tools                        map[string][]openTool
	malformed                    int

	// prompts: one asked at a time, the rest wait in order
	active  *prompt
	waiting []*prompt
	results chan promptResult

	// background work (prompt workers, steer deliveries)
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

func (r *run) execute(ctx context.Context) (*protocol.Usage, error) {
	st, _ := r.d.runtime(ctx) // the first use of the profile asks what the server can do
	history, err := r.history(ctx, st)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.log.Error("read the session's earlier turns", "err", err)
		return nil, &driver.Error{Code: protocol.ErrorInternal, Message: "could not read the session's earlier turns"}
	}
	if err := r.start(ctx, history); err != nil {
		return nil, err
	}
	usage, err := r.follow(ctx)
	return r.ended(ctx, usage, err)
}

// ended is the end of a run that followed its upstream run: cancelled by
// the user, or the executor is stopping, it stops the upstream run too,
// even though ctx is done — unless the executor left the run to be
// re-attached (driver.ErrDetached), when the Hermes run goes on.
func (r *run) ended(ctx context.Context, usage *protocol.Usage, err error) (*protocol.Usage, error) {
	if ctx.Err() == nil {
		return usage, err
	}
	if driver.Detached(ctx) {
		r.log.Info("left the Hermes run going for the next hub process to re-attach")
	} else {
		r.stop(ctx)
	}
	return nil, ctx.Err()
}

// history is what the start sends as conversation_history: the session's
// earlier turns, at most MaxHistoryTurns, with their tool calls and
// results as text (the runs API keeps only each entry's role and its
// content as a string). Hermes' /v1/runs keeps no history of its own in
// 0.18.x — the session_id it is sent names the session the agent records
// into, but the API never reads it back, previous_response_id reads only
// what /v1/responses stored and X-Hermes-Session-Id only /v1/chat/completions
// — so runhub's journal is the history. A server that loads a run's
// session history itself (ownsHistory: managed_run_sessions with
// managed_run_history_authority hermes_session_db) is sent none, but for
// an imported session's first run, whose earlier turns (hermes-webui's
// context_messages) only the journal holds.
func (r *run) history(ctx context.Context, st runtimeState) ([]driver.Turn, error) {
	turns, onlyImported, err := r.x.ToolTranscript(ctx)
	if err != nil {
		return nil, err
	}
	if st.ownsHistory && !onlyImported {
		return nil, nil
	}
	if n := len(turns) - r.cfg.MaxHistoryTurns; n > 0 {
		turns = turns[n:]
	}
	return turns, nil
}

// runPath is the path of the upstream run, plus suffix.
func (r *run) runPath(suffix string) string { return "/v1/runs/" + url.PathEscape(r.id) + suffix }

// stop asks Hermes to stop the upstream run, within StopTimeout even when
// ctx is already cancelled.
func (r *run) stop(ctx context.Context) {
	if r.id == "" {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StopTimeout)
	defer cancel()
	if err := r.c.call(sctx, http.MethodPost, r.runPath("/stop"), struct{}{}, nil, nil); err != nil {
		r.log.Warn("stop the Hermes run", "err", err)
		return
	}
	r.log.Info("asked Hermes to stop the run")
}

// giveUp stops the upstream run (runhub no longer follows it) and returns
// err.
func (r *run) giveUp(ctx context.Context, err error) error {
	r.stop(ctx)
	return err
}

// outcome is how one subscription to the event stream ended.
type outcome struct {
	final  bool            // the run ended: usage (done) or err
	usage  *protocol.Usage //
	err    error           //
	broken string          // why the stream ended without a terminal event
	gone   bool            // the subscription was answered 404
}

func finalErr(err error) outcome { return outcome{final: true, err: err} }

// stream subscribes to the run's events and maps them until the run ends,
// the stream breaks or ctx ends. A resubscription (reconnected) also polls
// the run's status and ends with it once it is terminal (settleWatch).
func (r *run) stream(ctx context.Context, reconnected bool) outcome {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := r.c.request(sctx, http.MethodGet, r.runPath("/events"), nil)
	if err != nil {
		return finalErr(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	headers := time.AfterFunc(r.cfg.RequestTimeout, cancel) // bounds the wait for the answer's headers
	resp, err := r.cfg.HTTPClient.Do(req)
	headers.Stop()
	if err != nil {
		return outcome{broken: "cannot subscribe: " + r.c.transportError(err).Error()}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return outcome{gone: true, broken: r.c.readError(resp).Error()}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return finalErr(r.giveUp(ctx, &driver.Error{Code: CodeAuth,
			Message: "Hermes refused the API key for the event stream (" + r.c.readError(resp).Error() + ")"}))
	case resp.StatusCode != http.StatusOK:
		return outcome{broken: "subscribing answered " + r.c.readError(resp).Error()}
	}

	items := make(chan item, 64)
	var readErr error
	go func() {
		readErr = readSSE(sctx, resp.Body, items)
		close(items)
	}()
	defer func() {
		cancel()
		resp.Body.Close()
		for range items { // wait for the reader
		}
	}()

	var settled <-chan runStatus // a terminal status the poll found
	var ended *runStatus         // that status, awaiting the grace
	var grace <-chan time.Time
	if reconnected {
		var stop func()
		settled, stop = r.settleWatch(sctx)
		defer stop()
	}

	streamIdle := time.NewTimer(r.cfg.StreamIdleTimeout)
	defer streamIdle.Stop()
	eventIdle := time.NewTimer(r.cfg.EventIdleTimeout)
	defer eventIdle.Stop()
	for {
		var idle <-chan time.Time
		if r.active == nil { // a prompt waiting on the user is no silence
			idle = eventIdle.C
		}
		select {
		case <-ctx.Done():
			return outcome{}
		case it, ok := <-items:
			if !ok {
				reason := "the event stream ended without a terminal event"
				if readErr != nil && !errors.Is(readErr, context.Canceled) {
					reason = "the event stream broke: " + r.c.scrub(readErr.Error())
				}
				return outcome{broken: reason}
			}
			streamIdle.Reset(r.cfg.StreamIdleTimeout)
			if it.dropped > 0 {
				r.dropMalformed(it.dropped)
			}
			if it.comment {
				continue // a keepalive, or ": stream closed" before the end
			}
			eventIdle.Reset(r.cfg.EventIdleTimeout)
			if o := r.handle(ctx, it); o.final {
				return o
			}
		case <-streamIdle.C:
			return outcome{broken: fmt.Sprintf("nothing from Hermes, not even a keepalive, for %v", r.cfg.StreamIdleTimeout)}
		case <-idle:
			return finalErr(r.giveUp(ctx, &driver.Error{Code: protocol.ErrorTimeout,
				Message: fmt.Sprintf("Hermes sent no event (only keepalives) for %v; the Hermes run was stopped", r.cfg.EventIdleTimeout)}))
		case res := <-r.results:
			if o := r.promptDone(ctx, res); o.final {
				return o
			}
			eventIdle.Reset(r.cfg.EventIdleTimeout)
		case text := <-r.x.Steering():
			r.steer(text)
		case st := <-settled:
			if !st.terminal() { // a re-attached run waits on an approval
				if r.active == nil {
					return finalErr(r.giveUp(ctx, r.unseenApproval()))
				}
				continue
			}
			settled, ended = nil, &st
			r.log.Info("the Hermes run ended by its status while its resubscribed stream had not said so", "status", st.Status)
			grace = time.After(r.settleGrace())
		case <-grace:
			o, _ := r.settle(ctx, *ended)
			return o
		}
	}
}

func (r *run) dropMalformed(n int) {
	before := r.malformed
	r.malformed += n
	if before == 0 || before/100 != r.malformed/100 {
		r.log.Warn("dropped malformed lines of the Hermes event stream", "total", r.malformed)
	}
}

// steer forwards guidance to Hermes; a refusal is journaled as progress.
func (r *run) steer(text string) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		err := r.c.call(r.bgCtx, http.MethodPost, r.runPath("/steer"), map[string]string{"input": text}, nil, nil)
		if err == nil || r.bgCtx.Err() != nil {
			return
		}
		r.log.Warn("Hermes refused guidance", "err", err)
		msg := "Hermes did not take the guidance: " + err.Error()
		if statusOf(err) == http.StatusConflict {
			msg = "Hermes did not take the guidance: the run is not accepting steer input now"
		}
		r.x.Emit(r.bgCtx, protocol.EventProgress, protocol.ProgressPayload{Text: msg})
	}()
}
