package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/runhub/runhub/protocol"
)

// dispatch starts the due attempts of it (s.mu held) and deletes it when
// every endpoint is done with it.
func (s *Sender) dispatch(it *item, now time.Time) {
	open := false
	for _, ep := range s.eps {
		if !ep.Wants(it.typ) {
			continue
		}
		es := it.st.Ep[ep.Name]
		if es == nil {
			es = &epState{}
			it.st.Ep[ep.Name] = es
		}
		if es.Done != "" {
			continue
		}
		if ep.disabled && !it.inflight[ep.Name] {
			es.Done = Disabled
			s.o.Metrics.outcome(Disabled)
			continue
		}
		open = true
		if it.inflight[ep.Name] || ep.inflight >= s.o.Concurrency || now.UnixMilli() < es.Next {
			continue
		}
		it.inflight[ep.Name] = true
		ep.inflight++
		es.N++
		if it.st.First == 0 {
			it.st.First = now.UnixMilli()
		}
		attempt := es.N
		s.wg.Add(1)
		go s.attempt(it, ep, attempt)
	}
	if !open && len(it.inflight) == 0 {
		// Done: deleted from the outbox. Until a list read after the
		// delete shows it gone, the entry is a tombstone, so that a list
		// read before the delete (or before the last state was saved)
		// does not bring it back.
		delete(s.items, it.entry.ID)
		id := it.entry.ID
		s.tombs[id] = -1
		s.wg.Add(1)
		go func() { // not under s.mu
			defer s.wg.Done()
			s.saveMu.Lock() // after the last OutboxSave of the entry
			err := s.o.Outbox.OutboxDelete(s.ctx, id)
			s.saveMu.Unlock()
			s.mu.Lock()
			if err != nil {
				delete(s.tombs, id) // still there: the next list loads its saved state
			} else {
				s.tombs[id] = s.lists
			}
			s.mu.Unlock()
			if err != nil && s.ctx.Err() == nil {
				s.o.Logger.Warn("webhook: deleting an outbox entry", "err", err)
			}
		}()
	}
}

// attempt POSTs it to ep once and records the outcome.
func (s *Sender) attempt(it *item, ep *endpoint, n int) {
	defer s.wg.Done()
	start := s.o.Now()
	code, err := s.post(it, ep, start)
	took := s.o.Now().Sub(start)

	s.mu.Lock()
	if err != nil && s.ctx.Err() != nil { // stopped mid-attempt: not an outcome; the outbox keeps it
		delete(it.inflight, ep.Name)
		ep.inflight--
		s.mu.Unlock()
		return
	}
	s.o.Metrics.attempted(took)
	es := it.st.Ep[ep.Name]
	d := Delivery{ID: it.msgID, Endpoint: ep.Name, Type: it.typ, SessionID: it.entry.SessionID, RunID: it.entry.RunID,
		Attempt: n, HTTPStatus: code, At: float64(start.UnixMicro()) / 1e6, DurationMS: float64(took.Microseconds()) / 1e3}
	now := s.o.Now()
	switch {
	case err == nil && code >= 200 && code < 300:
		es.Done, d.Status = Delivered, Delivered
		s.o.Metrics.outcome(Delivered)
		s.o.Metrics.lag(now.Sub(time.UnixMilli(it.st.First)))
	case err == nil && code == http.StatusGone:
		es.Done, d.Status = Disabled, Disabled
		if !ep.disabled {
			ep.disabled = true
			s.o.Logger.Warn("webhook: endpoint answered 410 Gone: disabled until restart", "endpoint", ep.Name, "url", ep.host)
		}
		s.o.Metrics.outcome(Disabled)
	default:
		reason := "status"
		if err != nil {
			reason = errorKind(err)
			d.Error = errorText(err)
		} else {
			d.Error = "HTTP " + strconv.Itoa(code)
		}
		s.o.Metrics.failed(reason)
		if now.Sub(time.UnixMilli(it.st.First)) >= s.o.Retry.GiveUp {
			es.Done, d.Status = GaveUp, GaveUp
			s.o.Metrics.outcome(GaveUp)
			s.o.Logger.Warn("webhook: notification given up", "endpoint", ep.Name, "id", it.msgID, "type", it.typ,
				"run_id", it.entry.RunID, "attempts", n, "last_error", d.Error)
		} else {
			es.Next = now.Add(s.o.Retry.delay(n, rand.Float64)).UnixMilli()
			d.Status, d.NextAt = Failed, float64(es.Next)/1e3
			s.o.Logger.Info("webhook: attempt failed", "endpoint", ep.Name, "id", it.msgID, "type", it.typ,
				"attempt", n, "error", d.Error, "next_in", time.UnixMilli(es.Next).Sub(now).Round(time.Millisecond))
		}
	}
	if d.Status == Delivered {
		s.o.Logger.Debug("webhook: delivered", "endpoint", ep.Name, "id", it.msgID, "type", it.typ, "attempt", n, "status", code)
	}
	s.record(d)
	delete(it.inflight, ep.Name)
	ep.inflight--
	s.mu.Unlock()

	// Saved before the entry can be deleted (it still counts as in flight
	// for nobody, but scan deletes only after this save: saveMu), and
	// saves are serialized so an older state never overwrites a newer
	// one. A restart resumes from here: a delivered endpoint is not sent
	// to again.
	s.saveMu.Lock()
	s.mu.Lock()
	state, _ := json.Marshal(it.st)
	s.mu.Unlock()
	// Saved even when Stop came meanwhile (Stop waits for it): an
	// acknowledged delivery must not be sent again after the restart.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), saveTimeout)
	err = s.o.Outbox.OutboxSave(sctx, it.entry.ID, state)
	cancel()
	s.saveMu.Unlock()
	if err != nil {
		s.o.Logger.Warn("webhook: saving outbox state", "err", err)
	}
	s.poke() // the entry may be done, or another attempt may be due
}

// post sends one attempt; it returns the HTTP status, or an error when
// there was no answer.
func (s *Sender) post(it *item, ep *endpoint, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(it.body))
	if err != nil {
		return 0, err
	}
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "runhub-webhooks")
	req.Header.Set(HeaderID, it.msgID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(ep.key, it.msgID, ts, it.body))
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // the answer's body is not read further
	resp.Body.Close()
	return resp.StatusCode, nil
}

// errorKind classifies an attempt without an answer (label reason).
func errorKind(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		return "dns"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "network"
}

// errorText is an attempt's error for the log and the view, without the
// URL (which may carry a token).
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return protocol.Truncate(err.Error(), 300)
}

// record adds d to the history ring (s.mu held).
func (s *Sender) record(d Delivery) {
	if len(s.history) < cap(s.history) {
		s.history = append(s.history, d)
	} else {
		s.history[s.next] = d
	}
	s.next = (s.next + 1) % cap(s.history)
}

// Deliveries returns up to limit recent attempts of this process, newest
// first.
func (s *Sender) Deliveries(limit int) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(limit, len(s.history))
	out := make([]Delivery, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, s.history[(s.next-i+len(s.history))%len(s.history)])
	}
	return out
}
