package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/runhub/runhub/journal"
)

// kick starts the delivery of s's wake when it is due.
func (m *Manager) kick(s *sub) {
	if s.WakeID == "" || s.Delivered || s.Due == 0 || s.Due > m.now().UnixMilli() || m.ctx.Err() != nil {
		return
	}
	m.inMu.Lock()
	if m.inflight[s.ID] || len(m.inflight) >= maxInflight {
		m.inMu.Unlock()
		return // under way here, or too many: the sweep starts it later
	}
	m.inflight[s.ID] = true
	m.inMu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		last := m.deliver(s.ID)
		m.inMu.Lock()
		delete(m.inflight, s.ID)
		m.inMu.Unlock()
		if last != nil {
			m.kick(last) // the next wake ({"done": true} with more work), due at once
		}
	}()
}

// attempt is one delivery attempt of a wake, taken by this replica.
type attempt struct {
	typ, wakeID, url, wakeStream, owner string
	gen                                 uint64
	body                                []byte
}

// deliver makes one attempt at delivering subscription id's wake: it
// takes the attempt (so no other replica makes it before its deadline),
// makes it, and records how it went. It returns the state it left.
func (m *Manager) deliver(id string) *sub {
	ctx := m.ctx
	k, err := m.keyring(ctx)
	if err != nil {
		return nil
	}
	var a *attempt
	_, _, err = m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		a = nil
		now := m.now()
		changed := m.settle(s, tails)
		if s.WakeID == "" || s.Delivered || s.Due == 0 || s.Due > now.UnixMilli() {
			return changed, nil
		}
		s.Due = now.Add(2*m.o.WebhookTimeout + time.Second).UnixMilli()
		s.Attempts++
		a = &attempt{typ: s.Config.Type, wakeID: s.WakeID, gen: s.Gen, url: s.Config.WebhookURL, wakeStream: s.Config.WakeStream, owner: s.Owner}
		if a.typ == TypeWebhook {
			a.body = m.notification(s)
		} else {
			a.body, _ = json.Marshal(struct {
				Type           string `json:"type"`
				SubscriptionID string `json:"subscription_id"`
				Stream         string `json:"stream"`
				Generation     uint64 `json:"generation"`
				WakeID         string `json:"wake_id"`
				TS             int64  `json:"ts"`
			}{"wake", s.ID, s.Trigger, s.Gen, s.WakeID, now.UnixMilli()})
		}
		return true, nil
	})
	if err != nil || a == nil {
		return nil
	}
	var done bool
	if a.typ == TypeWebhook {
		done, err = m.post(ctx, k, a)
	} else {
		err = m.writeWake(ctx, a)
	}
	if ctx.Err() != nil {
		return nil // stopping: the attempt's deadline lets another replica (or the next start) retry
	}
	last, _, uerr := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		if s.WakeID != a.wakeID || s.Gen != a.gen {
			return false, nil // superseded: the lease lapsed meanwhile
		}
		now := m.now()
		if err != nil {
			s.Status = "failed"
			s.Due = now.Add(retryDelay(s.Attempts)).UnixMilli()
			return true, nil
		}
		s.Delivered, s.Status, s.Attempts, s.Due = true, "active", 0, 0
		if s.Config.Type == TypeWebhook {
			s.LeaseUntil = now.UnixMilli() + s.Config.LeaseTTLms
		}
		if done { // {"done": true}: the snapshot is acked, the wake over
			for p, t := range s.Snapshot {
				if l := s.Links[p]; l != nil && t > l.Acked {
					l.Acked = t
				}
			}
			s.clearWake()
			m.settle(s, tails)
		}
		return true, nil
	})
	if err != nil {
		m.o.Logger.Warn("subscriptions: a delivery failed; it will be retried", "subscription", id, "wake", a.wakeID, "err", err)
	}
	if uerr != nil && !isNotFound(uerr) {
		m.o.Logger.Warn("subscriptions: a delivery's outcome was not recorded; it will be made again", "subscription", id, "err", uerr)
	}
	return last
}

// notification is a webhook wake's body.
func (m *Manager) notification(s *sub) []byte {
	infos := make([]streamInfo, 0, len(s.Links))
	for _, p := range s.paths() {
		l := s.Links[p]
		t, ok := s.Snapshot[p]
		if !ok {
			t = l.Acked
		}
		infos = append(infos, streamInfo{Path: p, LinkType: l.kind(), Acked: l.Acked, TailOffset: t, HasPending: t > l.Acked})
	}
	raw, _ := json.Marshal(struct {
		SubscriptionID string       `json:"subscription_id"`
		WakeID         string       `json:"wake_id"`
		Generation     uint64       `json:"generation"`
		Streams        []streamInfo `json:"streams"`
		CallbackURL    string       `json:"callback_url"`
		CallbackToken  string       `json:"callback_token"`
	}{s.ID, s.WakeID, s.Gen, infos, actionURL(s.Base, s.ID, "callback"), s.Token})
	return raw
}

// maxWebhookAnswer bounds what is read of a webhook's answer.
const maxWebhookAnswer = 64 << 10

// post makes a webhook POST, signed; done is the answer's {"done": true}.
func (m *Manager) post(ctx context.Context, k *keyring, a *attempt) (done bool, err error) {
	u, _ := urlHost(a.url)
	ctx = context.WithValue(ctx, devKey{}, isDevHost(u))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, strings.NewReader(string(a.body)))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Signature", k.sign(a.body, m.now()))
	res, err := m.client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	raw := make([]byte, 0, 256)
	buf := make([]byte, 4096)
	for len(raw) < maxWebhookAnswer {
		n, rerr := res.Body.Read(buf)
		raw = append(raw, buf[:n]...)
		if rerr != nil {
			break
		}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return false, errors.New("the webhook answered " + res.Status)
	}
	var ans struct {
		Done bool `json:"done"`
	}
	_ = json.Unmarshal(raw, &ans)
	return ans.Done, nil
}

// writeWake appends a pull-wake's event to its wake stream (which must
// exist, be the subscription owner's, and be created by the application).
func (m *Manager) writeWake(ctx context.Context, a *attempt) error {
	info, err := m.o.Streams.StreamHead(ctx, a.wakeStream)
	if err != nil {
		return err
	}
	if info.Meta.Owner != a.owner {
		return errors.New("the wake stream is someone else's")
	}
	app := journal.StreamAppend{ContentType: info.Meta.ContentType, Data: a.body}
	if journal.MediaType(info.Meta.ContentType) == "application/json" {
		app.Count = 1
	} else {
		app.Data = append(app.Data, '\n')
	}
	_, err = m.o.Streams.AppendStream(ctx, a.wakeStream, app)
	return err
}
