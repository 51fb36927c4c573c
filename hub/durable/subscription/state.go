package subscription

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// The two kinds of subscription.
const (
	TypeWebhook  = "webhook"
	TypePullWake = "pull-wake"
)

// The link types of a stream in a subscription.
const (
	linkGlob     = "glob"
	linkExplicit = "explicit"
)

// Lease bounds (the protocol's): 1 s to 10 min, 30 s by default.
const (
	minLease     = 1000
	maxLease     = 600000
	defaultLease = 30000
)

// zeroOffset is the start of every stream.
const zeroOffset = "0000000000000000_0000000000000000"

// FormatOffset is the edge's offset of a position: the appends and the
// bytes before it, 16 decimal digits each.
func FormatOffset(records, bytes uint64) string { return fmt.Sprintf("%016d_%016d", records, bytes) }

// Config is a registration as its PUT asked for it, normalized.
type Config struct {
	Type        string   `json:"type"`
	Pattern     string   `json:"pattern,omitempty"`
	Streams     []string `json:"streams,omitempty"` // sorted, without duplicates
	WebhookURL  string   `json:"webhook_url,omitempty"`
	WakeStream  string   `json:"wake_stream,omitempty"`
	LeaseTTLms  int64    `json:"lease_ttl_ms"`
	Description *string  `json:"description,omitempty"`
}

