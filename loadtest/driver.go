package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/internal/ctxsleep"
	"github.com/runhub/runhub/protocol"
)

// api is the hub's HTTP API as the generator uses it.
type api struct {
	hc   *http.Client
	base string // http://host:port
}

func (a *api) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %.300s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (a *api) createSession(ctx context.Context, title string) (string, error) {
	var out struct {
		SessionID string `json:"session_id"`
	}
	_, err := a.do(ctx, "POST", "/v1/sessions", map[string]string{"title": title}, &out)
	return out.SessionID, err
}

// simScript is metadata.sim of the runs the generator starts.
type simScript struct {
	Tokens  int `json:"tokens"`
	TokenMS int `json:"token_ms"`
	Tools   int `json:"tools"`
}

func (a *api) startRun(ctx context.Context, sid string, s simScript) (string, error) {
	md, _ := json.Marshal(map[string]any{"sim": s})
	var out protocol.RunStartResult
	_, err := a.do(ctx, "POST", "/v1/sessions/"+sid+"/runs",
		protocol.StartRunRequest{Message: "load test", Source: "loadtest", Metadata: md}, &out)
	return out.RunID, err
}

func (a *api) cancelRun(ctx context.Context, rid string) {
	a.do(ctx, "POST", "/v1/runs/"+rid+"/cancel", nil, nil)
}

// runTerminal polls GET /v1/runs/{rid} until the run has ended.
func (a *api) waitRun(ctx context.Context, rid string) error {
	for {
		var st protocol.RunStatus
		if _, err := a.do(ctx, "GET", "/v1/runs/"+rid, nil, &st); err != nil {
			return err
		}
		if st.TerminalState != "" {
			return nil
		}
		if err := ctxsleep.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// driver keeps `runs` simulated runs going, one per session of its own,
// starting them over HTTP at most `rate` per second, and learns that a run
// ended from a control socket that watches every session (status messages
// with terminal=true).
type driver struct {
	g      *gen
	apis   []*api
	ws     *websocket.Conn
	script simScript
	rate   float64

	mu      sync.Mutex
	waiting map[string]chan struct{} // run id → closed at its terminal status
	ended   map[string]bool          // terminal statuses seen before the start answered

	started, done, startErrs, stuck atomic.Uint64
	active                          sync.Map // session → run id
	startLat                        hist     // guarded by mu (µs)
	wg                              sync.WaitGroup
}

func (d *driver) connect(ctx context.Context, url string, hc *http.Client) error {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}, HTTPClient: hc})
	if err != nil {
		return err
	}
	ws.SetReadLimit(64 << 20)
	d.ws = ws
	for _, m := range []any{protocol.Hello{Type: protocol.MsgHello, Client: "runhub-loadtest-driver"}, protocol.Watch{Type: protocol.MsgWatch, All: true}} {
		b, _ := json.Marshal(m)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			return err
		}
	}
	go d.readLoop()
	return nil
}

func (d *driver) readLoop() {
	var m struct {
		Type    string `json:"type"`
		Session struct {
			RunID    string `json:"run_id"`
			Terminal bool   `json:"terminal"`
		} `json:"session"`
	}
	for {
		_, data, err := d.ws.Read(context.Background())
		if err != nil {
			d.mu.Lock()
			for rid, ch := range d.waiting {
				close(ch) // fall back: the slot polls the run
				delete(d.waiting, rid)
			}
			d.mu.Unlock()
			return
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if !bytes.HasPrefix(line, prefixStatus) {
				continue
			}
			m.Session.RunID, m.Session.Terminal = "", false
			if json.Unmarshal(line, &m) != nil || !m.Session.Terminal || m.Session.RunID == "" {
				continue
			}
			d.mu.Lock()
			if ch, ok := d.waiting[m.Session.RunID]; ok {
				close(ch)
				delete(d.waiting, m.Session.RunID)
			} else if len(d.ended) < 100000 {
				d.ended[m.Session.RunID] = true
			}
			d.mu.Unlock()
		}
	}
}

// run keeps slot i's session busy until ctx ends.
func (d *driver) run(ctx context.Context, slot int, sid string, limiter <-chan struct{}) {
	defer d.wg.Done()
	a := d.apis[slot%len(d.apis)]
	runFor := time.Duration(d.script.Tokens*d.script.TokenMS)*time.Millisecond + 30*time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-limiter:
		}
		t0 := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rid, err := a.startRun(sctx, sid, d.script)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.startErrs.Add(1)
			d.g.noteErr(fmt.Sprintf("start run: %v", err))
			if ctxsleep.Sleep(ctx, time.Second) != nil {
				return
			}
			continue
		}
		d.started.Add(1)
		ch := make(chan struct{})
		d.mu.Lock()
		d.startLat.record(time.Since(t0).Microseconds())
		if d.ended[rid] {
			delete(d.ended, rid)
			close(ch)
		} else {
			d.waiting[rid] = ch
		}
		d.mu.Unlock()
		d.active.Store(sid, rid)
		select {
		case <-ch:
		case <-time.After(runFor):
			d.stuck.Add(1)
			d.g.noteErr(fmt.Sprintf("run %s: no terminal status after %v", rid, runFor))
		case <-ctx.Done():
			return
		}
		// The status socket may have gone: make sure the run really ended.
		wctx, cancel := context.WithTimeout(ctx, runFor)
		err = a.waitRun(wctx, rid)
		cancel()
		if err != nil && ctx.Err() == nil {
			d.g.noteErr(fmt.Sprintf("run %s: %v", rid, err))
		}
		d.active.Delete(sid)
		d.done.Add(1)
	}
}

// limiter hands out rate tokens per second until ctx ends.
func limiter(ctx context.Context, rate float64) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		every := time.Duration(float64(time.Second) / rate)
		next := time.Now()
		for {
			if d := time.Until(next); d > 0 && ctxsleep.Sleep(ctx, d) != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case ch <- struct{}{}:
			}
			next = next.Add(every)
			if now := time.Now(); next.Before(now.Add(-time.Second)) {
				next = now // do not burst after a stall
			}
		}
	}()
	return ch
}

// cancelActive cancels the runs still going (polite end of a test).
func (d *driver) cancelActive() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	d.active.Range(func(_, v any) bool {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d.apis[0].cancelRun(ctx, v.(string))
		}()
		return true
	})
	wg.Wait()
}
