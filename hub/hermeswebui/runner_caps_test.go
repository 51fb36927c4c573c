package hermeswebui_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/webuiclient"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// The start answer and GET /v1/runs/{id} offer WebUI only the controls the
// run's driver can do: a driver without cancel gets no cancel, in either.
func TestWebUIActiveControlsFollowCapabilities(t *testing.T) {
	cfg := hub.Config{Capabilities: func(profile, provider string) ([]string, bool) {
		return []string{protocol.CapQueue, protocol.CapGoal}, true // no cancel
	}}
	th := newWebUIHub(t, cfg, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-caps", Message: "hi",
		Metadata: simMeta(map[string]any{"tokens": 50, "token_ms": 20, "tools": 0})})
	if err != nil {
		t.Fatal(err)
	}
	has := func(list []any, op string) bool {
		return slices.ContainsFunc(list, func(v any) bool { return fmt.Sprint(v) == op })
	}
	if has(st.ActiveControls, protocol.OpCancel) || !has(st.ActiveControls, protocol.OpQueue) {
		t.Fatalf("start offers %v, want queue and goal without cancel", st.ActiveControls)
	}
	run, err := c.GetRun(ctx, st.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if has(run.ActiveControls, protocol.OpCancel) {
		t.Fatalf("a running run offers %v: cancel is not the driver's", run.ActiveControls)
	}
	hubtest.WaitTerminal(t, th.Hub, st.RunID)
}

// A start the runtime refuses (the simulator's script is invalid) leaves
// no WebUI session behind: the session made for it is discarded.
func TestWebUIRefusedStartCreatesNothing(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	_, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-refused", Message: "hi",
		Metadata: simMeta(map[string]any{"tokens": -5})})
	if err == nil {
		t.Fatal("a start with an invalid script was accepted")
	}
	if m, err := th.Store.Session(ctx, "s-refused"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("the refused start left session %+v (%v)", m, err)
	}
}
