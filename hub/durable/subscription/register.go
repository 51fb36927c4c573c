package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/runhub/runhub/journal"
)

func (m *Manager) put(w http.ResponseWriter, r *http.Request, id, root string, p Caller) *Error {
	c, e := m.parseConfig(r)
	if e != nil {
		return e
	}
	ctx := r.Context()
	k, err := m.keyring(ctx)
	if err != nil {
		return internal(err)
	}
	hash := c.hash()
	confirm := func(s *sub) *Error {
		switch {
		case s.Owner != p.Subject:
			return forbidden("the subscription is someone else's")
		case s.Hash != hash:
			return errf(http.StatusConflict, CodeAlreadyExists, "Subscription already exists with different configuration")
		}
		if err := m.indexed(ctx, s); err != nil {
			return internal(err)
		}
		m.published(ctx)
		_, tails, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) { return false, nil })
		if err != nil {
			return internal(err)
		}
		writeJSON(w, http.StatusOK, m.serialize(s, tails, root, k))
		return nil
	}
	if s, _, err := m.load(ctx, id); err == nil {
		return confirm(s)
	} else if !isNotFound(err) {
		return internal(err)
	}
	s := &sub{ID: id, Owner: p.Subject, Config: c, Hash: hash, CreatedAt: m.now().UTC().Format("2006-01-02T15:04:05.000Z"),
		Base: root, Links: map[string]*link{}, Status: "active"}
	tails := map[string]tail{}
	for _, name := range c.Streams {
		t, err := m.tail(ctx, p.Subject, name)
		if err != nil {
			return internal(err)
		}
		tails[name] = t
		l := &link{Explicit: true, Acked: zeroOffset}
		if t.ok {
			l.Acked, l.Gen = t.offset, t.gen
		}
		s.Links[name] = l
	}
	// The index first (with the bounds), then the subscription: an entry
	// left without its subscription by a crash is swept.
	if err := m.changeIndex(ctx, func(idx *index) (bool, *Error) {
		if old, ok := idx.Subs[id]; ok {
			if old.Owner != p.Subject {
				return false, forbidden("the subscription is someone else's")
			}
			return false, nil
		}
		if len(idx.Subs) >= m.o.MaxTotal {
			return false, errf(http.StatusConflict, CodeLimitExceeded, "the hub holds %d subscriptions, as many as it may", len(idx.Subs))
		}
		n := 0
		for _, e := range idx.Subs {
			if e.Owner == p.Subject {
				n++
			}
		}
		if n >= m.o.MaxPerOwner {
			return false, errf(http.StatusConflict, CodeLimitExceeded, "%q has %d subscriptions, as many as one subject may", p.Subject, n)
		}
		idx.Subs[id] = indexEntry{Owner: p.Subject, Pattern: c.Pattern, Streams: c.Streams, At: m.now().UnixMilli()}
		return true, nil
	}); err != nil {
		return internal(err)
	}
	raw, _ := json.Marshal(s)
	if _, err := m.o.Docs.PutDoc(ctx, docPrefix+id, 0, raw); errors.Is(err, journal.ErrConflict) {
		s, _, err := m.load(ctx, id) // registered meanwhile
		if err != nil {
			return internal(err)
		}
		return confirm(s)
	} else if err != nil {
		return internal(err)
	}
	m.published(ctx) // an append on any replica after the answer links what the pattern matches
	w.Header().Set("Location", root+"__ds/subscriptions/"+url.PathEscape(id))
	writeJSON(w, http.StatusCreated, m.serialize(s, tails, root, k))
	return nil
}

// indexed makes sure the index lists s as it is.
func (m *Manager) indexed(ctx context.Context, s *sub) error {
	want := indexEntry{Owner: s.Owner, Pattern: s.Config.Pattern}
	for _, p := range s.paths() {
		if s.Links[p].Explicit {
			want.Streams = append(want.Streams, p)
		}
	}
	return m.changeIndex(ctx, func(idx *index) (bool, *Error) {
		old, ok := idx.Subs[s.ID]
		want.At = old.At
		if !ok {
			want.At = m.now().UnixMilli()
		}
		if ok && old.Owner == want.Owner && old.Pattern == want.Pattern && strings.Join(old.Streams, "\x00") == strings.Join(want.Streams, "\x00") {
			return false, nil
		}
		idx.Subs[s.ID] = want
		return true, nil
	})
}

