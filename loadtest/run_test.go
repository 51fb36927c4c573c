package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/adapter"
	rtdriver "github.com/runhub/runhub/adapter/driver" // this package has a driver of its own
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal/mem"
)

// A short scenario against an in-process hub: every socket held, events
// delivered live and on replay, no duplicate and no gap across focus
// switches, and a complete replay of one longer run.
func TestRunAgainstHub(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a hub for a few seconds")
	}
	store := mem.New(mem.Options{})
	defer store.Close()
	rt := executor.New(store, executor.Options{Drivers: map[string]rtdriver.Driver{"sim": &sim.Driver{}}})
	defer rt.Close()
	h := hub.New(hub.Config{}, store, adapter.NewRouter(store, rt, nil))
	e := echo.New()
	e.HTTPErrorHandler = httpx.ErrorHandler
	h.Routes(e, httpapi.New(nil))
	srv := httptest.NewServer(e)
	defer srv.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	}()

	cfg, err := parseFlags([]string{"-target", strings.TrimPrefix(srv.URL, "http://"), "-tabs", "20", "-watch", "3",
		"-sessions", "6", "-runs", "4", "-tokens", "40", "-token-ms", "5", "-focus-every", "400ms",
		"-warmup", "300ms", "-duration", "2s", "-settle", "100ms", "-replay", "500", "-replay-focuses", "2", "-quiet"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dups != 0 || rep.Gaps != 0 {
		t.Errorf("duplicates %d, gaps %d: %v", rep.Dups, rep.Gaps, rep.Errors)
	}
	if rep.ConnsEnd != 20 || rep.ConnectFailed != 0 || rep.Disconnects != 0 {
		t.Errorf("sockets: held %d, failed %d, dropped %d", rep.ConnsEnd, rep.ConnectFailed, rep.Disconnects)
	}
	if rep.LiveEventsPerS <= 0 || rep.Latency.Count == 0 || rep.StatusesPerS <= 0 {
		t.Errorf("nothing delivered: %+v", rep)
	}
	if rep.FocusSwitches == 0 || rep.FocusReplay.Count == 0 {
		t.Errorf("no focus switch measured: %d switches, %d replays", rep.FocusSwitches, rep.FocusReplay.Count)
	}
	if rep.Replay == nil || !rep.Replay.Complete || rep.Replay.Events < 500 || rep.Replay.Time.Count != 2 {
		t.Errorf("replay: %+v", rep.Replay)
	}
	if rep.ErrorMsgs != 0 || rep.RunStartErrors != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
}

func TestParseFlagsBounds(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "10.1.2.3:8080"},
		{"-target", "127.0.0.1:8080,192.168.0.1:80"},
		{"-tabs", "70000"},
		{"-runs", "10", "-sessions", "5"},
		{"-duration", "2h"},
		{"-spawn", "-spawn-redis"},
		{"-floor"},
		{"-floor", "-spawn-redis"},
		{"-scenario", "centrifugo", "-floor", "-floor-write", "nope"},
		{"-floor-journal"},
		{"-spawn", "-floor-journal"},
		{"-scenario", "centrifugo", "-floor-journal"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parseFlags([]string{"-target", "localhost:8080"}); err != nil {
		t.Error(err)
	}
	c, err := parseFlags([]string{"-scenario", "centrifugo", "-floor", "-floor-write", "lib"})
	if err != nil || !c.Floor || !c.Spawn || c.FloorWrite != "lib" || c.FloorJournal {
		t.Errorf("-scenario centrifugo -floor -floor-write lib: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-scenario", "centrifugo", "-floor", "-floor-journal", "-data", "/dev/shm"})
	if err != nil || !c.Floor || !c.FloorJournal || c.DataDir != "/dev/shm" {
		t.Errorf("-scenario centrifugo -floor -floor-journal -data /dev/shm: %+v, %v", c, err)
	}
}

// -scenario centrifugo is Centrifugo's workload; flags given override it.
func TestScenarioCentrifugo(t *testing.T) {
	c, err := parseFlags([]string{"-scenario", "centrifugo", "-duration", "10s"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Spawn || c.Tabs != 1000 || c.Watch != 1 || c.Sessions != 200 || c.Runs != 200 || c.Tokens != 3000 ||
		c.TokenMS != 20 || c.FocusEvery != 0 || c.FocusAll || c.Warmup != 5*time.Second || c.Duration != 10*time.Second {
		t.Fatalf("centrifugo: %+v", c)
	}
	// 5 tabs per run, each its own session for the whole test: the run
	// outlasts warmup and measurement at 50 tokens/s.
	if c.Tabs/c.Runs != 5 || time.Duration(c.Tokens*c.TokenMS)*time.Millisecond < c.Warmup+30*time.Second {
		t.Fatalf("centrifugo: %d tabs per run, runs of %v", c.Tabs/c.Runs, time.Duration(c.Tokens*c.TokenMS)*time.Millisecond)
	}
	if _, err := parseFlags([]string{"-scenario", "nope"}); err == nil {
		t.Fatal("an unknown scenario was accepted")
	}
}
