package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	fs := flag.NewFlagSet("floorhub", flag.ExitOnError)
	addr := fs.String("addr", envOr("RUNHUB_ADDR", "127.0.0.1:8080"), "listen address (RUNHUB_ADDR)")
	write := fs.String("write", envOr("FLOORHUB_WRITE", "raw"), "how a frame is written: raw (one net.Conn.Write) or lib (coder/websocket Conn.Write) (FLOORHUB_WRITE)")
	journal := fs.String("journal", os.Getenv("FLOORHUB_JOURNAL"), "journal every event in DIR/"+journalFile+" before writing it: one write + one fdatasync per batch; empty: no journal (FLOORHUB_JOURNAL)")
	fs.Parse(os.Args[1:])
	if fs.NArg() > 1 || fs.NArg() == 1 && fs.Arg(0) != "serve" {
		fmt.Fprintln(os.Stderr, "usage: floorhub [-addr host:port] [-write raw|lib] [-journal DIR] [serve]")
		os.Exit(2)
	}
	if *write != writeRaw && *write != writeLib {
		fmt.Fprintf(os.Stderr, "floorhub: -write %q: want raw or lib\n", *write)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, *write, *journal); err != nil {
		fmt.Fprintln(os.Stderr, "floorhub:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// serve listens on addr until ctx ends, then stops the runs (and the
// journal, with one).
func serve(ctx context.Context, addr, write, journal string) error {
	f, err := newFloor(write, journal)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		f.stop()
		return err
	}
	srv := &http.Server{Handler: f.routes(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		srv.Close()
		<-done
		err = nil
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, f.stop())
}

// routes is the HTTP surface loadtest uses, plus pprof.
func (f *floor) routes() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /readyz", ok)
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /v1/ws", f.serveSocket)
	mux.HandleFunc("POST /v1/sessions", f.createSession)
	mux.HandleFunc("POST /v1/sessions/{sid}/runs", f.startRun)
	mux.HandleFunc("GET /v1/runs/{rid}", f.getRun)
	mux.HandleFunc("POST /v1/runs/{rid}/cancel", f.cancelRun)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, errCode, msg string) {
	writeJSON(w, code, map[string]string{"code": errCode, "message": msg})
}

func (f *floor) createSession(w http.ResponseWriter, _ *http.Request) {
	s := f.newSession()
	writeJSON(w, http.StatusCreated, map[string]any{"session_id": s.id, "title": "", "created_at": timestamp(time.Now())})
}

// startRun reads metadata.sim {tokens, token_ms} (defaults 40 and 20, as
// the sim driver's) and starts the run at once.
func (f *floor) startRun(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Metadata struct {
			Sim struct {
				Tokens  *int `json:"tokens"`
				TokenMS *int `json:"token_ms"`
			} `json:"sim"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	tokens, pause := 40, 20
	if p := req.Metadata.Sim.Tokens; p != nil {
		tokens = *p
	}
	if p := req.Metadata.Sim.TokenMS; p != nil {
		pause = *p
	}
	if tokens < 0 || tokens > 1_000_000 || pause < 0 || pause > 60_000 {
		writeError(w, http.StatusBadRequest, "bad_request", "metadata.sim: tokens 0..1000000, token_ms 0..60000")
		return
	}
	run, code := f.start(r.PathValue("sid"), tokens, time.Duration(pause)*time.Millisecond)
	switch code {
	case http.StatusNotFound:
		writeError(w, code, "not_found", "no such session")
		return
	case http.StatusConflict:
		writeError(w, code, "conflict", "the session has a run going (floorhub queues nothing)")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"run_id": run.id, "session_id": run.s.id, "stream_id": run.id,
		"status": "running", "started_at": timestamp(run.started), "cursor": "", "active_controls": []string{"cancel"}})
}

func (f *floor) getRun(w http.ResponseWriter, r *http.Request) {
	run := f.run(r.PathValue("rid"))
	if run == nil {
		writeError(w, http.StatusNotFound, "not_found", "no such run")
		return
	}
	seq, state := run.progress()
	status := state
	if status == "" {
		status = "running"
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": run.id, "session_id": run.s.id, "status": status,
		"last_seq": seq, "last_event_id": eventID(run.id, seq), "terminal": state != "", "terminal_state": state,
		"active_controls": []string{}})
}

func (f *floor) cancelRun(w http.ResponseWriter, r *http.Request) {
	run := f.run(r.PathValue("rid"))
	if run == nil {
		writeError(w, http.StatusNotFound, "not_found", "no such run")
		return
	}
	run.cancelOnce.Do(func() { close(run.cancel) })
	writeJSON(w, http.StatusOK, map[string]any{"accepted": true, "message": "cancelling"})
}

func eventID(rid string, seq uint64) string {
	if seq == 0 {
		return ""
	}
	return rid + ":" + strconv.FormatUint(seq, 10)
}

// timestamp is the protocol's created_at: Unix seconds with microseconds.
func timestamp(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
