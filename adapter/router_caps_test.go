package adapter_test

import (
	"context"
	"slices"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// GetRun offers in active_controls only what the run's driver can do: a
// run waiting on an approval offers cancel and approve under a profile
// that can do both, and neither under one that can do neither; a profile
// the capabilities do not know offers everything.
func TestRouter_GetRunFollowsCapabilities(t *testing.T) {
	ctx := context.Background()
	store := mem.New(mem.Options{})
	defer store.Close()
	caps := adapter.Capabilities(func(profile, provider string) ([]string, bool) {
		switch profile {
		case "full":
			return []string{protocol.CapCancel, protocol.CapApproval, protocol.CapQueue, protocol.CapGoal}, true
		case "bare":
			return []string{}, true
		}
		return nil, false
	})
	r := adapter.NewRouter(store, nil, nil).WithCapabilities(caps)
	for _, tc := range []struct {
		profile string
		want    []string
	}{
		{"full", []string{protocol.OpCancel, protocol.OpApprove}},
		{"bare", nil},
		{"unknown", []string{protocol.OpCancel, protocol.OpApprove}},
	} {
		sid, rid := "s_"+tc.profile, "r_"+tc.profile
		if err := store.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		if err := store.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range []struct {
			typ protocol.EventType
			p   any
		}{
			{protocol.EventRunStarted, protocol.RunStartedPayload{Message: "m", Profile: tc.profile, Provider: "sim", Source: "user"}},
			{protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a", Summary: "s", Risk: "low", Choices: []string{"once", "deny"}}},
		} {
			e, err := protocol.NewEvent(rid, sid, ev.typ, ev.p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Append(ctx, e, ""); err != nil {
				t.Fatal(err)
			}
		}
		st, err := r.GetRun(ctx, rid)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{protocol.OpCancel, protocol.OpApprove} {
			if got, want := slices.Contains(st.ActiveControls, op), slices.Contains(tc.want, op); got != want {
				t.Errorf("profile %s: active_controls %v: %s offered %v, want %v", tc.profile, st.ActiveControls, op, got, want)
			}
		}
	}
}

// startLocal answers every start as the executor does: running, cancel
// offered.
type startLocal struct{ fakeLocal }

func (*startLocal) StartRun(_ context.Context, _ string, req protocol.StartRunRequest) (protocol.RunStartResult, error) {
	return protocol.RunStartResult{RunID: "r_1", SessionID: req.SessionID, Status: protocol.StatusRunning,
		ActiveControls: []string{protocol.OpCancel}}, nil
}

// StartRun's answer offers in active_controls only what the driver of the
// start's profile (else its provider) can do: cancel under a profile that
// can, nothing (an empty list) under one that cannot, everything under a
// name the capabilities do not know.
func TestRouter_StartRunFollowsCapabilities(t *testing.T) {
	store := mem.New(mem.Options{})
	defer store.Close()
	caps := adapter.Capabilities(func(profile, provider string) ([]string, bool) {
		switch {
		case profile == "full":
			return []string{protocol.CapCancel, protocol.CapQueue}, true
		case profile == "bare" || provider == "nocancel":
			return []string{protocol.CapQueue}, true
		}
		return nil, false
	})
	r := adapter.NewRouter(store, &startLocal{}, nil).WithCapabilities(caps)
	for _, tc := range []struct {
		req  protocol.StartRunRequest
		want []string
	}{
		{protocol.StartRunRequest{Message: "m", Profile: "full"}, []string{protocol.OpCancel}},
		{protocol.StartRunRequest{Message: "m", Profile: "bare"}, []string{}},
		{protocol.StartRunRequest{Message: "m", Provider: "nocancel"}, []string{}},
		{protocol.StartRunRequest{Message: "m", Profile: "unknown"}, []string{protocol.OpCancel}},
	} {
		res, err := r.StartRun(context.Background(), "o", tc.req)
		if err != nil || res.ActiveControls == nil || !slices.Equal(res.ActiveControls, tc.want) {
			t.Errorf("start %+v: active_controls %#v (%v), want %#v", tc.req, res.ActiveControls, err, tc.want)
		}
	}
}
