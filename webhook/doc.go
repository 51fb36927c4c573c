// Package webhook tells people when nobody is watching: it POSTs signed
// notifications (Standard Webhooks: webhook-id, webhook-timestamp,
// webhook-signature "v1,<base64 HMAC-SHA256>") to the endpoints an
// operator configures when a run asks for an approval or an answer, when
// a session's goal changes, and when a run ends.
//
// The journal records every notable event (journal.Notable) in its outbox
// in the same step that appends it (journal/bolt: the same transaction;
// journal/redis: the same run of append.lua). A Sender works from that
// outbox (the Outbox interface): it builds each notification once from
// the event and its session, POSTs it to every endpoint that wants its
// type, retries failures with exponential backoff and jitter until
// Retry.GiveUp, saves its per-endpoint state in the outbox after every
// attempt, and deletes the entry when every endpoint is done. So a crash
// between the event and the POST loses nothing, and a restart does not
// send again to an endpoint that acknowledged.
//
// With several hubs on one Redis journal, one of them sends: the holder of
// a RedisLeader claim. Delivery runs on the Sender's goroutines only,
// bounded per endpoint; no run, append or socket waits for a receiver.
//
// docs/webhooks.md is the operator's reference.
package webhook