// hash is the configuration's hash, for an idempotent re-confirmation.
func (c Config) hash() string {
	raw, _ := json.Marshal(c)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// link is one stream of a subscription and its cursor.
type link struct {
	Glob     bool   `json:"glob,omitempty"`
	Explicit bool   `json:"explicit,omitempty"`
	Acked    string `json:"acked"`
	Gen      string `json:"gen,omitempty"` // the stream's incarnation the cursor is of
}

func (l *link) kind() string {
	if l.Explicit {
		return linkExplicit
	}
	return linkGlob
}

// sub is a subscription's stored state: its configuration, its cursors,
// and its wake (generation, wake id, holder, lease, delivery).
type sub struct {
	ID        string           `json:"id"`
	Owner     string           `json:"owner"`
	Config    Config           `json:"config"`
	Hash      string           `json:"hash"`
	CreatedAt string           `json:"created_at"`
	Base      string           `json:"base"` // the stream root's URL, for callback_url
	Links     map[string]*link `json:"links"`

	Gen        uint64            `json:"gen"`
	WakeID     string            `json:"wake_id,omitempty"`
	Snapshot   map[string]string `json:"snapshot,omitempty"` // the wake's tails
	Holder     string            `json:"holder,omitempty"`
	JTI        string            `json:"jti,omitempty"`   // the token of the current wake or claim
	Token      string            `json:"token,omitempty"` // a webhook wake's callback token
	LeaseUntil int64             `json:"lease_until,omitempty"`

	// Delivery of the current wake: a webhook POST, or a pull-wake's
	// event in its wake stream. Due is when the next attempt is due (0:
	// none); an attempt under way holds it in the future (so no other
	// replica makes it meanwhile; if the replica dies, another retries
	// it when it passes).
	Delivered bool   `json:"delivered,omitempty"`
	Due       int64  `json:"due,omitempty"`
	Attempts  int    `json:"attempts,omitempty"`
	Status    string `json:"status"`
	Trigger   string `json:"trigger,omitempty"` // the stream that caused the wake
}

// tail is a linked stream's current state (ok false: no such stream, or
// not the subscription owner's).
type tail struct {
	ok     bool
	offset string
	gen    string
}

// streamInfo is a stream of a wake or a claim as the protocol shows it.
type streamInfo struct {
	Path       string `json:"path"`
	LinkType   string `json:"link_type"`
	Acked      string `json:"acked_offset"`
	TailOffset string `json:"tail_offset"`
	HasPending bool   `json:"has_pending"`
}

func (s *sub) paths() []string {
	out := make([]string, 0, len(s.Links))
	for p := range s.Links {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// sync brings the cursors up to date with the streams: a cursor of an
// earlier incarnation of its stream starts again at zero; a glob link to
// a stream that is gone is dropped (an explicit one stays, at zero).
func (s *sub) sync(tails map[string]tail) {
	for p, l := range s.Links {
		t, ok := tails[p]
		if !ok {
			continue
		}
		switch {
		case !t.ok && !l.Explicit:
			delete(s.Links, p)
		case !t.ok:
			l.Acked, l.Gen = zeroOffset, ""
		case l.Gen != "" && l.Gen != t.gen:
			l.Acked, l.Gen = zeroOffset, t.gen
		case l.Gen == "":
			l.Gen = t.gen
		}
	}
}

func tailOf(tails map[string]tail, p string) string {
	if t := tails[p]; t.ok {
		return t.offset
	}
	return zeroOffset
}

func (s *sub) infos(tails map[string]tail) []streamInfo {
	out := make([]streamInfo, 0, len(s.Links))
	for _, p := range s.paths() {
		l := s.Links[p]
		t := tailOf(tails, p)
		out = append(out, streamInfo{Path: p, LinkType: l.kind(), Acked: l.Acked, TailOffset: t, HasPending: t > l.Acked})
	}
	return out
}

// pending is the first stream with events after its cursor ("" none).
func (s *sub) pending(tails map[string]tail) string {
	for _, p := range s.paths() {
		if tailOf(tails, p) > s.Links[p].Acked {
			return p
		}
	}
	return ""
}

func (s *sub) idle() bool { return s.WakeID == "" && s.Holder == "" }

// clearWake ends the current wake: no holder, no token, no lease.
func (s *sub) clearWake() {
	s.WakeID, s.Snapshot, s.Holder, s.JTI, s.Token, s.LeaseUntil = "", nil, "", "", "", 0
	s.Delivered, s.Trigger = false, ""
	if s.Status != "failed" {
		s.Due, s.Attempts = 0, 0
	}
}

// lapse ends a wake whose lease has run out (the holder is fenced from
// then on) and reports whether it did.
func (s *sub) lapse(now time.Time) bool {
	if s.LeaseUntil != 0 && now.UnixMilli() >= s.LeaseUntil {
		s.clearWake()
		return true
	}
	return false
}

// wake issues a new wake when the subscription is idle and has pending
// work, and reports whether it did: a new generation and wake id, the
// tails as its snapshot, its delivery due now (or when a failed
// webhook's retry is), and for a webhook its callback token and lease.
func (s *sub) wake(tails map[string]tail, k *keyring, now time.Time) bool {
	if !s.idle() {
		return false
	}
	trigger := s.pending(tails)
	if trigger == "" {
		return false
	}
	s.Gen++
	s.WakeID = randomID("w_", 12)
	s.Trigger = trigger
	s.Snapshot = map[string]string{}
	for p := range s.Links {
		s.Snapshot[p] = tailOf(tails, p)
	}
	s.Delivered = false
	if s.Status != "failed" || s.Due == 0 {
		s.Due = now.UnixMilli()
	}
	if s.Config.Type == TypeWebhook {
		s.Token, s.JTI = k.mint(s.ID, s.Gen, now)
		s.LeaseUntil = now.UnixMilli() + s.Config.LeaseTTLms
	}
	return true
}

// retryDelay is the webhook retry backoff after attempts failures: from
// 1 s doubling up to 60 s, with 20% jitter.
func retryDelay(attempts int) time.Duration {
	d := time.Second << min(max(attempts-1, 0), 6)
	if d > time.Minute {
		d = time.Minute
	}
	j := float64(d) * 0.2 * (rand.Float64()*2 - 1)
	return d + time.Duration(j)
}

// ackReq is a callback's, an ack's or a release's body.
type ackReq struct {
	WakeID     *string `json:"wake_id"`
	Generation *uint64 `json:"generation"`
	Acks       []struct {
		Stream string `json:"stream"`
		Path   string `json:"path"`
		Offset string `json:"offset"`
	} `json:"acks"`
	Done bool `json:"done"`
}

// fence checks a token's claims and a request against the current wake.
func (s *sub) fence(t token, r *ackReq) *Error {
	if s.WakeID == "" || t.Gen != s.Gen || t.JTI != s.JTI || r.Generation == nil || *r.Generation != s.Gen ||
		r.WakeID == nil || *r.WakeID != s.WakeID {
		return fenced()
	}
	return nil
}

// applyAcks checks every ack first, then moves the cursors: an ack names a
// linked stream, an offset from its cursor to its tail.
func (s *sub) applyAcks(r *ackReq, tails map[string]tail) *Error {
	for _, a := range r.Acks {
		p := normalize(a.Stream)
		if p == "" {
			p = normalize(a.Path)
		}
		l := s.Links[p]
		switch {
		case p == "" || l == nil:
			return errf(409, CodeInvalidOffset, "Ack references an unknown subscription stream")
		case a.Offset == "-1":
			return errf(409, CodeInvalidOffset, "Ack offset must not be -1")
		case !validOffset(a.Offset):
			return errf(409, CodeInvalidOffset, "Ack offset %q is not an offset of this server", truncate(a.Offset, 64))
		case a.Offset < l.Acked:
			return errf(409, CodeInvalidOffset, "Ack offset regresses the committed cursor")
		case a.Offset > tailOf(tails, p):
			return errf(409, CodeInvalidOffset, "Ack offset is beyond stream tail")
		}
	}
	for _, a := range r.Acks {
		p := normalize(a.Stream)
		if p == "" {
			p = normalize(a.Path)
		}
		s.Links[p].Acked = a.Offset
	}
	return nil
}

func validOffset(o string) bool {
	if len(o) != 33 || o[16] != '_' {
		return false
	}
	for i := 0; i < len(o); i++ {
		if i != 16 && (o[i] < '0' || o[i] > '9') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