// visible loads subscription id when p may read it (its owner, an admin);
// write: and change it (its owner).
func (m *Manager) visible(ctx context.Context, id string, p Caller, write bool) (*sub, *Error) {
	s, _, err := m.load(ctx, id)
	if err != nil {
		return nil, internal(err)
	}
	switch {
	case s.Owner != p.Subject && !p.Admin:
		return nil, notFound()
	case write && s.Owner != p.Subject:
		return nil, forbidden("the admin role reads only: the subscription is someone else's")
	}
	return s, nil
}

func (m *Manager) get(w http.ResponseWriter, r *http.Request, id, root string, p Caller) *Error {
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, false); e != nil {
		return e
	}
	k, err := m.keyring(ctx)
	if err != nil {
		return internal(err)
	}
	s, tails, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) { return false, nil })
	if err != nil {
		return internal(err)
	}
	writeJSON(w, http.StatusOK, m.serialize(s, tails, root, k))
	return nil
}

func (m *Manager) remove(w http.ResponseWriter, r *http.Request, id string, p Caller) *Error {
	ctx := r.Context()
	if _, _, err := m.load(ctx, id); isNotFound(err) {
		w.WriteHeader(http.StatusNoContent) // deleting what is not there is done
		return nil
	}
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	if err := m.changeIndex(ctx, func(idx *index) (bool, *Error) {
		_, ok := idx.Subs[id]
		delete(idx.Subs, id)
		return ok, nil
	}); err != nil {
		return internal(err)
	}
	for range 64 {
		_, ver, err := m.load(ctx, id)
		if isNotFound(err) {
			break
		}
		if err != nil {
			return internal(err)
		}
		if err := m.o.Docs.DeleteDoc(ctx, docPrefix+id, ver); errors.Is(err, journal.ErrConflict) {
			continue
		} else if err != nil && !errors.Is(err, journal.ErrNotFound) {
			return internal(err)
		}
		break
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (m *Manager) addStreams(w http.ResponseWriter, r *http.Request, id string, p Caller) *Error {
	var body struct {
		Streams []json.RawMessage `json:"streams"`
	}
	if e := readJSON(r, &body); e != nil {
		return e
	}
	if len(body.Streams) == 0 {
		return invalid("streams must be a non-empty string array")
	}
	var names []string
	for _, item := range body.Streams {
		var s string
		if json.Unmarshal(item, &s) != nil {
			return invalid("streams must be a non-empty string array")
		}
		n, e := checkPath("a stream of streams", s)
		if e != nil {
			return e
		}
		names = append(names, n)
	}
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	s, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		changed := false
		for _, n := range names {
			if l := s.Links[n]; l != nil {
				changed = changed || !l.Explicit
				l.Explicit = true
				continue
			}
			if len(s.Links) >= m.o.MaxStreams {
				return false, invalid("the subscription links %d streams, as many as it may", len(s.Links))
			}
			t, err := m.tail(ctx, s.Owner, n)
			if err != nil {
				return false, internal(err)
			}
			tails[n] = t
			l := &link{Explicit: true, Acked: zeroOffset}
			if t.ok {
				l.Acked, l.Gen = t.offset, t.gen
			}
			s.Links[n], changed = l, true
		}
		return changed, nil
	})
	if err != nil {
		return internal(err)
	}
	if err := m.indexed(ctx, s); err != nil {
		return internal(err)
	}
	m.published(ctx)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (m *Manager) removeStream(w http.ResponseWriter, r *http.Request, id, name string, p Caller) *Error {
	ctx := r.Context()
	if _, e := m.visible(ctx, id, p, true); e != nil {
		return e
	}
	s, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		l := s.Links[name]
		if l == nil || !l.Explicit {
			return false, nil
		}
		l.Explicit = false
		if !l.Glob {
			delete(s.Links, name)
		}
		return true, nil
	})
	if err != nil {
		return internal(err)
	}
	if err := m.indexed(ctx, s); err != nil {
		return internal(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
