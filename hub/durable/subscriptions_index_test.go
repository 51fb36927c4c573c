package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/redis"
)

// deafDocs is a replica's documents whose change announcements have not
// arrived yet (a slow or partitioned bus): WatchDoc never calls back.
type deafDocs struct{ journal.Docs }

func (deafDocs) WatchDoc(string, func()) func() { return func() {} }

// A glob registration answered on B links a stream that A creates just
// after, even when A has not heard Redis announce the index's change:
// the link does not depend on the announcement arriving first.
func TestSubscriptions_RegistrationSeenBeforeItsAnnouncement_Redis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	store, err := redis.Open(context.Background(), redis.Options{URL: rs.URL(), Prefix: "subs:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// A hears nothing of the index's changes, and sweeps never (a sweep
	// reads the index again); B is an ordinary replica.
	thA, _ := serve(t, store, store.Streams(journal.StreamLimits{}),
		durable.Options{Docs: deafDocs{store.Docs()}, SubscriptionSweep: time.Hour}, hub.Config{})
	a := thA.URL + durable.Prefix
	b, _ := redisReplica(t, rs.URL(), durable.Options{SubscriptionSweep: time.Hour})

	// A reads (and caches) the index, empty, on an append.
	do(t, "PUT", a+"warm/1", "", map[string]string{"Content-Type": "text/plain"}, "x")

	h := newHook(t, func(int, map[string]any) (int, string, bool) { return 200, `{"done":true}`, false })
	sub := b + "__ds/subscriptions/late"
	if r := jdo(t, "PUT", sub, "", map[string]any{"type": "webhook", "pattern": "orders/*", "webhook": map[string]any{"url": h.URL + "/hook"}}); r.status != 201 {
		t.Fatalf("register on B: %d %s", r.status, r.body)
	}
	// Created on A after B answered the registration.
	do(t, "PUT", a+"orders/o1", "", map[string]string{"Content-Type": "text/plain"}, "work")

	l := linkOf(t, sub, "", "orders/o1")
	if l == nil {
		t.Fatal("the stream created on A after the registration was answered on B is not linked: its consumer is never woken")
	}
	if l["link_type"] != "glob" || l["acked_offset"] != "0000000000000000_0000000000000000" {
		t.Fatalf("the link: %v, want a glob link at the stream's start", l)
	}
	w := h.next(t)
	if s := w["streams"].([]any)[0].(map[string]any); s["path"] != "orders/o1" || s["has_pending"] != true {
		t.Fatalf("the wake: %v", w)
	}
}
