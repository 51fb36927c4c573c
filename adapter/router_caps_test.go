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
